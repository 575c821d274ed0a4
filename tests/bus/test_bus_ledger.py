"""The idempotency ledger over the bus (wire.md 8), through both bindings, on a real server's
JetStream bucket: a retried call never runs twice, a reused id is refused, and each case of a claim
left behind (8.3) is answered as the wire says. Entries a crashed worker would have left are planted
in the bucket directly."""

import asyncio
import contextlib
import json
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import nats
import nats.errors
import nats.js.errors
import pytest
from bus_doubles import Big, ListSink, McpDouble
from bus_harness import (
    BINDINGS,
    Bus,
    Serve,
    decode,
    running_service,
    settled,
    unique_prefix,
)
from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.js.kv import KeyValue

from interaction_worker import InteractionWorker, Sandbox, ToolContext
from interaction_worker.app import build_worker, serve_options
from interaction_worker.config import IdempotencySettings, parse_settings
from interaction_worker.errors import ServeError
from interaction_worker.ledger import Record, fingerprint
from interaction_worker.ledger.records import State
from interaction_worker.service import serve
from interaction_worker.testing import NatsServerFactory

pytest_plugins = ["bus_fixtures"]

OBJECT: Mapping[str, Any] = {"type": "object"}


class Counting:
    """Counts its executions per call id; sleeps `seconds` first."""

    input_schema = OBJECT

    def __init__(self, name: str, effects: tuple[str, ...]) -> None:
        self.name = name
        self.effects = effects
        self.calls: Counter[str] = Counter()
        self.started = asyncio.Event()

    def validate(self, arguments: dict[str, Any]) -> None:
        if "bad" in arguments:
            raise ValueError("bad must not be given")

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.calls[context.call_id] += 1
        self.started.set()
        await asyncio.sleep(float(arguments.get("seconds", 0)))
        return {"status": "success", "content": f"ran {context.call_id}"}


class Parts:
    def __init__(self) -> None:
        self.writer = Counting("write", ("write",))
        self.reader = Counting("read", ("read",))
        self.sink = ListSink()
        self.docs = McpDouble()

    def worker(self) -> InteractionWorker:
        return InteractionWorker(
            tools=[self.writer, self.reader],
            mcp={"docs": self.docs},
            output=self.sink,
            sandbox=Sandbox(tools=("write", "read"), mcp=("docs",)),
        )


def settings(**overrides: Any) -> IdempotencySettings:
    values: dict[str, Any] = {
        "enabled": True,
        "bucket": f"ledger-{uuid.uuid4().hex[:12]}",
        "ttl": 60.0,
        "lease": 5.0,
        "wait": 2.0,
    }
    values.update(overrides)
    return IdempotencySettings(**values)


def tool_call(call_id: str, name: str = "write", **arguments: Any) -> dict[str, Any]:
    return {"call": {"id": call_id, "name": name, "arguments": arguments}}


async def bucket(client: Client, ledger: IdempotencySettings) -> KeyValue:
    kv: KeyValue = await client.jetstream().key_value(ledger.bucket)
    return kv


async def record(kv: KeyValue, key: str) -> dict[str, Any]:
    entry = await kv.get(key)
    assert entry.value is not None
    loaded: dict[str, Any] = json.loads(entry.value)
    return loaded


async def plant(
    client: Client,
    ledger: IdempotencySettings,
    key: str,
    what: object,
    state: State,
    lease: float,
) -> KeyValue:
    """The entry a worker left: `state`, its lease running out `lease` seconds from now."""
    kv = await client.jetstream().create_key_value(
        bucket=ledger.bucket, ttl=ledger.ttl, history=1
    )
    now = time.time()
    left = Record(
        state=state,
        fingerprint=fingerprint(what),
        worker="crashed:1",
        at=now - 60,
        lease_until=now + lease,
    )
    await kv.create(key, left.encode())
    return kv


async def serve_with(serve: Serve, parts: Parts, ledger: IdempotencySettings) -> Bus:
    served = await serve(parts.worker(), idempotency=ledger)
    return served.bus


