"""One MCP server, connected for the worker's lifetime: a session supervised in its own task.

The supervisor opens the transport and the SDK `Client`, serves calls through an `SdkMcpClient` until
the session ends (the server died, a call found the connection closed, an HTTP server no longer knows
the session, or the worker stops), then reconnects after a backoff that doubles from
`restart_backoff.initial` to `.max`. A stdio server that died is thereby spawned again. The delay
goes back to `.initial` only once a session has stayed up for `.max`: a server that dies right after
each start is respawned ever more slowly, not at the initial rate forever. Each server's session
lives in its own task, so a server that fails never takes down the worker or another server; while
one is not connected its calls raise McpUnavailable, and nothing is sent.

A server that refuses the worker's credentials (HTTP 401) is down in its own way: its calls raise
McpDenied, which says how to sign in, and a server with `auth:` never stops the start for it. Such a
server is tried again as soon as its stored tokens change (someone signed in), without the backoff:
the supervisor watches the store's revision, and a call that finds it changed waits for the new
session (up to `connect_timeout`) instead of being refused.
"""

import asyncio
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from mcp import Client
from mcp.types import Implementation
from nats.aio.client import Client as NatsClient

from ..errors import McpConnectionLost, McpProtocolError, McpUnavailable
from ..nodes import McpToolPage, McpToolResult
from ._denials import denied, down_reason
from ._reasons import reason
from .adapter import SdkMcpClient
from .auth import CLIENT_NAME, ServerAuth, package_version
from .transports import ATTEMPT, Attempt, Denial, TransportFactory, watched

_LOGGER = logging.getLogger("interaction_worker.mcp")
_CLOSE_GRACE = 10.0  # seconds for a graceful close before the session is cancelled
_WATCH = (
    0.5  # seconds between two looks at the stored tokens of a server that refused them
)


class _Refused(Exception):
    """A connection attempt the server refused for its credentials."""

    def __init__(self, denial: Denial) -> None:
        super().__init__(denial.status)
        self.denial = denial


