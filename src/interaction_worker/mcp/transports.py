"""How a connection reaches its server: a stdio child process or a streamable-HTTP endpoint.

A transport factory returns a fresh SDK transport (an async context manager yielding the read and
write streams) for each connection attempt. `watched` wraps one so that its owner learns when the
server's side ends (a stdio child that died, an HTTP transport that closed), even with no call in
flight. `Attempt` records, for the HTTP transport, whether a call was certainly not run: a POST that
could not connect sent nothing, and one the server refused for its session was not run, so the call
can be reported as not sent instead of as lost.

An HTTP server that no longer knows the session (it restarted, or let the session expire) answers
every later request of it with an error, and the SDK neither opens a new session nor ends the
transport: its event stream quietly reconnects and gives up. The HTTP transport therefore ends its
read side itself once the server refuses the session (`session_refused`), as a stdio transport's
ends when its child dies, and leaves with SessionExpired, so that its owner opens a new session.
"""

import json
import re
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
from anyio.streams.memory import MemoryObjectSendStream
from mcp import StdioServerParameters
from mcp.client import Transport
from mcp.client._transport import ReadStream, TransportStreams
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import MCP_SESSION_ID, streamable_http_client
from mcp.shared.message import SessionMessage

TransportFactory = Callable[[], Transport]
_Item = SessionMessage | Exception
# The JSON-RPC code the TypeScript SDK's servers give an HTTP request they turn down ("Bad Request").
_BAD_REQUEST = -32000


class SessionExpired(Exception):
    """The HTTP server refused the session: it restarted or let the session expire."""


@dataclass(frozen=True)
class Denial:
    """The server refused a request's credentials: its HTTP status (401 or 403), and from its
    `WWW-Authenticate` challenge the `error` and the `scope` it asks for."""

    status: int
    error: str | None = None
    scope: str | None = None


@dataclass
class Attempt:
    """What became of one call's HTTP requests: `refused` (a POST could not connect), `rejected`
    (the server refused the POST's session, so it did not run it), `sent` (a POST reached a
    server that took it) and `denied` (the last answer at the endpoint refused its credentials,
    so it did not run it either). Set by the HTTP transport through the `ATTEMPT` context
    variable, which the SDK carries from the caller into the task that posts the request."""

    refused: bool = False
    rejected: bool = False
    sent: bool = False
    denied: Denial | None = None

    @property
    def unsent(self) -> bool:
        """No request of the call was run by the server: each one never left or was refused."""
        return (self.refused or self.rejected) and not self.sent


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
    auth: Callable[[], httpx2.Auth] | None = None,
    transport: Callable[[], httpx2.AsyncBaseTransport] | None = None,
) -> TransportFactory:
    """Connect to a streamable-HTTP endpoint with our own `httpx2` client (the SDK's HTTP library):
    `headers` on every request, `timeout` for connecting and writing; reads are bounded by the
    call's timeout instead, so a long tool call's event stream is not cut. `auth` gives the
    client's `httpx2.Auth` (an OAuth provider, mcp/auth/) for each connection; `transport` its
    HTTP transport (tests). The transport ends, and raises SessionExpired on leaving, once the
    server refuses its session (module docstring)."""

    @asynccontextmanager
    async def open_transport() -> AsyncIterator[TransportStreams]:
        expired = anyio.Event()
        send, receive = anyio.create_memory_object_stream[_Item](0)
        inner = httpx2.AsyncHTTPTransport() if transport is None else transport()
        async with (
            httpx2.AsyncClient(
                transport=_Recording(inner, expired, url),
                headers=dict(headers or {}),
                timeout=httpx2.Timeout(timeout, read=None),
                auth=None if auth is None else auth(),
            ) as http,
            anyio.create_task_group() as group,
        ):
            group.start_soon(_close_when_set, expired, send)
            try:
                async with streamable_http_client(url, http_client=http) as streams:
                    read, write = streams
                    group.start_soon(_relay, read, send)
                    yield receive, write
            finally:
                group.cancel_scope.cancel()
        if expired.is_set():
            raise SessionExpired

    return open_transport


