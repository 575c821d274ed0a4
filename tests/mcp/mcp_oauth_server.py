"""An MCP server behind OAuth for the tests, served in the test's own process: protected resource
metadata, an authorization server (metadata, dynamic registration, an authorization endpoint that
approves at once, a token endpoint, revocation) and a streamable-HTTP MCP endpoint that wants a
bearer token.

The token endpoint rotates refresh tokens and treats the reuse of a spent one as theft, as the
authorization servers of hosted services do: every token of that sign-in is revoked. `lifetime`
is the access tokens' life in seconds. The tool `write` needs the scope `write` beyond `read`
(403 `insufficient_scope` otherwise). `OAuthServer` records what happened, for the tests to assert.
"""

import asyncio
import base64
import hashlib
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CLIENT_ID = "machine-client"
CLIENT_SECRET = "machine-secret-s3cr3t-value"


@dataclass
class Grant:
    """One sign-in: its scopes and the refresh token that may be spent next."""

    scope: str
    refresh: str | None
    revoked: bool = False


@dataclass
class OAuthServer:
    lifetime: int = 3600
    base: str = ""
    codes: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    access: dict[str, tuple[Grant, float]] = field(default_factory=dict)
    refresh: dict[str, Grant] = field(default_factory=dict)
    clients: dict[str, str | None] = field(default_factory=dict)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    authorizations: list[dict[str, str]] = field(default_factory=list)
    reused: int = 0
    revocations: int = 0
    issued: list[str] = field(
        default_factory=list
    )  # every token and secret it handed out
    mcp_requests: list[str] = field(default_factory=list)
    client_infos: list[dict[str, Any]] = field(default_factory=list)

    # --- the authorization server
    def server_metadata(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.base,
                "authorization_endpoint": f"{self.base}/authorize",
                "token_endpoint": f"{self.base}/token",
                "registration_endpoint": f"{self.base}/register",
                "revocation_endpoint": f"{self.base}/revoke",
                "response_types_supported": ["code"],
                "grant_types_supported": [
                    "authorization_code",
                    "refresh_token",
                    "client_credentials",
                ],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": [
                    "none",
                    "client_secret_basic",
                    "client_secret_post",
                ],
                "scopes_supported": ["read", "write"],
            }
        )

    def resource_metadata(self, request: Request) -> Response:
        return JSONResponse(
            {
                "resource": f"{self.base}/mcp",
                "authorization_servers": [self.base],
                "scopes_supported": ["read", "write"],
            }
        )

    async def register(self, request: Request) -> Response:
        body = await request.json()
        client_id = f"client-{secrets.token_hex(4)}"
        self.clients[client_id] = None
        return JSONResponse(
            {
                "client_id": client_id,
                "redirect_uris": body.get("redirect_uris", []),
                "token_endpoint_auth_method": "none",
                "grant_types": body.get("grant_types", []),
            },
            status_code=201,
        )

    def authorize(self, request: Request) -> Response:
        query = dict(request.query_params)
        self.authorizations.append(query)
        code = secrets.token_urlsafe(16)
        self.issued.append(code)
        self.codes[code] = (
            query["code_challenge"],
            query.get("scope", "read"),
            query["redirect_uri"],
        )
        target = (
            query["redirect_uri"]
            + "?"
            + urlencode({"code": code, "state": query["state"]})
        )
        return RedirectResponse(target, status_code=302)

    async def token(self, request: Request) -> Response:
        form = dict(await request.form())
        fields = {k: str(v) for k, v in form.items()}
        self.token_requests.append(fields)
        grant = fields.get("grant_type")
        if grant == "authorization_code":
            found = self.codes.pop(fields.get("code", ""), None)
            verifier = fields.get("code_verifier", "")
            digest = hashlib.sha256(verifier.encode()).digest()
            challenge = base64.urlsafe_b64encode(digest).decode().rstrip("=")
            if found is None or found[0] != challenge:
                return _error("invalid_grant")
            return self._tokens(Grant(scope=found[1], refresh=None))
        if grant == "refresh_token":
            presented = fields.get("refresh_token", "")
            owner = self.refresh.get(presented)
            if owner is None or owner.revoked:
                return _error("invalid_grant")
            if owner.refresh != presented:
                # A spent refresh token again: someone else has it; end the whole sign-in.
                self.reused += 1
                owner.revoked = True
                return _error("invalid_grant")
            return self._tokens(owner)
        if grant == "client_credentials":
            if not self._client_authenticated(request, fields):
                return _error("invalid_client", 401)
            return self._tokens(
                Grant(scope=fields.get("scope", "read"), refresh=None), refresh=False
            )
        return _error("unsupported_grant_type")

    def _client_authenticated(self, request: Request, fields: dict[str, str]) -> bool:
        header = request.headers.get("authorization", "")
        if header.startswith("Basic "):
            pair = base64.b64decode(header[6:]).decode()
            return pair == f"{CLIENT_ID}:{CLIENT_SECRET}"
        return (
            fields.get("client_id") == CLIENT_ID
            and fields.get("client_secret") == CLIENT_SECRET
        )

    def _tokens(self, grant: Grant, *, refresh: bool = True) -> Response:
        access = f"at-{secrets.token_hex(12)}"
        self.issued.append(access)
        self.access[access] = (grant, time.time() + self.lifetime)
        body: dict[str, Any] = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.lifetime,
            "scope": grant.scope,
        }
        if refresh:
            token = f"rt-{secrets.token_hex(12)}"
            self.issued.append(token)
            grant.refresh = token
            self.refresh[token] = grant
            body["refresh_token"] = token
        return JSONResponse(body)

    async def revoke(self, request: Request) -> Response:
        form = await request.form()
        token = str(form.get("token", ""))
        self.revocations += 1
        grant = self.refresh.get(token) or self.access.get(token, (None, 0))[0]
        if grant is not None:
            grant.revoked = True
        return Response(status_code=200)

    def expire_access(self) -> None:
        """Every access token runs out now, by this server's clock; the refresh tokens still work."""
        for token, (grant, _) in list(self.access.items()):
            self.access[token] = (grant, 0.0)

    def revoke_all(self) -> None:
        for grant, _ in self.access.values():
            grant.revoked = True

    # --- the resource server
    def check(self, authorization: str, tool: str | None) -> tuple[int, str] | None:
        """None when the request may pass, else the status and the challenge."""
        metadata = (
            f'resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp"'
        )
        token = authorization.removeprefix("Bearer ")
        held = self.access.get(token)
        if not authorization.startswith("Bearer ") or held is None:
            return 401, f'Bearer {metadata}, scope="read"'
        grant, until = held
        if grant.revoked or time.time() > until:
            return 401, f'Bearer error="invalid_token", {metadata}'
        if tool == "write" and "write" not in grant.scope.split():
            return (
                403,
                f'Bearer error="insufficient_scope", scope="read write", {metadata}',
            )
        return None


