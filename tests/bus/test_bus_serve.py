"""`serve:` on a real nats-server (docs/configuration.md 1, docs/operations.md): a worker serving only
tool calls has no subscription for the other kinds, and discovery and the metrics list only its kind;
a fleet split by kind in durable mode (a tool-only and an MCP-only worker, the MCP server a real one
over stdio) shares one calls stream, each message handled by the worker that serves its kind, an MCP
call waiting in the stream while no MCP worker runs, nothing stuck and nothing dead-lettered."""

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import nats
import nats.errors
import pytest
from nats.aio.client import Client
from nats.micro.service import ServiceInfo
from prometheus_client.parser import text_string_to_metric_families
from test_bus_durable import Durable, drained, eventually

from interaction_worker import InteractionWorker, Sandbox, ToolContext
from interaction_worker.client import InteractionClient
from interaction_worker.mcp import McpServerConnection
from interaction_worker.subscribers import DurableBinding

pytest_plugins = ["bus_fixtures", "mcp_fixtures"]


class Ok:
    name = "ok"
    input_schema = {"type": "object"}

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return {"status": "success", "content": "fine"}


@pytest.fixture
async def durable(nats_url: str) -> AsyncIterator[Durable]:
    deployment = Durable(nats_url)
    try:
        yield deployment
    finally:
        await deployment.close()


async def kinds_measured(metrics_url: str | None) -> set[str]:
    async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
        text = (await http.get(f"{metrics_url}/metrics")).text
    return {
        sample.labels["kind"]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if family.name == "interaction_requests"
    }


async def test_a_tool_only_worker_answers_no_other_kind_and_lists_only_tool(
    serve_worker: Any,
) -> None:
    name = f"serve-{uuid.uuid4().hex[:8]}"
    handle = await serve_worker(
        InteractionWorker(tools=[Ok()], sandbox=Sandbox(tools=["ok"])),
        serve=["tool"],
        nats={"name": name},
        metrics={"listen": "127.0.0.1:0"},
    )
    nc, prefix = handle.client.nc, handle.prefix

    assert (await handle.client.call_tool("ok")).result.content == "fine"
    discover = json.dumps({"operation": "discover"}).encode()
    for subject, body in [
        ("mcp.call", discover),
        ("observe", b"{}"),
        ("output.deliver", b"{}"),
        ("tool.list", b"{}"),
    ]:
        with pytest.raises(nats.errors.NoRespondersError):
            await nc.request(f"{prefix}.{subject}", body, timeout=5)
    info = ServiceInfo.from_dict(
        json.loads((await nc.request(f"$SRV.INFO.{name}", b"", timeout=5)).data)
    )
    assert [(e.name, e.subject) for e in info.endpoints] == [
        ("tool", f"{prefix}.tool.call")
    ]
    assert await kinds_measured(handle.metrics_url) == {"tool"}


def tool_worker(durable: Durable) -> InteractionWorker:
    return InteractionWorker(
        tools=[durable.work], sandbox=Sandbox(tools=["work"]), serve=["tool"]
    )


def mcp_worker(probe: McpServerConnection) -> InteractionWorker:
    return InteractionWorker(
        mcp={"probe": probe}, sandbox=Sandbox(mcp=["*"]), serve=["mcp"]
    )


async def pending(client: Client, durable: Durable, kind: str) -> int:
    info = await client.jetstream().consumer_info(
        f"CALLS_{durable.tag}", f"{durable.prefix}-workers-{kind}"
    )
    held: int = (info.num_pending or 0) + (info.num_ack_pending or 0)
    return held


async def test_a_fleet_split_by_kind_shares_one_calls_stream_in_durable_mode(
    durable: Durable, nats_client: Client, probe: McpServerConnection
) -> None:
    tools = await durable.serve(worker=tool_worker(durable))
    mcps: DurableBinding = await durable.serve(worker=mcp_worker(probe))
    client = InteractionClient(nats_client, prefix=durable.prefix, timeout=30)
    js = nats_client.jetstream()

    calls = [client.call_tool("work", call_id=f"t-{n}") for n in range(4)]
    invokes = [
        client.mcp_invoke("probe", "echo", {"text": f"hi {n}"}, call_id=f"m-{n}")
        for n in range(4)
    ]
    called = await asyncio.gather(*calls)
    invoked = await asyncio.gather(*invokes)

    assert [c.result.content for c in called] == [f"did t-{n}" for n in range(4)]
    assert [i.result.content for i in invoked] == [
        [{"type": "text", "text": f"hi {n}"}] for n in range(4)
    ]
    assert tools.kinds == ("tool",) and mcps.kinds == ("mcp",)
    assert tools.handler.endpoints["tool"].requests == 4
    assert mcps.handler.endpoints["mcp"].requests == 4
    calls_stream = await js.stream_info(f"CALLS_{durable.tag}")
    assert sorted(calls_stream.config.subjects or []) == [
        f"{durable.prefix}.mcp.call",
        f"{durable.prefix}.tool.call",
    ]

    # With no MCP worker running, an MCP call waits in the stream: the tool worker never takes it.
    await durable.close()
    durable.bindings.clear()
    tools = await durable.serve(worker=tool_worker(durable))
    waiting = asyncio.ensure_future(
        client.mcp_invoke("probe", "echo", {"text": "later"}, call_id="m-late")
    )
    await eventually(lambda: _is(pending(nats_client, durable, "mcp"), 1))
    await asyncio.sleep(0.5)
    assert not waiting.done()
    assert await pending(nats_client, durable, "mcp") == 1
    await durable.serve(worker=mcp_worker(probe))

    assert (await waiting).result.content == [{"type": "text", "text": "later"}]
    assert tools.handler.endpoints["mcp"].requests == 0
    await eventually(lambda: drained(nats_client, f"CALLS_{durable.tag}"))
    dead = await js.stream_info(f"DEAD_{durable.tag}")
    assert dead.state.messages == 0
    assert durable.work.calls == {f"t-{n}": 1 for n in range(4)}
    await client.close()


async def _is(value: Any, expected: int) -> bool:
    return bool(await value == expected)
