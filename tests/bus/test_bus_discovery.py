"""NATS services discovery (wire.md 9) on a real nats-server, read by nats-py's own
`nats.micro` types, as `nats micro ls|info|stats` would read it: the three verbs on their three
subjects, the endpoints of core and durable mode, and the counters moving with calls and refusals."""

import asyncio
import json
import uuid
from importlib import metadata
from typing import Any

import anyio
import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.micro.service import (
    INFO_RESPONSE_TYPE,
    PING_RESPONSE_TYPE,
    STATS_RESPONSE_TYPE,
    ServiceInfo,
    ServicePing,
    ServiceStats,
)

from interaction_worker import InteractionWorker, Sandbox, ToolContext
from interaction_worker.errors import ServeError
from interaction_worker.service import ServeOptions, serve

KINDS = ["tool", "mcp", "observe", "output", "list"]
NAP = 0.02  # seconds each `nap` call sleeps


class Nap:
    name = "nap"
    input_schema = {"type": "object"}

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        await asyncio.sleep(NAP)
        return {"status": "success", "content": "rested"}


def napper() -> InteractionWorker:
    return InteractionWorker(tools=[Nap()], sandbox=Sandbox(tools=["nap"]))


def service_name() -> str:
    return f"discovery-{uuid.uuid4().hex[:8]}"


async def ask(nc: Client, subject: str) -> dict[str, Any]:
    reply = await nc.request(subject, b"", timeout=5)
    answer: dict[str, Any] = json.loads(reply.data)
    return answer


async def ask_everyone(nc: Client, subject: str, instance: str) -> dict[str, Any]:
    """The answer of `instance` to a subject every service answers (other workers on the shared
    server may answer too)."""
    found: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    async def on_answer(msg: Msg) -> None:
        answer = json.loads(msg.data)
        if answer.get("id") == instance and not found.done():
            found.set_result(answer)

    inbox = nc.new_inbox()
    subscription = await nc.subscribe(inbox, cb=on_answer)
    try:
        await nc.publish(subject, b"", reply=inbox)
        with anyio.fail_after(5):
            return await found
    finally:
        await subscription.unsubscribe()


def endpoint(stats: ServiceStats, name: str) -> Any:
    (found,) = [e for e in stats.endpoints if e.name == name]
    return found


async def test_the_worker_answers_ping_info_and_stats_on_all_three_subjects(
    serve_worker: Any,
) -> None:
    name = service_name()
    handle = await serve_worker(nats={"name": name})
    nc = handle.client.nc

    ping = ServicePing.from_dict(await ask(nc, f"$SRV.PING.{name}"))
    assert ping.name == name
    assert ping.version == metadata.version("interaction-worker")
    instance = ping.id
    for verb, kind in [
        ("PING", PING_RESPONSE_TYPE),
        ("INFO", INFO_RESPONSE_TYPE),
        ("STATS", STATS_RESPONSE_TYPE),
    ]:
        answers = [
            await ask_everyone(nc, f"$SRV.{verb}", instance),
            await ask(nc, f"$SRV.{verb}.{name}"),
            await ask(nc, f"$SRV.{verb}.{name}.{instance}"),
        ]
        assert [(a["type"], a["name"], a["id"]) for a in answers] == [
            (kind, name, instance)
        ] * 3

    info = ServiceInfo.from_dict(await ask(nc, f"$SRV.INFO.{name}"))
    prefix = handle.prefix
    assert [(e.name, e.subject, e.queue_group) for e in info.endpoints] == [
        ("tool", f"{prefix}.tool.call", f"{prefix}-workers"),
        ("mcp", f"{prefix}.mcp.call", f"{prefix}-workers"),
        ("observe", f"{prefix}.observe", f"{prefix}-workers"),
        ("output", f"{prefix}.output.deliver", f"{prefix}-workers"),
        ("list", f"{prefix}.tool.list", f"{prefix}-workers"),
    ]
    stats = ServiceStats.from_dict(await ask(nc, f"$SRV.STATS.{name}"))
    assert [e.name for e in stats.endpoints] == KINDS
    assert all(e.num_requests == e.num_errors == 0 for e in stats.endpoints)