async def test_the_same_call_sent_twice_at_once_runs_once(
    serve: Serve, nats_client: Client
) -> None:
    parts, ledger = Parts(), settings()
    bus = await serve_with(serve, parts, ledger)

    first = await bus.send("tool", tool_call("twice-1", seconds=0.3))
    second = await bus.send("tool", tool_call("twice-1", seconds=0.3))
    replies = [decode(await bus.reply(first)), decode(await bus.reply(second))]
    results = await bus.wait(lambda m: m.subject.endswith("tool.result.twice-1"), 2)

    assert replies[0] == replies[1]
    assert replies[0]["content"] == "ran twice-1"
    assert parts.writer.calls == {"twice-1": 1}
    assert [m.data for m in results] == [results[0].data] * 2
    assert {m.headers["Nats-Msg-Id"] for m in results if m.headers} == {
        f"{bus.prefix}.tool.result:twice-1"
    }


async def test_a_call_sent_again_after_it_finished_republishes_its_recorded_outcome(
    serve: Serve, nats_client: Client
) -> None:
    parts, ledger = Parts(), settings()
    bus = await serve_with(serve, parts, ledger)

    first = decode(await bus.request("tool", tool_call("again-1")))
    events = await bus.wait(bus.is_event, 2)
    again = decode(await bus.request("tool", tool_call("again-1")))
    repeated = await bus.wait(bus.is_event, 4)

    assert again == first
    assert parts.writer.calls == {"again-1": 1}
    assert [(m.subject, m.data, m.headers) for m in repeated[2:]] == [
        (m.subject, m.data, m.headers) for m in events
    ]
    kv = await bucket(nats_client, ledger)
    stored = await record(kv, "tool.again-1")
    assert stored["state"] == "done"
    assert stored["result"] == first
    assert stored["fingerprint"] == fingerprint({"tool": "write", "arguments": {}})


async def test_another_call_under_a_used_id_is_refused_and_the_record_untouched(
    serve: Serve, nats_client: Client
) -> None:
    parts, ledger = Parts(), settings()
    bus = await serve_with(serve, parts, ledger)
    await bus.request("tool", tool_call("reused-1", text="a"))
    kv = await bucket(nats_client, ledger)
    before = await kv.get("tool.reused-1")

    reply = await bus.request("tool", tool_call("reused-1", text="b"))
    (dead,) = await bus.wait(bus.is_dead, 1)

    assert decode(reply) == {
        "error": {
            "code": "ID_REUSED",
            "message": "call.id was already used for a different request",
        }
    }
    assert reply.headers is not None
    assert reply.headers["Nats-Service-Error-Code"] == "409"
    assert dead.subject == f"{bus.prefix}.dead.tool.reused-1"
    assert parts.writer.calls == {"reused-1": 1}
    after = await kv.get("tool.reused-1")
    assert (after.revision, after.value) == (before.revision, before.value)


async def test_a_live_claim_makes_a_retry_wait_then_answers_in_progress(
    serve: Serve, nats_client: Client
) -> None:
    parts, ledger = Parts(), settings(wait=0.5)
    await plant(
        nats_client,
        ledger,
        "tool.live-1",
        {"tool": "write", "arguments": {}},
        "started",
        30,
    )
    bus = await serve_with(serve, parts, ledger)
    began = time.monotonic()

    reply = await bus.request("tool", tool_call("live-1"))

    assert decode(reply)["error"] == {
        "code": "IN_PROGRESS",
        "message": "call.id is still being executed",
    }
    assert reply.headers is not None
    assert reply.headers["Nats-Service-Error-Code"] == "409"
    assert time.monotonic() - began >= 0.5
    assert parts.writer.calls == {}