def _error(code: str, status: int = 400) -> Response:
    return JSONResponse({"error": code}, status_code=status)


def _mcp_server() -> MCPServer:
    server = MCPServer("oauth-probe", version="1.0.0")

    @server.tool()
    async def read(text: str) -> str:
        return f"read {text}"

    @server.tool()
    async def write(text: str) -> str:
        return f"wrote {text}"

    return server


class _Guard:
    """The MCP endpoint behind the bearer check; the rest of the routes beside it."""

    def __init__(self, state: OAuthServer, mcp: ASGIApp, auth: ASGIApp) -> None:
        self.state = state
        self.mcp = mcp
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.mcp(scope, receive, send)
            return
        if scope["type"] != "http" or not scope["path"].startswith("/mcp"):
            await self.auth(scope, receive, send)
            return
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.state.mcp_requests.append(headers.get("authorization", ""))
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        tool = None
        if b'"tools/call"' in body and b'"write"' in body:
            tool = "write"
        refusal = self.state.check(headers.get("authorization", ""), tool)
        if refusal is not None:
            status, challenge = refusal
            response = JSONResponse(
                {"error": "invalid_token"},
                status_code=status,
                headers={"WWW-Authenticate": challenge},
            )
            await response(scope, receive, send)
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.mcp(scope, replay, send)


@asynccontextmanager
async def oauth_server(lifetime: int = 3600) -> AsyncIterator[tuple[str, OAuthServer]]:
    """Serve on 127.0.0.1; yields the MCP endpoint's URL and the server's record."""
    state = OAuthServer(lifetime=lifetime)
    auth = Starlette(
        routes=[
            Route("/.well-known/oauth-authorization-server", state.server_metadata),
            Route("/.well-known/oauth-protected-resource/mcp", state.resource_metadata),
            Route("/register", state.register, methods=["POST"]),
            Route("/authorize", state.authorize),
            Route("/token", state.token, methods=["POST"]),
            Route("/revoke", state.revoke, methods=["POST"]),
        ]
    )
    app = _Guard(state, _mcp_server().streamable_http_app(), auth)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("uvicorn stopped before it started")
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        state.base = f"http://127.0.0.1:{port}"
        yield f"{state.base}/mcp", state
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