async def test_stats_count_calls_refusals_and_the_time_spent_on_them(
    serve_worker: Any,
) -> None:
    name = service_name()
    handle = await serve_worker(napper(), nats={"name": name})
    client = handle.client

    for _ in range(3):
        assert (await client.call_tool("nap")).result.status == "success"
    unknown = {"call": {"id": "c-unknown", "name": "nope", "arguments": {}}}
    refused = await client.send("tool.call", json.dumps(unknown).encode())
    assert json.loads(refused.data)["error"]["code"] == "PERMISSION_DENIED"
    broken = await client.send("tool.call", b"{not json")
    assert json.loads(broken.data)["error"]["code"] == "INVALID_JSON"
    await client.list_tools()

    stats = ServiceStats.from_dict(await ask(client.nc, f"$SRV.STATS.{name}"))
    tool = endpoint(stats, "tool")
    assert (tool.num_requests, tool.num_errors) == (5, 2)
    assert tool.last_error.startswith("INVALID_JSON: ")
    assert tool.processing_time >= 3 * NAP * 1e9
    assert tool.average_processing_time == tool.processing_time // 5
    listing = endpoint(stats, "list")
    assert (listing.num_requests, listing.num_errors, listing.last_error) == (1, 0, "")
    assert listing.processing_time > 0
    assert all(
        endpoint(stats, kind).num_requests == 0 for kind in ("mcp", "observe", "output")
    )


async def test_a_durable_worker_lists_its_consumers_and_counts_durable_calls(
    serve_worker: Any,
) -> None:
    name, tag = service_name(), uuid.uuid4().hex[:10].upper()
    durable = {
        "enabled": True,
        "calls_stream": f"CALLS_{tag}",
        "events_stream": f"EVENTS_{tag}",
        "dead_stream": f"DEAD_{tag}",
    }
    handle = await serve_worker(
        napper(),
        nats={"name": name},
        durable=durable,
        idempotency={"bucket": f"ledger_{tag}"},
    )
    nc = handle.client.nc
    try:
        assert (await handle.client.call_tool("nap")).result.status == "success"
        info = ServiceInfo.from_dict(await ask(nc, f"$SRV.INFO.{name}"))
        stats = ServiceStats.from_dict(await ask(nc, f"$SRV.STATS.{name}"))
    finally:
        await handle.stop()
        cleaner = await nats.connect(handle.nats_url)
        js = cleaner.jetstream()
        for stream in (f"CALLS_{tag}", f"EVENTS_{tag}", f"DEAD_{tag}"):
            await js.delete_stream(stream)
        await js.delete_key_value(f"ledger_{tag}")
        await cleaner.close()
    queue = f"{handle.prefix}-workers"
    assert {e.name: e.metadata for e in info.endpoints} == {
        "tool": {"stream": f"CALLS_{tag}", "consumer": f"{queue}-tool"},
        "mcp": {"stream": f"CALLS_{tag}", "consumer": f"{queue}-mcp"},
        "output": {"stream": f"CALLS_{tag}", "consumer": f"{queue}-output"},
        "observe": {},
        "list": {},
    }
    tool = endpoint(stats, "tool")
    assert (tool.num_requests, tool.num_errors) == (1, 0)
    assert tool.processing_time >= NAP * 1e9


async def test_discovery_answers_only_under_a_reply_prefix(serve_worker: Any) -> None:
    """`nats micro` asks from `_INBOX.`; a request whose reply subject is anything else (an event
    subject here) is not answered: the worker's rights are not another client's (docs/wire.md 7)."""
    name = service_name()
    handle = await serve_worker(nats={"name": name})
    nc = handle.client.nc
    victims = f"{handle.prefix}.tool.result.victim"
    aimed = await nc.subscribe(victims)
    inbox = nc.new_inbox()
    answered = await nc.subscribe(inbox)
    await nc.flush()

    await nc.publish(f"$SRV.PING.{name}", b"", reply=victims)
    await nc.publish(f"$SRV.PING.{name}", b"", reply=inbox)
    answer = await answered.next_msg(timeout=5)
    await nc.flush()

    assert json.loads(answer.data)["name"] == name
    assert (
        aimed.pending_msgs == 0
    )  # the worker answers in order: it would have come first


async def test_a_service_name_outside_the_protocols_characters_is_refused_at_start() -> (
    None
):
    options = ServeOptions(url="nats://127.0.0.1:1", name="my.worker")
    with pytest.raises(ServeError, match=r"^nats\.name must be letters"):
        await serve(napper(), options, install_signal_handlers=False)
