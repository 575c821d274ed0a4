"""One MCP server, connected for the worker's lifetime: a session supervised in its own task.

The supervisor opens the transport and the SDK `Client`, serves calls through an `SdkMcpClient` until
the session ends (the server died, a call found the connection closed, an HTTP server no longer knows
the session, or the worker stops), then reconnects after a backoff that doubles from
`restart_backoff.initial` to `.max`. A stdio server that died is thereby spawned again. The delay
goes back to `.initial` only once a session has stayed up for `.max`: a server that dies right after
each start is respawned ever more slowly, not at the initial rate forever. Each server's session
lives in its own task, so a server that fails never takes down the worker or another server; while
one is not connected its calls raise McpUnavailable, and nothing is sent.
"""

import asyncio
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from mcp import Client

from ..errors import McpConnectionLost, McpProtocolError, McpUnavailable
from ..nodes import McpToolPage, McpToolResult
from ._reasons import reason
from .adapter import SdkMcpClient
from .transports import ATTEMPT, Attempt, TransportFactory, watched

_LOGGER = logging.getLogger("interaction_worker.mcp")
_CLOSE_GRACE = 10.0  # seconds for a graceful close before the session is cancelled


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
    ) -> None:
        self.name = name
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
        """Connect (the worker calls this with its NATS client, unused here).

        Raises:
            McpUnavailable: a required server could not be reached; the message names it.
        """
        if self._task is not None:
            return
        self._scope = anyio.CancelScope()
        self._task = asyncio.get_running_loop().create_task(
            self._supervise(self._scope), name=f"mcp-{self.name}"
        )
        while not self._tried and not self._task.done():
            await self._changes().wait()
        if self.connected:
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
        client = self._current()
        with self._unsent():
            return await client.list_tools(cursor)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> McpToolResult:
        client = self._current()
        with self._unsent():
            return await client.call_tool(name, arguments)

    @contextmanager
    def _unsent(self) -> Iterator[None]:
        """A request that certainly did not run (it could not be posted, or the server refused its
        session) raises McpUnavailable, as when the server is not connected: it can be retried."""
        attempt = Attempt()
        token = ATTEMPT.set(attempt)
        try:
            yield
        except (McpConnectionLost, McpProtocolError):
            if attempt.unsent:
                raise McpUnavailable(
                    f"MCP server is not connected: {self.name}"
                ) from None
            raise
        finally:
            ATTEMPT.reset(token)

    def _current(self) -> SdkMcpClient:
        client = self._client
        if client is None:
            raise McpUnavailable(f"MCP server is not connected: {self.name}")
        return client

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
                if not first:
                    _LOGGER.warning(
                        "MCP server %s: %s; reconnecting in %g s", self.name, why, delay
                    )
                await anyio.sleep(delay)
                delay = min(delay * 2, longest)
        self._notify()

    async def _session(self) -> None:
        """One session: connect within `connect_timeout`, serve until it ends."""
        lost = anyio.Event()
        self._lost = lost
        with anyio.CancelScope(
            deadline=anyio.current_time() + self.connect_timeout
        ) as connecting:
            client = Client(
                watched(self._transport(), lost.set),
                read_timeout_seconds=self.timeout,
                cache=None,
            )
            async with client:
                connecting.deadline = math.inf
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
