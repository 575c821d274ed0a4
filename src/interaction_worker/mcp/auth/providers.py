"""The SDK's OAuth providers, as a fleet of workers and `mcp login` use them.

Everything of the protocol (discovery with the 2025-03-26 fallbacks, registration, PKCE, the
`resource` parameter, scope selection and step-up, refresh) is the SDK's: `OAuthClientProvider`,
`ClientCredentialsOAuthProvider` and `PrivateKeyJWTOAuthProvider`. `Fleet` adds, over their public
`async_auth_flow` and two private steps, what a fleet needs:

- Tokens another process stored (a sign-in, another worker's refresh) are taken up: when the
  store's revision changes, the provider loads its storage again (`_initialized`), and the stored
  expiry, which the SDK does not keep, becomes its `token_expiry_time` (`_initialize`).
- The refresh lease: before the SDK refreshes, the provider takes the store's lease for the server
  and reads the stored tokens again; if another worker refreshed meanwhile, those are used and the
  SDK sees nothing to refresh, else the SDK refreshes (its private `_refresh_token` /
  `_handle_refresh_response` step) while the lease is held. So a rotating refresh token is spent
  by one worker only.
- A 401 for a token the provider took for valid (the server's clock runs ahead, or it revoked the
  token) is taken, once per request, as the token having run out: refreshed, and the request sent
  again.
- No person: a worker's authorization-code provider cannot sign in. When the server refuses the
  request (401, or 403 `insufficient_scope`), the flow ends there and the refusal goes back to the
  transport as the server sent it, instead of the SDK starting a sign-in that has no one to finish
  it; the scopes a 403 asked for are remembered for the next `mcp login`. A client-credentials
  provider fetches its tokens itself, step-up included.

These lean on the SDK's private names (`_initialize`, `_initialized`, `context`), so the `mcp`
dependency is pinned to its minor version and tests/mcp/test_mcp_oauth_sdk.py holds them.
"""

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
)
from mcp.client.auth.utils import extract_field_from_www_auth

from .storage import ServerTokens

_LOGGER = logging.getLogger("interaction_worker.mcp")
_RUN_OUT = 1.0  # an expiry long past (0 would read as "no expiry")


def refused(response: httpx2.Response) -> bool:
    """A refusal of the request's credentials: 401, or 403 for want of scope."""
    return response.status_code == 401 or (
        response.status_code == 403
        and extract_field_from_www_auth(response, "error") == "insufficient_scope"
    )