class McpServerConnection:
    """An McpClient for one server, with `start()`/`aclose()` for the worker to call.

    Args:
        name: the server's name, used in log lines and in the start failure.
        transport: a factory of SDK transports (`stdio_transport`, `http_transport`).
        timeout: seconds a call or a listing page may take; past it the request is cancelled on
            the server and the call raises McpTimeout.
        required: when True, `start()` fails if the first connection fails; when False, the worker
            starts without the server and the connection keeps trying in the background.
        backoff: the first and the longest delay, in seconds, between connection attempts.
        connect_timeout: seconds a connection attempt (spawn and handshake) may take; default 30.
        auth: the server's OAuth (`auth:`), whose stored tokens the connection watches.
    """

    def __init__(
        self,
        name: str,
        transport: TransportFactory,
        *,
        timeout: float = 30.0,
        required: bool = True,
        backoff: tuple[float, float] = (0.5, 30.0),
        connect_timeout: float | None = None,
        auth: ServerAuth | None = None,
    ) -> None:
        self.name = name
        self.auth = auth
        self.timeout = timeout
        self.required = required
        self.backoff = backoff
        self.connect_timeout = 30.0 if connect_timeout is None else connect_timeout
        self._transport = transport
        self._client: SdkMcpClient | None = None
        self._lost: anyio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        # Made when started: a connection can be built before there is an event loop.
        self._scope: anyio.CancelScope | None = None
        self._changed: anyio.Event | None = None
        self._tried = False
        self._failure: str | None = None
        self._closing = False
        self._up_since: float | None = None  # when the current session connected
        self.sessions = 0  # sessions opened so far
        self._denied: Denial | None = (
            None  # the server refused the credentials, until it takes them
        )
        self._attempt_at: object = (
            None  # the stored tokens' revision an attempt began with
        )
        self._refused_at: object = (
            None  # ... and the one of the attempt the server refused
        )
        self._retry: anyio.Event | None = None

    @property
    def down_reason(self) -> str | None:
        """Why the server is down when it refused the credentials; None otherwise."""
        if self.connected or self._denied is None:
            return None
        return down_reason(self.name, self.auth)

    @property
    def connected(self) -> bool:
        return self._client is not None

    async def wait_connected(self, *, after: int = 0) -> None:
        """Wait until a session later than the `after`-th is connected (bound it with a timeout)."""
        while not (self.connected and self.sessions > after):
            if self._closing:
                raise McpUnavailable(f"MCP server {self.name} is closed")
            await self._changes().wait()

    async def start(self, _bus: object = None) -> None:
        """Connect (the worker calls this with its NATS client: the token bucket's, with `auth:`).

        Raises:
            McpUnavailable: a required server could not be reached; the message names it.
        """
        if self._task is not None:
            return
        if self.auth is not None:
            self.auth.bind(_bus if isinstance(_bus, NatsClient) else None)
            if (
                self.auth.settings.type == "client_credentials"
                and not self.auth.settings.issuer
            ):
                _LOGGER.warning(
                    "MCP server %s: auth has no issuer: the server decides which authorization "
                    "server receives the client's credentials",
                    self.name,
                )
        self._scope = anyio.CancelScope()
        self._task = asyncio.get_running_loop().create_task(
            self._supervise(self._scope), name=f"mcp-{self.name}"
        )
        while not self._tried and not self._task.done():
            await self._changes().wait()
        if self.connected:
            return
        if self._denied is not None and (self.auth is not None or not self.required):
            _LOGGER.warning(
                "MCP server %s is down: %s",
                self.name,
                down_reason(self.name, self.auth),
            )
            return
        if self.required:
            await self.aclose()
            raise McpUnavailable(
                f"cannot connect to MCP server {self.name}: {self._failure}"
            )
        _LOGGER.warning(
            "MCP server %s is not reachable (%s); connecting in the background",
            self.name,
            self._failure,
        )

    async def aclose(self) -> None:
        """Close the session (a stdio server is stopped) and stop reconnecting."""
        self._closing = True
        self._notify()
        task, scope = self._task, self._scope
        if task is None or scope is None or task.done():
            return
        if self._lost is not None and self._client is not None:
            self._lost.set()  # leave the session the ordinary way first
        else:
            scope.cancel()
        try:
            with anyio.move_on_after(_CLOSE_GRACE):
                await asyncio.wait({task})
        finally:
            if not task.done():
                scope.cancel()
                await asyncio.wait({task})

    async def __aenter__(self) -> "McpServerConnection":
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def list_tools(self, cursor: str | None = None) -> McpToolPage:
        client = await self._current()
        with self._unsent():
            return await client.list_tools(cursor)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> McpToolResult:
        client = await self._current()
        with self._unsent():
            return await client.call_tool(name, arguments)

    @contextmanager
    def _unsent(self) -> Iterator[None]:
        """A request that certainly did not run (it could not be posted, or the server refused its
        session) raises McpUnavailable, as when the server is not connected: it can be retried.
        One whose credentials the server refused raises McpDenied; after a 401 the session ends,
        and the server is down until its tokens change."""
        attempt = Attempt()
        token = ATTEMPT.set(attempt)
        try:
            yield
        except (McpConnectionLost, McpProtocolError):
            if attempt.denied is not None:
                if attempt.denied.status == 401 and self._lost is not None:
                    self._denied, self._refused_at = attempt.denied, self._attempt_at
                    self._lost.set()
                raise denied(self.name, attempt.denied, self.auth) from None
            if attempt.unsent:
                raise McpUnavailable(
                    f"MCP server is not connected: {self.name}"
                ) from None
            raise
        finally:
            ATTEMPT.reset(token)

    async def _current(self) -> SdkMcpClient:
        client = self._client
        if client is not None:
            return client
        refusal = self._denied
        if refusal is None:
            raise McpUnavailable(f"MCP server is not connected: {self.name}")
        if self.auth is not None:
            # Someone may have signed in since the refusal: the call waits until a session with the
            # tokens stored now is up, or an attempt with them was refused too.
            with anyio.move_on_after(self.connect_timeout):
                while not self._closing and self._client is None:
                    stored = await self.auth.revision()
                    if self._denied is not None and stored == self._refused_at:
                        break
                    self._wake()
                    with anyio.move_on_after(_WATCH):
                        await self._changes().wait()
            if self._client is not None:
                return self._client
        raise denied(self.name, self._denied or refusal, self.auth)

    def _wake(self) -> None:
        if self._retry is not None:
            self._retry.set()

    def _changes(self) -> anyio.Event:
        """An event set at the next change of state (connected, disconnected, closing)."""
        if self._changed is None:
            self._changed = anyio.Event()
        return self._changed

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def _supervise(self, scope: anyio.CancelScope) -> None:
        initial, longest = self.backoff
        delay = initial
        with scope:
            while not self._closing:
                self._up_since = None
                try:
                    await self._session()
                    why = "the connection was lost"
                except _Refused as refusal:
                    why = down_reason(self.name, self.auth)
                    self._denied, self._refused_at = refusal.denial, self._attempt_at
                    self._notify()
                except Exception as error:
                    why = reason(error, self.connect_timeout)
                up = self._up_since
                if up is not None and anyio.current_time() - up >= longest:
                    delay = initial
                first = not self._tried
                if first:  # start() reports it: fails, or logs that it goes on trying
                    self._tried, self._failure = True, why
                    self._notify()
                if self._closing:
                    break
                if self._denied is not None and self.auth is not None:
                    await self._until_tokens_change()
                    delay = initial
                    continue
                if not first:
                    _LOGGER.warning(
                        "MCP server %s: %s; reconnecting in %g s", self.name, why, delay
                    )
                await anyio.sleep(delay)
                delay = min(delay * 2, longest)
        self._notify()

    async def _until_tokens_change(self) -> None:
        """Wait until the stored tokens change, or a call saw them change."""
        assert self.auth is not None
        retry = self._retry = anyio.Event()
        while not self._closing and not retry.is_set():
            if await self.auth.revision() != self._refused_at:
                break
            with anyio.move_on_after(_WATCH):
                await retry.wait()

    async def _session(self) -> None:
        """One session: connect within `connect_timeout`, serve until it ends."""
        lost = anyio.Event()
        self._lost = lost
        attempt = Attempt()
        token = ATTEMPT.set(attempt)
        if self.auth is not None:
            self._attempt_at = await self.auth.revision()
        try:
            await self._connect(lost, attempt)
        except Exception:
            if attempt.denied is not None and attempt.denied.status == 401:
                raise _Refused(attempt.denied) from None
            raise
        finally:
            ATTEMPT.reset(token)

    async def _connect(self, lost: anyio.Event, attempt: Attempt) -> None:
        with anyio.CancelScope(
            deadline=anyio.current_time() + self.connect_timeout
        ) as connecting:
            client = Client(
                watched(self._transport(), lost.set),
                read_timeout_seconds=self.timeout,
                cache=None,
                client_info=Implementation(name=CLIENT_NAME, version=package_version()),
            )
            async with client:
                connecting.deadline = math.inf
                self._denied = None
                attempt.denied = None
                self._client = SdkMcpClient(
                    client, timeout=self.timeout, on_lost=lost.set
                )
                self.sessions += 1
                self._up_since = anyio.current_time()
                self._tried = True
                self._notify()
                try:
                    await lost.wait()
                finally:
                    self._client = None
                    self._notify()
        if connecting.cancelled_caught:
            raise TimeoutError
