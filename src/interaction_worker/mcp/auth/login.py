"""Signing in to an MCP server behind OAuth (`interaction-worker mcp login`), and signing out.

The sign-in is the SDK's authorization-code flow, run against the server itself: a session is
opened and its tools listed with a provider that has a person behind it, so whatever the server
refuses (at `initialize` or only at its first listing) starts discovery, registration or the client
metadata document, PKCE and the token exchange, all the SDK's. What is left here is the person's
side: the authorization URL handed over, and the redirect taken back, from a loopback callback that
answers any user agent (a browser, or a script that follows the redirect) or from a URL pasted in.
The tokens go to the store the workers read, with what was discovered, so that they refresh at the
right token endpoint.
"""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp import Client, MCPError
from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull
from mcp.types import Implementation

from .providers import LoginOAuth
from .server_auth import CLIENT_NAME, ServerAuth, package_version
from .storage import tokens_of, wanted_scope

_LOGGER = logging.getLogger("interaction_worker.mcp")
SIGN_IN_SECONDS = 300.0
_PAGE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n\r\n"
    b"<!doctype html><title>interaction-worker</title>"
    b"<p>Signed in: this tab can be closed.</p>"
)
_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n"


class SignInError(Exception):
    """The sign-in failed; the message says why in a few safe words (never a token or a code)."""


@dataclass(frozen=True)
class SignedIn:
    scopes: tuple[str, ...]
    asked: bool  # False: the server let every request through without signing in