def session_refused(method: str, status: int, content_type: str, body: bytes) -> bool:
    """Whether the answer to a request that carried a session id refuses that session.

    404 is the MCP specification's answer for a session the server does not know; to a GET it is
    taken as such only with a JSON-RPC error in it, as the SDKs' servers send, since a server that
    offers no event stream may answer a GET with a bare 404 (instead of the 405 it should). Some
    servers (the reference server-everything among them) answer 400 instead, with the JSON-RPC
    error -32000 and no request id: the server turned the HTTP request down before reading the
    message in it. A 400 that names the request's id answers the message, not the session.
    """
    if status == 404:
        return method != "GET" or _error_answer(content_type, body) is not None
    if status != 400:
        return False
    answer = _error_answer(content_type, body)
    return (
        answer is not None
        and answer.get("id") is None
        and answer["error"].get("code") == _BAD_REQUEST
    )


def _error_answer(content_type: str, body: bytes) -> dict[str, Any] | None:
    """`body` as a JSON-RPC error answer (an object with an `error` object), or None."""
    if not content_type.lower().startswith("application/json"):
        return None
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    if not isinstance(answer, dict) or not isinstance(answer.get("error"), dict):
        return None
    return answer


class _Recording(httpx2.AsyncBaseTransport):
    """Marks the caller's `Attempt`: refused when a request could not connect, rejected when the
    server refused the request's session, else sent; and sets `expired` at a refused session."""

    def __init__(
        self, inner: httpx2.AsyncBaseTransport, expired: anyio.Event, endpoint: str
    ) -> None:
        self._inner = inner
        self._expired = expired
        self._endpoint = httpx2.URL(endpoint).copy_with(query=None, fragment=None)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        attempt = ATTEMPT.get()
        in_session = MCP_SESSION_ID in request.headers
        if in_session and request.method == "DELETE" and self._expired.is_set():
            # Ending a session the server has already forgotten: it would only refuse, and the SDK
            # would log that refusal as a warning.
            return httpx2.Response(204, request=request)
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
        if attempt is not None and self._at_endpoint(request):
            attempt.denied = denial(response)
        if in_session and response.status_code in (400, 404):
            response = await _buffered(response, request)
            refused = session_refused(
                request.method,
                response.status_code,
                response.headers.get("content-type", ""),
                response.content,
            )
            if refused:
                self._expired.set()
                if attempt is not None:
                    attempt.rejected = True
                return response
        if attempt is not None:
            attempt.sent = True
        return response

    def _at_endpoint(self, request: httpx2.Request) -> bool:
        """A request of the session itself, not one an OAuth provider makes on the way."""
        return request.url.copy_with(query=None, fragment=None) == self._endpoint

    async def aclose(self) -> None:
        await self._inner.aclose()


def denial(response: httpx2.Response) -> Denial | None:
    """The refusal of a request's credentials an answer is (401 or 403), or None."""
    if response.status_code not in (401, 403):
        return None
    challenge = response.headers.get("www-authenticate", "")
    return Denial(
        response.status_code,
        error=_challenge_field(challenge, "error"),
        scope=_challenge_field(challenge, "scope"),
    )


def _challenge_field(challenge: str, name: str) -> str | None:
    match = re.search(rf'\b{name}=(?:"([^"]*)"|([^\s,]+))', challenge)
    if match is None:
        return None
    value = match.group(1) if match.group(1) is not None else match.group(2)
    return value if value.isprintable() else None


async def _buffered(
    response: httpx2.Response, request: httpx2.Request
) -> httpx2.Response:
    """`response` with its body read (an error answer: small), so that it can be looked at here and
    still be read by the SDK."""
    try:
        raw = b"".join([part async for part in response.aiter_raw()])
    finally:
        await response.aclose()
    copy = httpx2.Response(
        response.status_code,
        headers=response.headers,
        stream=httpx2.ByteStream(raw),
        request=request,
        extensions=response.extensions,
    )
    await copy.aread()
    return copy


async def _relay(read: ReadStream[_Item], send: MemoryObjectSendStream[_Item]) -> None:
    """Forward `read` to `send` until `send` is closed, then drain `read` until the SDK closes it:
    its tasks must not block writing to a stream nobody reads, or they fail when it is closed."""
    try:
        async for item in read:
            try:
                await send.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        send.close()


async def _close_when_set(
    event: anyio.Event, send: MemoryObjectSendStream[_Item]
) -> None:
    await event.wait()
    send.close()


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