class Fleet(OAuthClientProvider):
    """What the three providers share (module docstring); set up by `join_fleet` after the SDK's
    constructor."""

    storage: ServerTokens
    person: bool  # a person can sign in (mcp login): the SDK's whole flow runs
    _seen: object = None
    _rejected: str | None = None  # an access token the server answered 401 to

    def join_fleet(self, storage: ServerTokens, *, person: bool) -> None:
        self.storage = storage
        self.person = person
        self._seen = None

    def granted(self) -> set[str]:
        """The scopes of the tokens held now."""
        tokens = self.context.current_tokens
        return set((tokens.scope or "").split()) if tokens else set()

    async def _initialize(self) -> None:
        await super()._initialize()
        context = self.context
        tokens = context.current_tokens
        if tokens is not None and tokens.access_token == self._rejected:
            context.token_expiry_time = _RUN_OUT  # the server refused it already
        elif tokens is not None and tokens.expires_in is not None:
            context.update_token_expiry(tokens)
        else:
            context.token_expiry_time = None
        if context.oauth_metadata is None:
            # What `mcp login` discovered, so that this process refreshes at the server's token
            # endpoint with the `resource` it checked, without a discovery of its own.
            found = await self.storage.discovered()
            context.oauth_metadata = found.server
            context.protected_resource_metadata = found.resource
            context.auth_server_url = found.auth_server_url

    async def remember_discovered(self) -> None:
        """Store what this provider discovered, for the workers that refresh these tokens."""
        context = self.context
        await self.storage.remember(
            server=context.oauth_metadata,
            resource=context.protected_resource_metadata,
            auth_server_url=context.auth_server_url,
        )

    async def _take_up_stored(self) -> None:
        revision = await self.storage.store.revision(self.storage.server)
        if revision != self._seen:
            self._seen = revision
            self._initialized = False

    def _must_refresh(self) -> bool:
        context = self.context
        return (
            self._initialized
            and not context.is_token_valid()
            and context.can_refresh_token()
        )

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        for first in (True, False):
            again = False
            await self._take_up_stored()
            if not self._initialized:
                await self._initialize()
            lease: AbstractAsyncContextManager[None] | None = None
            if self._must_refresh():
                lease = self.storage.store.lease(self.storage.server)
                await lease.__aenter__()
                # The stored tokens again, now that no one else refreshes: another worker may have.
                self._seen = await self.storage.store.revision(self.storage.server)
                await self._initialize()
            flow = super().async_auth_flow(request)
            try:
                outgoing = await flow.__anext__()
                while True:
                    if lease is not None and outgoing is request:
                        await _leave(lease)  # refreshed, or nothing left to refresh
                        lease = None
                    response = yield outgoing
                    if outgoing is request and not self.person and refused(response):
                        if first and self._ran_out(request, response):
                            again = True
                            break
                        if await self._cannot_cure(response):
                            return
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            finally:
                if lease is not None:
                    await _leave(lease)
                await flow.aclose()
            if not again:
                return

    def _ran_out(self, request: httpx2.Request, response: httpx2.Response) -> bool:
        """A 401 for a token this process took for valid (the server's clock, or a token it
        revoked): once, it is taken as run out, refreshed and the request sent again."""
        tokens = self.context.current_tokens
        if response.status_code != 401 or "authorization" not in request.headers:
            return False
        if tokens is None or not self.context.can_refresh_token():
            return False
        self._rejected = tokens.access_token
        self.context.token_expiry_time = _RUN_OUT
        return True

    async def _cannot_cure(self, response: httpx2.Response) -> bool:
        """Whether this provider, with no person, must leave the refusal as it is."""
        return False


class WorkerOAuth(Fleet):
    """Authorization code with PKCE (`type: oauth`): a worker refreshes; only `mcp login` signs in."""

    async def _cannot_cure(self, response: httpx2.Response) -> bool:
        scope = extract_field_from_www_auth(response, "scope")
        if response.status_code == 403 and scope:
            await self.storage.want_scope(scope)
        return True


class LoginOAuth(Fleet):
    """Authorization code with PKCE as `mcp login` runs it: the scopes a worker was refused for
    lack of (`wanted`) are asked for beside the ones the SDK chose."""

    wanted: str | None = None
    failure: BaseException | None = None

    async def _perform_authorization(self) -> httpx2.Request:
        metadata = self.context.client_metadata
        if self.wanted:
            chosen = dict.fromkeys((metadata.scope or "").split())
            chosen.update(dict.fromkeys(self.wanted.split()))
            metadata.scope = " ".join(chosen)
        return await super()._perform_authorization()

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        # The SDK's failures end the transport's task; the sign-in reports them from here.
        flow = super().async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        except Exception as error:
            self.failure = error
            raise
        finally:
            await flow.aclose()


class FleetClientCredentials(Fleet, ClientCredentialsOAuthProvider):
    """Client credentials with a secret (`type: client_credentials`)."""


class FleetPrivateKeyJWT(Fleet, PrivateKeyJWTOAuthProvider):
    """Client credentials with a signed assertion (`token_endpoint_auth: private_key_jwt`)."""


async def _leave(lease: AbstractAsyncContextManager[None]) -> None:
    await lease.__aexit__(None, None, None)


Handler = Callable[[str], Awaitable[None]]