async def test_a_retry_waiting_on_a_live_claim_answers_with_the_outcome_when_it_comes(
    serve: Serve, nats_client: Client
) -> None:
    parts, ledger = Parts(), settings(wait=5)
    what = {"tool": "write", "arguments": {}}
    kv = await plant(nats_client, ledger, "tool.live-2", what, "started", 30)
    bus = await serve_with(serve, parts, ledger)
    sent = await bus.send("tool", tool_call("live-2"))
    await asyncio.sleep(0.3)

    result = {
        "callId": "live-2",
        "source": "write",
        "status": "success",
        "content": "elsewhere",
    }
    entry = await kv.get("tool.live-2")
    done = Record(
        state="done",
        fingerprint=fingerprint(what),
        worker="other:2",
        at=time.time(),
        outcome={"result": result},
    )
    await kv.update("tool.live-2", done.encode(), last=entry.revision)

    assert decode(await bus.reply(sent)) == result
    assert parts.writer.calls == {}


async def test_an_expired_claim_that_never_started_runs_under_a_new_claim(
    serve: Serve, nats_client: Client
) -> None:
    parts, ledger = Parts(), settings()
    await plant(
        nats_client,
        ledger,
        "tool.dead-1",
        {"tool": "write", "arguments": {}},
        "claimed",
        -1,
    )
    bus = await serve_with(serve, parts, ledger)

    reply = decode(await bus.request("tool", tool_call("dead-1")))

    assert reply["status"] == "success"
    assert parts.writer.calls == {"dead-1": 1}


async def test_an_expired_start_of_a_write_tool_is_answered_unknown_and_not_run(
    serve: Serve, nats_client: Client
) -> None:
    parts, ledger = Parts(), settings()
    kv = await plant(
        nats_client,
        ledger,
        "tool.dead-2",
        {"tool": "write", "arguments": {}},
        "started",
        -1,
    )
    bus = await serve_with(serve, parts, ledger)

    reply = decode(await bus.request("tool", tool_call("dead-2")))
    result, observation = await bus.wait(bus.is_event, 2)

    assert reply == {
        "callId": "dead-2",
        "source": "write",
        "status": "unknown",
        "error": {
            "code": "OUTCOME_UNKNOWN",
            "message": "A previous attempt started and its outcome was not recorded",
            "retryable": False,
        },
    }
    assert decode(result) == reply
    assert result.headers is not None
    assert result.headers["Interaction-Error-Code"] == "OUTCOME_UNKNOWN"
    assert parts.writer.calls == {}
    assert (await record(kv, "tool.dead-2"))["result"] == reply


async def test_an_expired_start_of_a_read_only_tool_runs_it_again(
    serve: Serve, nats_client: Client
) -> None:
    parts, ledger = Parts(), settings()
    await plant(
        nats_client,
        ledger,
        "tool.dead-3",
        {"tool": "read", "arguments": {}},
        "started",
        -1,
    )
    bus = await serve_with(serve, parts, ledger)

    reply = decode(await bus.request("tool", tool_call("dead-3", "read")))

    assert reply["status"] == "success"
    assert parts.reader.calls == {"dead-3": 1}


async def test_an_expired_start_of_a_delivery_is_never_sent_again(
    serve: Serve, nats_client: Client
) -> None:
    parts, ledger = Parts(), settings()
    delivery = {
        "deliveryId": "dead-4",
        "message": {"role": "assistant", "content": "hi"},
    }
    await plant(nats_client, ledger, "output.dead-4", delivery, "started", -1)
    bus = await serve_with(serve, parts, ledger)

    reply = decode(await bus.request("output", delivery))

    assert reply == {
        "deliveryId": "dead-4",
        "status": "unknown",
        "error": {
            "code": "OUTCOME_UNKNOWN",
            "message": "A previous attempt started and its outcome was not recorded",
            "retryable": False,
        },
    }
    assert parts.sink.deliveries == []


