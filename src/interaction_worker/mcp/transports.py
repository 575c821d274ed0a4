"""How a connection reaches its server: a stdio child process or a streamable-HTTP endpoint.

A transport factory returns a fresh SDK transport (an async context manager yielding the read and
write streams) for each connection attempt. `watched` wraps one so that its owner learns when the
server's side ends (a stdio child that died, an HTTP transport that closed), even with no call in
flight. `Attempt` records, for the HTTP transport, whether a call's request ever left: a POST that
could not connect sent nothing, so the call can be reported as not sent instead of as lost.
"""

import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import anyio
import httpx2
from mcp import StdioServerParameters
from mcp.client import Transport
from mcp.client._transport import TransportStreams
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

TransportFactory = Callable[[], Transport]


@dataclass
class Attempt:
    """What became of one call's HTTP requests: `refused` (a POST could not connect) and `sent`
    (a POST reached the server). Set by the HTTP transport through the `ATTEMPT` context variable,
    which the SDK carries from the caller into the task that posts the request."""

    refused: bool = False
    sent: bool = False

    @property
    def unsent(self) -> bool:
        return self.refused and not self.sent


ATTEMPT: ContextVar[Attempt | None] = ContextVar(
    "interaction_worker_mcp_attempt", default=None
)


def stdio_transport(
    command: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    errlog: TextIO | None = None,
) -> TransportFactory:
    """Spawn `command args` for each connection; its environment is the SDK's minimal one (HOME,
    LOGNAME, PATH, SHELL, TERM, USER) plus `env`, nothing else inherited; its stderr goes to
    `errlog` (default: this process's stderr)."""
    params = StdioServerParameters(
        command=command, args=list(args), env=dict(env or {}), cwd=cwd
    )

    def open_transport() -> Transport:
        return stdio_client(params, errlog=errlog or sys.stderr)

    return open_transport


def http_transport(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> TransportFactory:
    """Connect to a streamable-HTTP endpoint with our own `httpx2` client (the SDK's HTTP library):
    `headers` on every request, `timeout` for connecting and writing; reads are bounded by the
    call's timeout instead, so a long tool call's event stream is not cut."""

    @asynccontextmanager
    async def open_transport() -> AsyncIterator[TransportStreams]:
        async with httpx2.AsyncClient(
            transport=_Recording(httpx2.AsyncHTTPTransport()),
            headers=dict(headers or {}),
            timeout=httpx2.Timeout(timeout, read=None),
        ) as http:
            async with streamable_http_client(url, http_client=http) as streams:
                yield streams

    return open_transport


class _Recording(httpx2.AsyncBaseTransport):
    """Marks the caller's `Attempt`: refused when a request could not connect, else sent."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        attempt = ATTEMPT.get()
        try:
            response = await self._inner.handle_async_request(request)
        except (httpx2.ConnectError, httpx2.ConnectTimeout):
            if attempt is not None:
                attempt.refused = True
            raise
        except BaseException:
            if attempt is not None:
                attempt.sent = True
            raise
        if attempt is not None:
            attempt.sent = True
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def watched(
    transport: AbstractAsyncContextManager[TransportStreams],
    ended: Callable[[], None],
) -> AsyncIterator[TransportStreams]:
    """`transport`, whose read side is relayed so that `ended()` is called once the server's side
    ends (end of stream or a closed stream), whatever the session above it is doing."""
    async with transport as (read, write):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            try:
                async with send:
                    async for item in read:
                        await send.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                ended()

        async with anyio.create_task_group() as group:
            group.start_soon(relay)
            try:
                yield receive, write
            finally:
                group.cancel_scope.cancel()