class _Callback:
    """The loopback redirect target, for any user agent: each authorization (a sign-in may take a
    second one, a step-up) waits for the next `GET /callback?...` after it began."""

    def __init__(self) -> None:
        self.arrived: asyncio.Queue[str] = asyncio.Queue(maxsize=16)
        self.server: asyncio.Server | None = None

    async def listen(self, host: str, port: int) -> int:
        self.server = await asyncio.start_server(self._serve, host.strip("[]"), port)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            async with asyncio.timeout(10):
                line = await reader.readline()
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
            parts = line.decode("latin-1").split()
            target = parts[1] if len(parts) >= 2 else ""
            if urlsplit(target).path == "/callback" and not self.arrived.full():
                self.arrived.put_nowait(target)
                writer.write(_PAGE)
            else:
                writer.write(_NOT_FOUND)
            await writer.drain()
        except (TimeoutError, OSError, UnicodeDecodeError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


def code_result(redirected: str) -> AuthorizationCodeResult:
    """The code, state and issuer of a redirect URL (or of its path and query alone)."""
    query = parse_qs(urlsplit(redirected.strip()).query)

    def one(name: str) -> str | None:
        values = query.get(name)
        return values[0] if values else None

    return AuthorizationCodeResult(
        code=one("code") or "", state=one("state"), iss=one("iss")
    )


async def sign_in(
    auth: ServerAuth,
    *,
    show: Callable[[str], Awaitable[None]],
    pasted: Callable[[], Awaitable[str]] | None = None,
    within: float = SIGN_IN_SECONDS,
) -> SignedIn:
    """Sign in to `auth`'s server and store the tokens.

    Args:
        show: hands the authorization URL to the person (prints it, opens a browser).
        pasted: reads a redirect URL pasted back, beside the loopback callback (`--no-browser`).

    Raises:
        SignInError: what went wrong, in a few words.
    """
    host, _, port = auth.settings.redirect.rpartition(":")
    callback = _Callback()
    try:
        bound = await callback.listen(host, int(port))
    except OSError:
        raise SignInError(f"cannot listen on {auth.settings.redirect}") from None
    redirect_uri = f"http://{host}:{bound}/callback"

    async def redirected() -> AuthorizationCodeResult:
        waits: list[asyncio.Future[str]] = [
            asyncio.ensure_future(callback.arrived.get())
        ]
        if pasted is not None:
            waits.append(asyncio.ensure_future(pasted()))
        try:
            async with asyncio.timeout(within):
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        return code_result(done.pop().result())

    try:
        wanted = wanted_scope(await auth.place.store.read(auth.server) or {})
        provider = auth.login_provider(redirect_uri, show, redirected, wanted=wanted)
        await _through(auth, provider)
    finally:
        await callback.close()
    storage = provider.storage
    if storage.fresh:  # never asked: nothing was stored
        return SignedIn(scopes=(), asked=False)
    await provider.remember_discovered()
    tokens = tokens_of(await storage.record())
    scopes = tuple((tokens.scope or "").split()) if tokens else ()
    return SignedIn(scopes=scopes, asked=True)


async def _through(auth: ServerAuth, provider: LoginOAuth) -> None:
    """A session and one page of tools: any refusal on the way starts the sign-in."""
    async with httpx2.AsyncClient(
        auth=provider, timeout=httpx2.Timeout(30.0, read=60.0)
    ) as http:
        try:
            client = Client(
                streamable_http_client(auth.url, http_client=http),
                client_info=Implementation(name=CLIENT_NAME, version=package_version()),
                read_timeout_seconds=60.0,
            )
            async with client:
                await client.list_tools()
        except Exception as error:
            failure = provider.failure or _leaf(error)
            if isinstance(failure, MCPError) and not provider.storage.fresh:
                # Signed in; the server still turned the listing down (it wants more, or less).
                _LOGGER.warning(
                    "signed in, but MCP server %s answered the listing with error %s",
                    auth.server,
                    failure.code,
                )
                return
            raise SignInError(_why(failure)) from None


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _why(error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        return f"no sign-in within {SIGN_IN_SECONDS / 60:g} minutes"
    if isinstance(error, OAuthTokenError):
        return "the authorization server refused the token request"
    if isinstance(error, OAuthRegistrationError):
        return "the authorization server refused to register this client"
    if isinstance(error, OAuthFlowError):
        text = str(error)
        if text.startswith("Protected resource"):
            return "the server's protected resource metadata names another resource"
        if text.startswith("State parameter"):
            return "the redirect does not belong to this sign-in (its state differs)"
        if "issuer" in text:
            return "the authorization server's issuer does not match"
        return "the authorization flow failed"
    if isinstance(error, httpx2.HTTPError):
        return "cannot reach the server"
    if isinstance(error, MCPError):
        return f"the server answered with error {error.code}"
    return f"the sign-in failed ({type(error).__name__})"


@dataclass(frozen=True)
class SignedOut:
    had_tokens: bool
    revoked: bool
    can_revoke: bool


async def sign_out(auth: ServerAuth) -> SignedOut:
    """Forget the server's tokens, revoking them first where it offers revocation (RFC 7009)."""
    storage = auth.storage()
    record = await storage.record()
    tokens = tokens_of(record)
    found = await storage.discovered()
    endpoint = found.server.revocation_endpoint if found.server else None
    revoked = False
    if tokens is not None and endpoint is not None:
        client = await storage.get_client_info()
        revoked = await _revoke(
            str(endpoint),
            client,
            [t for t in (tokens.refresh_token, tokens.access_token) if t],
        )
    await auth.place.store.delete(auth.server)
    return SignedOut(
        had_tokens=tokens is not None, revoked=revoked, can_revoke=endpoint is not None
    )


async def _revoke(
    endpoint: str, client: OAuthClientInformationFull | None, tokens: list[str]
) -> bool:
    revoked = True
    async with httpx2.AsyncClient(timeout=10.0) as http:
        for token, hint in zip(tokens, ("refresh_token", "access_token"), strict=False):
            data = {"token": token, "token_type_hint": hint}
            basic: httpx2.BasicAuth | None = None
            if client is not None:
                method = client.token_endpoint_auth_method
                if method == "client_secret_basic" and client.client_secret:
                    basic = httpx2.BasicAuth(client.client_id, client.client_secret)
                else:
                    data["client_id"] = client.client_id
                    if method == "client_secret_post" and client.client_secret:
                        data["client_secret"] = client.client_secret
            try:
                with anyio.fail_after(10):
                    response = await http.post(
                        endpoint, data=data, auth=basic or httpx2.USE_CLIENT_DEFAULT
                    )
                revoked = revoked and response.status_code == 200
            except (httpx2.HTTPError, TimeoutError):
                revoked = False
    return revoked