async def test_a_delivery_and_an_mcp_invoke_sent_twice_run_once(
    serve: Serve, nats_client: Client
) -> None:
    parts, ledger = Parts(), settings()
    bus = await serve_with(serve, parts, ledger)
    delivery = {"deliveryId": "d-1", "message": {"role": "assistant", "content": "hi"}}
    invoke = {
        "operation": "invoke",
        "server": "docs",
        "call": {"id": "m-1", "name": "search", "arguments": {"q": "x"}},
    }

    receipts = [decode(await bus.request("output", delivery)) for _ in range(2)]
    invokes = [decode(await bus.request("mcp", invoke)) for _ in range(2)]

    assert receipts == [{"deliveryId": "d-1", "status": "accepted"}] * 2
    assert len(parts.sink.deliveries) == 1
    assert invokes[0] == invokes[1]
    assert invokes[0]["result"]["status"] == "success"
    assert parts.docs.calls == [("search", {"q": "x"})]
    kv = await bucket(nats_client, ledger)
    assert (await record(kv, "output.d-1"))["receipt"] == receipts[0]
    assert (await record(kv, "mcp.m-1"))["result"] == invokes[0]["result"]


async def test_ids_with_dots_spaces_and_non_ascii_are_keyed_by_their_subject_key(
    serve: Serve, nats_client: Client
) -> None:
    parts, ledger = Parts(), settings()
    bus = await serve_with(serve, parts, ledger)
    ids = {"a.b c": "tool.a=2Eb=20c", "é": "tool.=C3=A9", "x.y": "tool.x=2Ey"}

    for call_id in ids:
        for _ in range(2):
            assert (
                decode(await bus.request("tool", tool_call(call_id)))["callId"]
                == call_id
            )

    kv = await bucket(nats_client, ledger)
    assert sorted(await kv.keys()) == sorted(ids.values())
    assert parts.writer.calls == dict.fromkeys(ids, 1)


async def test_a_call_refused_before_it_started_leaves_its_id_free(
    serve: Serve, nats_client: Client
) -> None:
    parts, ledger = Parts(), settings()
    bus = await serve_with(serve, parts, ledger)

    refused = decode(await bus.request("tool", tool_call("free-1", bad=1)))
    fixed = decode(await bus.request("tool", tool_call("free-1")))

    assert refused["error"]["code"] == "INVALID_INPUT"
    assert fixed["status"] == "success"
    assert parts.writer.calls == {"free-1": 1}


async def test_entries_expire_with_the_buckets_ttl(
    serve: Serve, nats_client: Client
) -> None:
    parts, ledger = Parts(), settings(ttl=1.0)
    bus = await serve_with(serve, parts, ledger)
    await bus.request("tool", tool_call("ttl-1", text="a"))
    kv = await bucket(nats_client, ledger)

    with anyio.fail_after(5):
        while True:
            try:
                await kv.get("tool.ttl-1")
            except nats.js.errors.KeyNotFoundError:
                break
            await asyncio.sleep(0.1)
    reply = decode(await bus.request("tool", tool_call("ttl-1", text="b")))

    assert reply["status"] == "success"  # not ID_REUSED: the first call is forgotten
    assert parts.writer.calls == {"ttl-1": 2}


@pytest.mark.slow
@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_server_away_for_five_seconds_mid_call_runs_no_call_twice(
    binding: str, nats_server_factory: NatsServerFactory
) -> None:
    """The call finishes while the server is away: its outcome is recorded once the server is back
    (the ledger retries the write within the lease), and the client's retry gets it."""
    server = nats_server_factory()
    parts, ledger = Parts(), settings(lease=15.0, wait=15.0)
    reconnecting: dict[str, Any] = {
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": 0.25,
    }
    prefix = unique_prefix()
    client = await nats.connect(server.url, **reconnecting)
    stack = contextlib.AsyncExitStack()
    stack.push_async_callback(client.close)
    async with stack:
        if binding == "nats-py":
            worker_client = await nats.connect(server.url, **reconnecting)
            stack.push_async_callback(worker_client.close)
            served = parts.worker().nats_binding(
                worker_client, prefix=prefix, idempotency=ledger
            )
            await served.start()
            stack.push_async_callback(served.stop, 1.0)
        else:
            broker = NatsBroker(server.url, logger=None, **reconnecting)
            broker.include_router(
                parts.worker().router(prefix=prefix, idempotency=ledger)
            )
            await broker.start()
            stack.push_async_callback(broker.stop)
            # The call is published, not requested: the worker's SUB must be on the server first.
            await settled(broker.connection)
        call = json.dumps(tool_call("away-1", seconds=2)).encode()
        await client.publish(f"{prefix}.tool.call", call)
        with anyio.fail_after(10):
            await parts.writer.started.wait()

        nats_server_factory.stop(server)
        await asyncio.sleep(5)
        nats_server_factory("-p", str(server.port), workdir=server.workdir)

        with anyio.fail_after(30):
            while True:
                try:
                    reply = await client.request(
                        f"{prefix}.tool.call", call, timeout=20
                    )
                    break
                except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                    await asyncio.sleep(0.25)  # the worker has not subscribed again yet
        assert decode(reply) == {
            "callId": "away-1",
            "source": "write",
            "status": "success",
            "content": "ran away-1",
        }
        assert parts.writer.calls == {"away-1": 1}


