"""The worker's start connects its MCP servers together: optional servers that cannot connect cost it one
connect bound, not one each; required servers that fail are all named, and the others are closed."""

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_harness import BACKOFF, START
from mcp_pages_server import serving

from interaction_worker import InteractionWorker, McpUnavailable
from interaction_worker.mcp import McpServerConnection, http_transport, stdio_transport

# A process that never answers: each attempt ends at its connect_timeout. It reads until its stdin
# closes, so it ends as soon as it is let go (a process that ignores that is given seconds to end).
MUTE = "import sys; sys.stdin.read()"
NO_BUS: Any = None  # MCP connections do not use the worker's NATS client


def mute(name: str, *, required: bool, connect_timeout: float) -> McpServerConnection:
    return McpServerConnection(
        name,
        stdio_transport(sys.executable, ["-c", MUTE]),
        required=required,
        connect_timeout=connect_timeout,
        backoff=(5.0, 5.0),  # no second attempt while the test runs
    )


def missing(name: str) -> McpServerConnection:
    return McpServerConnection(
        name, stdio_transport(str(Path("no-such-server").resolve()))
    )


async def test_optional_servers_that_cannot_connect_cost_the_start_one_bound_not_one_each() -> (
    None
):
    servers = {name: mute(name, required=False, connect_timeout=1.0) for name in "ab"}
    worker = InteractionWorker(mcp=servers)
    began = time.monotonic()
    try:
        with anyio.fail_after(START):
            await worker.astart(NO_BUS)
        took = time.monotonic() - began
    finally:
        await worker.aclose()
    assert 1.0 <= took < 1.8, took
    assert not any(server.connected for server in servers.values())


async def test_a_required_server_that_fails_closes_the_servers_that_connected() -> None:
    async with serving("pages") as url:
        pages = McpServerConnection(
            "pages", http_transport(url), backoff=BACKOFF, connect_timeout=START
        )
        worker = InteractionWorker(mcp={"pages": pages, "files": missing("files")})
        try:
            with anyio.fail_after(START), pytest.raises(McpUnavailable) as caught:
                await worker.astart(NO_BUS)
            assert pages.sessions == 1  # it did connect, before being closed
            assert not pages.connected
            with pytest.raises(McpUnavailable, match="is closed"):
                await pages.wait_connected()
        finally:
            await worker.aclose()
    assert str(caught.value) == (
        "cannot connect to MCP server files: the command cannot be started"
    )


async def test_required_servers_that_fail_are_all_named_in_configuration_order() -> (
    None
):
    # The first fails last (at its bound), the second at once: the message keeps the configured order.
    late = mute("late", required=True, connect_timeout=0.3)
    worker = InteractionWorker(mcp={"late": late, "early": missing("early")})
    try:
        with anyio.fail_after(START), pytest.raises(McpUnavailable) as caught:
            await worker.astart(NO_BUS)
    finally:
        await worker.aclose()
    assert str(caught.value) == (
        "cannot connect to MCP server late: no answer within 0.3 s; "
        "cannot connect to MCP server early: the command cannot be started"
    )
