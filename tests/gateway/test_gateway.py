"""The gateway with real clients: the mcp SDK's own client over streamable HTTP (the 2025 handshake
and the 2026 protocol) and over stdio (`interaction-worker mcp-serve` as a host starts it), in front of
a worker served on a real nats-server."""

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import anyio
import httpx
import mcp_types as types
import pytest
from gateway_harness import LONG_NAME, Fleet, fleet, gateway, serving
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from interaction_worker import InteractionWorker, McpRegistry, McpToolPage, Sandbox
from interaction_worker.gateway import catalog as gateway_catalog
from interaction_worker.gateway import server as gateway_server
from interaction_worker.subscribers.discovery import package_version
from interaction_worker.testing import NatsServer
from interaction_worker.testing.served import ServedWorker, ServeWorker

MODES = ["legacy", "auto"]  # the 2025 handshake, and the 2026 protocol the SDK prefers


@pytest.fixture
async def fleet_served(serve_worker: ServeWorker) -> tuple[Fleet, ServedWorker]:
    tools = fleet()
    return tools, await serve_worker(tools.worker, tool_timeout="30s")


@pytest.fixture
async def url(
    fleet_served: tuple[Fleet, ServedWorker], tmp_path: Path
) -> AsyncIterator[str]:
    _, served = fleet_served
    async with serving(gateway(served.nats_url, served.prefix, tmp_path)) as mcp_url:
        yield mcp_url


def texts(result: types.CallToolResult) -> list[str]:
    return [
        block.text for block in result.content if isinstance(block, types.TextContent)
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_a_host_lists_the_fleets_tools_and_calls_them_over_http(
    url: str, fleet_served: tuple[Fleet, ServedWorker], mode: str
) -> None:
    tools, _ = fleet_served
    async with Client(url, mode=mode) as client:
        assert client.server_info is not None
        assert client.server_info.name == "interaction-worker"
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed is True
        assert client.server_capabilities.resources is None
        assert client.server_capabilities.prompts is None

        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        # `bare` has no object schema; the MCP server's long name would pass 64 characters.
        assert "docs__bare" not in listed and f"docs__{LONG_NAME}" not in listed
        assert {"echo", "slow", "test_simple_text", "docs__lookup"} <= set(listed)
        assert listed["echo"].output_schema is None
        assert listed["docs__lookup"].output_schema == {
            "type": "object",
            "properties": {"meaning": {"type": "string"}},
        }

        echoed = await client.call_tool("echo", {"text": "hi"})
        assert (texts(echoed), echoed.structured_content) == (["hi"], {"echo": "hi"})
        assert echoed.is_error is False
        assert echoed.meta is not None
        assert echoed.meta["interaction/status"] == "success"
        assert echoed.meta["interaction/callId"] == tools.echo.call_ids[-1]
        assert tools.echo.call_ids[-1].startswith("mcp-")

        looked = await client.call_tool("docs__lookup", {"word": "bus"})
        assert looked.structured_content == {"meaning": "the meaning of bus"}

        failed = await client.call_tool("test_error_handling", {})
        assert failed.is_error is True
        assert texts(failed)[0] == (
            "TOOL_ERROR: This tool intentionally returns an error for testing"
        )
        assert failed.meta is not None and failed.meta["interaction/status"] == "failed"

        with pytest.raises(MCPError) as unknown:
            await client.call_tool("nowhere", {})
        assert unknown.value.code == types.INVALID_PARAMS


async def test_the_hosts_call_id_is_the_calls_id(
    url: str, fleet_served: tuple[Fleet, ServedWorker]
) -> None:
    tools, _ = fleet_served
    async with Client(url, mode="legacy") as client:
        result = await client.call_tool(
            "echo", {"text": "again"}, meta=_meta({"interaction/callId": "host-42"})
        )
        assert tools.echo.call_ids == ["host-42"]
        assert (
            result.meta is not None and result.meta["interaction/callId"] == "host-42"
        )
        # The same id again is the same call: the worker answers as it sees fit (no ledger: runs it).
        with pytest.raises(MCPError) as wrong:
            await client.call_tool("echo", {}, meta=_meta({"interaction/callId": 42}))
        assert wrong.value.code == types.INVALID_PARAMS


def _meta(fields: dict[str, Any]) -> types.RequestParamsMeta:
    return cast(types.RequestParamsMeta, fields)


async def test_progress_while_waiting_when_the_host_sent_a_token(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gateway_server, "PROGRESS_SECONDS", 0.2)
    heard: list[float] = []

    async def progress(
        progress: float, total: float | None, message: str | None
    ) -> None:
        heard.append(progress)

    async with Client(url, mode="legacy") as client:
        result = await client.call_tool(
            "slow", {"seconds": 0.7}, progress_callback=progress
        )
        quiet = await client.call_tool("slow", {"seconds": 0.3})
    assert texts(result) == ["done"] and texts(quiet) == ["done"]
    assert len(heard) >= 3 and heard[0] == 0
    assert heard == sorted(heard) and len(set(heard)) == len(heard)


@pytest.mark.parametrize("mode", MODES)
async def test_a_session_hears_that_the_tools_changed(
    url: str, fleet_served: tuple[Fleet, ServedWorker], mode: str
) -> None:
    tools, _ = fleet_served
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    added = gateway_harness_tool("added")
    async with Client(url, mode=mode, message_handler=on_message) as client:
        await client.list_tools()
        if mode == "legacy":
            tools.worker.tools.register(added)
            with anyio.fail_after(5):
                await changed.wait()
        else:
            async with client.listen(tools_list_changed=True) as subscription:
                tools.worker.tools.register(added)
                with anyio.fail_after(5):
                    async for _event in subscription:
                        break
        names = {
            tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools
        }
        assert "added" in names


def gateway_harness_tool(name: str) -> Any:
    from gateway_tools import Fixed

    return Fixed(name, "Came later", {"status": "success", "content": "here"})


async def test_a_tool_whose_worker_went_away_is_a_no_worker_error(
    url: str, fleet_served: tuple[Fleet, ServedWorker]
) -> None:
    _, served = fleet_served
    async with Client(url, mode="legacy") as client:
        await client.list_tools()
        await served.stop()
        # The list stays as it was (a fleet that restarts does not flap the host's list).
        assert "echo" in {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool("echo", {"text": "anyone?"})
    assert result.is_error is True
    assert texts(result) == ["NO_WORKER: no worker serves the fleet's prefix"]


async def test_a_call_waits_at_most_the_timeout_and_a_cancelled_wait_ends(
    fleet_served: tuple[Fleet, ServedWorker],
    tmp_path: Path,
    nats_server: NatsServer,
) -> None:
    tools, served = fleet_served
    slow = gateway(served.nats_url, served.prefix, tmp_path, timeout=0.5)
    async with serving(slow) as mcp_url, Client(mcp_url, mode="legacy") as client:
        late = await client.call_tool("slow", {"seconds": 1.0})
        assert late.is_error is True
        assert texts(late)[0].startswith("TIMEOUT: no outcome within 0.5 s")
        assert late.meta is not None and late.meta["interaction/status"] == "unknown"
        await (
            tools.slow.finished.wait()
        )  # the call ran on: the bus has no remote cancellation
        tools.slow.finished.clear()
        baseline = await _subscriptions(nats_server)

        with anyio.move_on_after(0.2):
            await client.call_tool("slow", {"seconds": 1.5})
        # The SDK told the gateway (notifications/cancelled): its wait ended, its listening too.
        for _ in range(100):
            if await _subscriptions(nats_server) == baseline:
                break
            await anyio.sleep(0.05)
        else:
            pytest.fail("the gateway still listens for the cancelled call's outcome")
        assert not tools.slow.finished.is_set()
        await tools.slow.finished.wait()


async def _subscriptions(nats_server: NatsServer) -> int:
    """The subscriptions of the gateway's connection, as the server counts them."""
    async with httpx.AsyncClient() as http:
        reply = await http.get(f"{nats_server.monitor_url}/connz", params={"subs": "1"})
    counts = [
        len(connection.get("subscriptions_list", []))
        for connection in reply.json()["connections"]
        if connection.get("name") == "interaction-worker-gateway-test"
    ]
    assert len(counts) == 1, counts
    return counts[0]


async def test_over_stdio_as_a_host_starts_it(
    fleet_served: tuple[Fleet, ServedWorker], tmp_path: Path
) -> None:
    _, served = fleet_served
    command = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "interaction_worker.cli",
            "mcp-serve",
            "--nats-url",
            served.nats_url,
            "--prefix",
            served.prefix,
            "--data-dir",
            str(tmp_path),
            "--tool",
            "echo",
            "--mcp",
            "docs",
        ],
        cwd=str(tmp_path),
    )
    async with Client(command, mode="legacy") as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == ["echo", "docs__lookup"]
        result = await client.call_tool("echo", {"text": "over stdio"})
    assert texts(result) == ["over stdio"]