async def test_run_serves_under_the_ledger_its_configuration_enables(
    nats_url: str, nats_client: Client, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n", encoding="utf-8")
    ledger = settings()
    config = parse_settings(
        {
            "nats": {"url": nats_url},
            "subjects": {"prefix": unique_prefix()},
            "idempotency": {"enabled": True, "bucket": ledger.bucket},
            "output": {"sinks": []},
        },
        base_dir=tmp_path,
    )
    options = replace(serve_options(config, {}), shutdown_grace=0.2)
    call = tool_call("cfg-1", "read_text", path="a.txt")

    async with running_service(config, options) as served:
        replies = [decode(await served.bus.request("tool", call)) for _ in range(2)]
    served.task.result()

    assert replies[0] == replies[1]
    assert replies[0]["status"] == "success"
    stored = await record(await bucket(nats_client, ledger), "tool.cfg-1")
    assert stored["state"] == "done"
    assert stored["result"] == replies[0]


async def test_run_stops_with_a_clear_message_when_the_server_has_no_jetstream(
    nats_server_factory: NatsServerFactory, tmp_path: Path
) -> None:
    server = nats_server_factory("-js=false")
    config = parse_settings(
        {"nats": {"url": server.url}, "idempotency": {"enabled": True}},
        base_dir=tmp_path,
    )
    options = serve_options(config, {})

    with pytest.raises(ServeError) as refused:
        await serve(
            build_worker(config),
            options,
            stop=asyncio.Event(),
            install_signal_handlers=False,
        )

    assert str(refused.value) == (
        "JetStream is not available on the server: "
        "cannot open the idempotency ledger bucket interaction_ledger"
    )


async def test_the_done_record_counts_in_the_result_too_large_check(
    serve: Serve, nats_server_factory: NatsServerFactory, tmp_path: Path
) -> None:
    """With the ledger on, a result leaves room for the record's envelope (1 KiB, wire.md 1): one
    that fits an event but not its record becomes RESULT_TOO_LARGE, recorded as such."""
    (tmp_path / "small.conf").write_text("max_payload: 8192\n")
    url = nats_server_factory("-c", str(tmp_path / "small.conf")).url
    ledger = settings()
    watcher = await nats.connect(url, max_reconnect_attempts=1)
    try:
        without = await serve(
            InteractionWorker(tools=[Big()], sandbox=Sandbox(tools=("big",))), url=url
        )
        kept = decode(
            await without.bus.request("tool", tool_call("fits-1", "big", size=5500))
        )
        with_ledger = await serve(
            InteractionWorker(tools=[Big()], sandbox=Sandbox(tools=("big",))),
            url=url,
            idempotency=ledger,
        )
        cut = decode(
            await with_ledger.bus.request("tool", tool_call("fits-2", "big", size=5500))
        )
        stored = await (await bucket(watcher, ledger)).get("tool.fits-2")
    finally:
        await watcher.close()

    assert kept["status"] == "success"
    assert cut["status"] == "failed"
    assert cut["error"]["code"] == "RESULT_TOO_LARGE"
    assert cut["metadata"]["limit"] == 8192
    assert stored.value is not None
    assert json.loads(stored.value)["result"] == cut
