"""McpServerConnection without the bus: starting (required or not), connect timeouts, background
reconnection, closing, and connections built from the configuration file."""

import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_harness import BACKOFF, START, running
from mcp_pages_server import serving

from interaction_worker import InteractionWorker, McpUnavailable
from interaction_worker.app import build_worker
from interaction_worker.config import parse_settings
from interaction_worker.errors import ConfigurationError
from interaction_worker.mcp import (
    McpServerConnection,
    connection_from_settings,
    http_transport,
    stdio_transport,
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_a_required_server_whose_command_cannot_start_fails_the_start_naming_it(
    tmp_path: Path,
) -> None:
    connection = McpServerConnection(
        "files", stdio_transport(str(tmp_path / "no-such-server")), backoff=BACKOFF
    )
    with pytest.raises(McpUnavailable) as caught:
        await connection.start()
    assert str(caught.value) == (
        "cannot connect to MCP server files: the command cannot be started"
    )
    assert str(tmp_path) not in str(caught.value)
    assert not connection.connected


async def test_a_required_http_server_that_refuses_fails_the_start_naming_it() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    connection = McpServerConnection("docs", http_transport(url), backoff=BACKOFF)
    with pytest.raises(McpUnavailable) as caught:
        await connection.start()
    assert str(caught.value) == "cannot connect to MCP server docs: cannot connect"


async def test_a_server_that_never_answers_times_out_and_its_process_is_stopped(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    silent = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    connection = McpServerConnection(
        "mute",
        stdio_transport(sys.executable, ["-c", silent, str(pid_file)]),
        connect_timeout=0.5,
        backoff=BACKOFF,
    )
    with anyio.fail_after(START), pytest.raises(McpUnavailable) as caught:
        await connection.start()
    assert str(caught.value) == (
        "cannot connect to MCP server mute: no answer within 0.5 s"
    )
    assert not running(int(pid_file.read_text()))


async def test_an_optional_server_starts_unavailable_and_connects_in_the_background() -> (
    None
):
    port = free_port()
    connection = McpServerConnection(
        "later",
        http_transport(f"http://127.0.0.1:{port}/mcp"),
        required=False,
        backoff=BACKOFF,
    )
    async with connection:
        assert not connection.connected
        with pytest.raises(McpUnavailable, match="not connected: later"):
            await connection.list_tools()
        with pytest.raises(McpUnavailable):
            await connection.call_tool("t0", {"x": 1})
        async with serving("pages", port):
            with anyio.fail_after(START):
                await connection.wait_connected()
            page = await connection.list_tools()
            assert [tool["name"] for tool in page.tools] == ["t0", "t1"]
            await connection.aclose()  # before its server stops
    assert not connection.connected


async def test_closing_is_idempotent_and_a_closed_connection_is_unavailable() -> None:
    connection = McpServerConnection("idle", http_transport("http://127.0.0.1:9/mcp"))
    await connection.aclose()
    await connection.aclose()
    with pytest.raises(McpUnavailable):
        await connection.call_tool("x", {})
    with pytest.raises(McpUnavailable, match="closed"):
        await connection.wait_connected()


def settings(servers: dict[str, Any], **mcp: Any) -> Any:
    return parse_settings(
        {"mcp": {"servers": servers, **mcp}, "output": {"sinks": []}},
        base_dir=Path.cwd(),
    )


async def test_an_http_server_from_the_file_gets_its_headers_from_the_environment() -> (
    None
):
    async with serving("pages") as url:
        file = settings(
            {
                "docs": {
                    "transport": "http",
                    "url": url,
                    "headers_env": {"Authorization": "DOCS_TOKEN"},
                }
            }
        )
        server = file.mcp.servers["docs"]
        connection = connection_from_settings(
            "docs", server, {"DOCS_TOKEN": "Bearer t-1"}
        )
        async with connection:
            result = await connection.call_tool("whoami", {})
        assert result.structured_content == {"auth": "Bearer t-1"}
        with pytest.raises(ConfigurationError) as caught:
            connection_from_settings("docs", server, {})
        assert str(caught.value) == (
            "mcp.servers.docs.headers_env.Authorization: the environment variable DOCS_TOKEN is not set"
        )


def test_the_file_s_servers_join_the_code_s_and_a_name_given_twice_stops_the_start() -> (
    None
):
    def code_worker() -> InteractionWorker:
        docs = McpServerConnection("docs", http_transport("http://x/mcp"))
        return InteractionWorker(mcp={"docs": docs})

    stdio = {"transport": "stdio", "command": sys.executable}
    with pytest.raises(ConfigurationError) as caught:
        build_worker(settings({"docs": stdio, "files": stdio}), code_worker())
    assert str(caught.value) == (
        "mcp.servers.docs: the MCP server docs is also given in code"
    )

    code = code_worker()
    worker = build_worker(
        settings({"files": stdio}, max_discovery_pages=7, max_capabilities=9), code
    )
    assert worker.mcp is code.mcp
    assert worker.mcp is not None
    assert worker.mcp.servers() == ["docs", "files"]
    assert (worker.mcp.max_discovery_pages, worker.mcp.max_capabilities) == (7, 9)
    assert isinstance(worker.mcp.get("files"), McpServerConnection)


def test_without_servers_in_the_file_or_the_code_the_worker_has_no_mcp_node() -> None:
    assert build_worker(settings({})).mcp is None
    worker = build_worker(settings({"files": {"transport": "stdio", "command": "x"}}))
    assert worker.mcp is not None
    assert worker.mcp.servers() == ["files"]