async def test_dns_rebinding_is_refused_on_loopback(url: str) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    port = url.rsplit(":", 1)[1].split("/")[0]
    async with httpx.AsyncClient() as http:
        evil_host = await http.post(
            url, json=initialize, headers={**accept, "Host": "evil.example"}
        )
        evil_origin = await http.post(
            url, json=initialize, headers={**accept, "Origin": "http://evil.example"}
        )
        local = await http.post(
            url,
            json=initialize,
            headers={
                **accept,
                "Host": f"localhost:{port}",
                "Origin": f"http://localhost:{port}",
            },
        )
    assert (evil_host.status_code, evil_origin.status_code) == (421, 403)
    assert local.status_code == 200


async def test_server_info_carries_the_package_version(url: str) -> None:
    async with Client(url, mode="legacy") as client:
        assert client.server_info is not None
        assert client.server_info.version == package_version()


async def test_many_calls_in_flight_on_one_session(url: str) -> None:
    async with Client(url, mode="legacy") as client:
        results = await asyncio.gather(
            *(client.call_tool("echo", {"text": str(n)}) for n in range(16))
        )
    assert [texts(result) for result in results] == [[str(n)] for n in range(16)]


class Silent:
    """An MCP server behind the fleet that answers a discover only after the gateway stopped
    waiting for it."""

    async def list_tools(self, cursor: str | None = None) -> McpToolPage:
        await anyio.sleep(1.0)
        return McpToolPage()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        raise AssertionError


async def test_a_source_that_does_not_answer_does_not_hold_the_list(
    serve_worker: ServeWorker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(gateway_catalog, "READ_SECONDS", 0.3)
    registry = McpRegistry()
    registry.register("docs", Silent())
    worker = InteractionWorker(
        tools=[gateway_harness_tool("here")],
        mcp=registry,
        sandbox=Sandbox(tools=["*"], mcp=["docs"]),
    )
    served = await serve_worker(worker)
    quiet = gateway(served.nats_url, served.prefix, tmp_path)
    async with serving(quiet) as mcp_url, Client(mcp_url, mode="legacy") as client:
        with anyio.fail_after(5):
            listed = await client.list_tools()
    assert [tool.name for tool in listed.tools] == ["here"]
    # Answered without waiting for the server: its discover was given up on, its tools kept.
    assert (
        "cannot list MCP server docs (no answer in time); keeping the last list"
        in caplog.messages
    )
