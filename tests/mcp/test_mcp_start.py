"""Starting an MCP server: the connection's own bound, `connect_timeout`, not the per-call `timeout`."""

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_harness import START

from interaction_worker import McpUnavailable
from interaction_worker.config import parse_settings
from interaction_worker.mcp import (
    McpServerConnection,
    connection_from_settings,
    stdio_transport,
)

# A server slower to start than its calls may take: 1.5 s before it even loads the SDK.
SLOW_START = """
import time
time.sleep(1.5)
from mcp.server.mcpserver import MCPServer
server = MCPServer("docs", version="1.0.0")

@server.tool(structured_output=False)
async def echo(text: str) -> str:
    return text

server.run()
"""


def configured(tmp_path: Path, **server: Any) -> McpServerConnection:
    """The connection `mcp.servers.docs` describes: the slow server, with the settings given."""
    stdio = {
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-c", SLOW_START],
        "restart_backoff": {"initial": "5s", "max": "5s"},
        **server,
    }
    settings = parse_settings({"mcp": {"servers": {"docs": stdio}}}, base_dir=tmp_path)
    return connection_from_settings("docs", settings.mcp.servers["docs"])


def test_the_connect_bound_defaults_to_30_s_whatever_the_call_timeout() -> None:
    transport = stdio_transport(sys.executable)
    assert McpServerConnection("a", transport, timeout=1.0).connect_timeout == 30.0
    assert McpServerConnection("a", transport, timeout=90.0).connect_timeout == 30.0
    given = McpServerConnection("a", transport, timeout=1.0, connect_timeout=2.5)
    assert given.connect_timeout == 2.5


async def test_a_server_slower_to_start_than_its_call_timeout_starts(
    tmp_path: Path,
) -> None:
    connection = configured(tmp_path, timeout="1s")
    assert (connection.timeout, connection.connect_timeout) == (1.0, 30.0)
    with anyio.fail_after(START):
        async with connection:
            page = await connection.list_tools()
    assert [tool["name"] for tool in page.tools] == ["echo"]


async def test_a_connect_timeout_shorter_than_the_start_fails_it_naming_that_bound(
    tmp_path: Path,
) -> None:
    connection = configured(tmp_path, timeout="10s", connect_timeout="500ms")
    assert connection.connect_timeout == 0.5
    with anyio.fail_after(START), pytest.raises(McpUnavailable) as caught:
        await connection.start()
    assert str(caught.value) == (
        "cannot connect to MCP server docs: no answer within 0.5 s"
    )
