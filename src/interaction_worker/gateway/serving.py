"""Serving the gateway: over stdio (what a host starts as a subprocess), or over streamable HTTP at
`/mcp`, the SDK's session manager mounted in the package's Starlette/uvicorn server
(monitoring/http.py), behind the access rules of access.py.
"""

import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import uvicorn
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import (
    StreamableHTTPASGIApp,
    StreamableHTTPSessionManager,
)
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp

from ..monitoring.http import (
    CannotListen,
    ListenError,
    LoopServer,
    listen,
    serving,
    url_of,
)
from .access import BearerGate, transport_security
from .server import Gateway

MCP_PATH = "/mcp"


@dataclass(frozen=True)
class HttpOptions:
    """Where and how the gateway serves over HTTP.

    Attributes:
        host, port: the address (port 0: any free one).
        token: the bearer token every request must carry (`--allow-remote`), else None.
        tls_cert, tls_key: the certificate chain and its key (PEM), for https.
    """

    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None and self.tls_key is not None


def check_tls(cert: Path, key: Path) -> None:
    """Raises:
    ListenError: the certificate or its key cannot be loaded (one line saying why)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as error:
        reason = getattr(error, "strerror", None) or getattr(error, "reason", None)
        raise ListenError(
            f"--tls-cert {cert} --tls-key {key}: cannot load them ({reason or type(error).__name__})"
        ) from None


async def serve_stdio(gateway: Gateway) -> None:
    """Serve one session on stdin and stdout, until stdin ends."""
    async with stdio_server() as (read, write), anyio.create_task_group() as group:
        group.start_soon(gateway.run_watch)
        await gateway.server.run(read, write, gateway.initialization_options())
        group.cancel_scope.cancel()


def http_app(manager: StreamableHTTPSessionManager, token: str | None) -> ASGIApp:
    """`/mcp` on the session manager; behind the bearer token when there is one."""
    app: ASGIApp = Starlette(
        routes=[Route(MCP_PATH, endpoint=StreamableHTTPASGIApp(manager))]
    )
    return app if token is None else BearerGate(app, token)


async def serve_http(
    gateway: Gateway,
    options: HttpOptions,
    *,
    ready: Callable[[str], None],
    stop: asyncio.Event,
) -> None:
    """Serve until `stop` is set; `ready` hears the URL of `/mcp` once it listens.

    Raises:
        ListenError: the address cannot be listened on.
    """
    try:
        sock = await listen(options.host, options.port)
    except CannotListen as error:
        raise ListenError(str(error)) from None
    manager = StreamableHTTPSessionManager(
        app=gateway.server,
        security_settings=transport_security(
            options.host, remote=options.token is not None
        ),
    )
    config = uvicorn.Config(
        http_app(manager, options.token),
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=2,
        ssl_certfile=options.tls_cert,
        ssl_keyfile=options.tls_key,
    )
    server = LoopServer(config)
    async with manager.run(), anyio.create_task_group() as group:
        group.start_soon(gateway.run_watch)
        task = await serving(server, sock)
        stopping = asyncio.ensure_future(stop.wait())
        try:
            if not server.listening.is_set():
                raise ListenError(f"cannot serve on {options.host}:{options.port}")
            ready(url_of(sock, "https" if options.tls else "http") + MCP_PATH)
            await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            server.should_exit = True
            await asyncio.wait({task})
            group.cancel_scope.cancel()
