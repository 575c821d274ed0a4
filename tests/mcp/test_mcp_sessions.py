"""Streamable-HTTP servers with sessions that restart under an idle worker: the server forgets the
session and refuses it (404, or server-everything's 400), the connection opens a new one, and a call
that found the old one refused was not run: it is MCP_UNAVAILABLE, retryable.

The servers are SDK servers in this process, restarted on the same port (`mcp_sessions`); the same
against real server processes, killed both ways, is in tests/bus/test_bus_mcp.py (marked slow).
"""

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest
from mcp_harness import BACKOFF, START
from mcp_npm import free_port
from mcp_pages_server import serving
from mcp_sessions import EVERYTHING_REFUSAL, handshake_era, refusing_with_400
from starlette.types import ASGIApp, Receive, Scope, Send

from interaction_worker import McpRegistry, Sandbox
from interaction_worker.contracts import McpDiscoverOutput, McpInvokeOutput
from interaction_worker.errors import Unavailable
from interaction_worker.mcp import McpServerConnection, http_transport
from interaction_worker.mcp.transports import session_refused

Wrap = Callable[[ASGIApp], ASGIApp]


def refusing_with_404(app: ASGIApp) -> ASGIApp:
    return handshake_era(app)  # the SDK server's own answer


def refusing_like_everything(app: ASGIApp) -> ASGIApp:
    return handshake_era(refusing_with_400(app))


REFUSALS = [
    pytest.param(refusing_with_404, id="404"),
    pytest.param(refusing_like_everything, id="400"),
]


def answering_get(status: int, refusing: Wrap) -> Wrap:
    """A server that offers no GET event stream: it answers a GET with `status`, and no JSON."""

    def wrap(app: ASGIApp) -> ASGIApp:
        inner = refusing(app)

        async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and scope["method"] == "GET":
                headers = [(b"content-type", b"text/html")]
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": headers,
                    }
                )
                await send({"type": "http.response.body", "body": b"Cannot GET /mcp"})
                return
            await inner(scope, receive, send)

        return wrapped

    return wrap


def without_event_stream(refusing: Wrap) -> Wrap:
    """A server that offers no GET event stream (405, as the specification says): only a call can
    find its session refused, so the call always comes first."""
    return answering_get(405, refusing)


@pytest.fixture
def port() -> int:
    """The port the test's server has, and has again after each restart."""
    return free_port()


@pytest.fixture
async def connection(port: int) -> AsyncIterator[McpServerConnection]:
    """A connection to the server on `port`, not started; closed even when the test fails."""
    connection = McpServerConnection(
        "pages",
        http_transport(f"http://127.0.0.1:{port}/mcp", timeout=10.0),
        timeout=10.0,
        backoff=BACKOFF,
        connect_timeout=START,
    )
    try:
        yield connection
    finally:
        await connection.aclose()


async def invoke(registry: McpRegistry, name: str, x: int) -> dict[str, Any]:
    output = await registry.execute(
        {
            "operation": "invoke",
            "server": "pages",
            "call": {"id": f"c-{name}-{x}", "name": name, "arguments": {"x": x}},
        },
        Sandbox(mcp=["pages"]),
    )
    assert isinstance(output, McpInvokeOutput)
    wire: dict[str, Any] = output.result.to_wire()
    return wire


async def discover(registry: McpRegistry) -> list[str]:
    output = await registry.execute(
        {"operation": "discover", "server": "pages"}, Sandbox(mcp=["pages"])
    )
    assert isinstance(output, McpDiscoverOutput)
    return [capability.name for capability in output.capabilities]


@pytest.mark.parametrize("refusing", REFUSALS)
async def test_a_call_on_a_session_the_restarted_server_forgot_was_not_run_and_the_next_is_served(
    refusing: Wrap,
    port: int,
    connection: McpServerConnection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    wrap = without_event_stream(refusing)
    registry = McpRegistry()
    registry.register("pages", connection)

    async with serving("pages", port, wrap=wrap):
        await connection.start()
        first = await invoke(registry, "t0", 1)
    async with serving("pages", port, wrap=wrap):
        refused = await invoke(registry, "t1", 2)
        with anyio.fail_after(START):
            await connection.wait_connected(after=1)
        served = await invoke(registry, "t1", 2)
    async with serving("pages", port, wrap=wrap):
        with pytest.raises(Unavailable) as unlisted:
            await discover(registry)
        with anyio.fail_after(START):
            await connection.wait_connected(after=2)
        listed = await discover(registry)
        await connection.aclose()  # before its server stops

    assert first["structuredContent"] == {"tool": "t0", "x": 1}
    assert refused == {
        "callId": "c-t1-2",
        "source": "pages:t1",
        "status": "failed",
        "error": {
            "code": "MCP_UNAVAILABLE",
            "message": "MCP server is not connected",
            "retryable": True,
        },
    }
    assert served["structuredContent"] == {"tool": "t1", "x": 2}
    assert str(unlisted.value) == "MCP server is not connected: pages"
    assert listed == [f"t{i}" for i in range(6)]
    assert connection.sessions == 3
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    # No warning of the SDK's either, for a session it could not end.
    assert [warning.partition(";")[0] for warning in warnings] == [
        "MCP server pages: the server no longer knows the session"
    ] * 2


@pytest.mark.parametrize("refusing", REFUSALS)
async def test_an_idle_connection_opens_a_new_session_once_the_restarted_server_refuses_the_old(
    refusing: Wrap, port: int, connection: McpServerConnection
) -> None:
    async with serving("pages", port, wrap=refusing):
        await connection.start()
        assert connection.sessions == 1
    async with serving("pages", port, wrap=refusing):
        # The SDK's event stream reconnects by itself a second later; its refusal ends the session.
        with anyio.fail_after(START):
            await connection.wait_connected(after=1)
        result = await connection.call_tool("t2", {"x": 3})
        await connection.aclose()  # before its server stops

    assert result.structured_content == {"tool": "t2", "x": 3}


async def test_a_bare_404_to_the_event_stream_does_not_end_the_session(
    port: int, connection: McpServerConnection
) -> None:
    # A server without an event stream may answer the GET with a bare 404 instead of 405: the
    # session is still the server's.
    async with serving("pages", port, wrap=answering_get(404, refusing_with_404)):
        await connection.start()
        await anyio.sleep(0.5)  # the GET has been answered
        result = await connection.call_tool("t0", {"x": 4})
        await connection.aclose()  # before its server stops

    assert result.structured_content == {"tool": "t0", "x": 4}
    assert connection.sessions == 1


def body(value: dict[str, Any]) -> bytes:
    return json.dumps(value).encode()


@pytest.mark.parametrize(
    ("method", "status", "content_type", "content", "refused"),
    [
        pytest.param("POST", 404, "application/json", body({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}), True, id="sdk-404"),
        pytest.param("POST", 404, "text/plain", b"Not Found", True, id="bare-404"),
        pytest.param("GET", 404, "application/json", body({"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Session not found"}}), True, id="get-404-json-rpc"),
        pytest.param("GET", 404, "text/html", b"Cannot GET /mcp", False, id="get-bare-404"),
        pytest.param("POST", 400, "application/json; charset=utf-8", body(EVERYTHING_REFUSAL), True, id="everything-400"),
        pytest.param("GET", 400, "application/json; charset=utf-8", body(EVERYTHING_REFUSAL), True, id="everything-400-get"),
        pytest.param("POST", 400, "application/json", body({**EVERYTHING_REFUSAL, "id": None}), True, id="400-null-id"),
        pytest.param("POST", 400, "application/json", body({**EVERYTHING_REFUSAL, "id": 7}), False, id="400-answering-the-request"),
        pytest.param("POST", 400, "application/json", body({"jsonrpc": "2.0", "error": {"code": -32602, "message": "bad"}}), False, id="400-other-code"),
        pytest.param("POST", 400, "text/plain", b'{"error": {"code": -32000}}', False, id="400-not-json"),
        pytest.param("POST", 400, "application/json", b"{not json", False, id="400-unparsable"),
        pytest.param("POST", 400, "application/json", b"[1]", False, id="400-not-an-object"),
        pytest.param("POST", 400, "application/json", b'{"error": "-32000"}', False, id="400-error-not-an-object"),
        pytest.param("POST", 500, "application/json", body(EVERYTHING_REFUSAL), False, id="500"),
        pytest.param("POST", 403, "application/json", body(EVERYTHING_REFUSAL), False, id="403"),
    ],
)  # fmt: skip
def test_which_answers_refuse_the_session(
    method: str, status: int, content_type: str, content: bytes, refused: bool
) -> None:
    assert session_refused(method, status, content_type, content) is refused
