"""Durable mode (wire.md 7) on a real nats-server: calls from the JetStream work queue, replies to
Interaction-Reply-To, events and dead letters in their streams, redelivery of a call whose worker
died, and two workers sharing one consumer. Each test has its own streams, bucket and prefix."""

import asyncio
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import nats
import pytest
from bus_doubles import ListSink
from bus_harness import decode, unique_prefix
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import api

from interaction_worker import InteractionWorker, Sandbox, ToolContext
from interaction_worker.client import InteractionClient
from interaction_worker.config import DurableSettings, IdempotencySettings
from interaction_worker.errors import McpDenied, ServeError
from interaction_worker.ledger import Record, fingerprint
from interaction_worker.subscribers import DurableBinding

pytest_plugins = ["bus_fixtures"]

OBJECT: Mapping[str, Any] = {"type": "object"}


class Work:
    """Counts its executions per call id; `seconds` sleeps, `boom` raises."""

    name = "work"
    input_schema = OBJECT
    effects = ("write",)

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.started = asyncio.Event()

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.calls[context.call_id] += 1
        self.started.set()
        if arguments.get("boom"):
            raise RuntimeError("boom")
        await asyncio.sleep(float(arguments.get("seconds", 0)))
        return {"status": "success", "content": f"did {context.call_id}"}


@dataclass
class Durable:
    """A durable deployment of its own: prefix, streams, bucket, and the workers serving it."""

    url: str
    prefix: str = field(default_factory=unique_prefix)
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:10].upper())
    work: Work = field(default_factory=Work)
    sink: ListSink = field(default_factory=ListSink)
    bindings: list[tuple[DurableBinding, Client]] = field(default_factory=list)

    def settings(self, **overrides: Any) -> DurableSettings:
        values: dict[str, Any] = {
            "enabled": True,
            "calls_stream": f"CALLS_{self.tag}",
            "events_stream": f"EVENTS_{self.tag}",
            "dead_stream": f"DEAD_{self.tag}",
            "ack_wait": 2.0,
            "max_deliver": 3,
            "nak_backoff": (0.1,),
        }
        values.update(overrides)
        return DurableSettings(**values)

    def ledger(self, **overrides: Any) -> IdempotencySettings:
        values: dict[str, Any] = {"bucket": f"ledger_{self.tag}", "lease": 1.0}
        values.update(overrides)
        return IdempotencySettings(**values)

    def worker(self) -> InteractionWorker:
        return InteractionWorker(
            tools=[self.work],
            output=self.sink,
            sandbox=Sandbox(tools=("work",)),
            concurrency=8,
        )

    async def serve(
        self,
        settings: DurableSettings | None = None,
        ledger: IdempotencySettings | None = None,
        worker: InteractionWorker | None = None,
    ) -> DurableBinding:
        client = await nats.connect(self.url, max_reconnect_attempts=1)
        binding = (worker or self.worker()).durable_binding(
            client,
            durable=settings or self.settings(),
            prefix=self.prefix,
            idempotency=ledger or self.ledger(),
        )
        self.bindings.append((binding, client))
        await binding.start()
        return binding

    async def kill(self, binding: DurableBinding) -> None:
        """The worker dies: its connection goes, nothing is acknowledged, its tasks end."""
        for index, (served, client) in enumerate(self.bindings):
            if served is binding:
                del self.bindings[index]
                binding.closing = True
                tasks = [*binding._fetchers, *binding.running]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await client.close()
                return

    async def close(self) -> None:
        for binding, client in reversed(self.bindings):
            await binding.stop(1.0)
            await client.drain()


@pytest.fixture
async def durable(nats_url: str) -> AsyncIterator[Durable]:
    deployment = Durable(nats_url)
    try:
        yield deployment
    finally:
        await deployment.close()


def call(call_id: str, **arguments: Any) -> bytes:
    return json.dumps(
        {"call": {"id": call_id, "name": "work", "arguments": arguments}}
    ).encode()


async def stream_messages(client: Client, stream: str, subject: str = ">") -> list[Msg]:
    """Every message the stream holds (read with an ephemeral ordered consumer)."""
    js = client.jetstream()
    info = await js.stream_info(stream)
    if info.state.messages == 0:
        return []
    sub = await js.subscribe(subject, stream=stream, ordered_consumer=True)
    messages: list[Msg] = []
    with anyio.fail_after(10):
        while len(messages) < info.state.messages:
            messages.append(await sub.next_msg(timeout=5))
    await sub.unsubscribe()
    return messages


async def eventually(
    check: Callable[[], Awaitable[bool]], within: float = 10.0
) -> None:
    """Poll `check` (state the server holds, which no event announces) until it holds."""
    with anyio.fail_after(within):
        while True:
            if await check():
                return
            await asyncio.sleep(0.05)


async def has_messages(client: Client, stream: str, count: int = 1) -> bool:
    return (await client.jetstream().stream_info(stream)).state.messages >= count


async def drained(client: Client, stream: str) -> bool:
    return (await client.jetstream().stream_info(stream)).state.messages == 0


async def ask(client: Client, prefix: str, body: bytes, kind: str = "tool.call") -> Msg:
    """Publish into the stream with Interaction-Reply-To, as the package's clients do."""
    inbox = client.new_inbox()
    sub = await client.subscribe(inbox)
    ack = await client.request(
        f"{prefix}.{kind}", body, headers={"Interaction-Reply-To": inbox}, timeout=5
    )
    assert json.loads(ack.data)["stream"].startswith("CALLS_")  # the stream's PubAck
    reply = await sub.next_msg(timeout=10)
    await sub.unsubscribe()
    return reply


async def test_a_call_goes_through_the_stream_and_its_reply_to_interaction_reply_to(
    durable: Durable, nats_client: Client
) -> None:
    await durable.serve()

    reply = decode(await ask(nats_client, durable.prefix, call("d-1")))

    assert reply == {
        "callId": "d-1",
        "source": "work",
        "status": "success",
        "content": "did d-1",
    }
    # The events follow the reply.
    await eventually(lambda: has_messages(nats_client, f"EVENTS_{durable.tag}", 2))
    events = await stream_messages(nats_client, f"EVENTS_{durable.tag}")
    assert sorted(m.subject for m in events) == [
        f"{durable.prefix}.tool.observation.d-1",
        f"{durable.prefix}.tool.result.d-1",
    ]
    # Acknowledged or terminated: the work queue lets it go.
    await eventually(lambda: drained(nats_client, f"CALLS_{durable.tag}"))


async def test_the_package_client_works_unchanged_against_a_durable_worker(
    durable: Durable, nats_client: Client
) -> None:
    await durable.serve()
    client = InteractionClient(nats_client, prefix=durable.prefix)

    outcome = await client.call_tool("work", call_id="c-1")
    receipt = await client.deliver(
        {"deliveryId": "r-1", "message": {"role": "assistant", "content": "hi"}}
    )
    listed = await client.list_tools()

    assert outcome.result.content == "did c-1"
    assert outcome.observation.call_id == "c-1"
    assert receipt.status == "accepted"
    assert [tool.name for tool in listed] == ["work"]
    await client.close()


async def test_a_refused_call_is_dead_lettered_in_the_dead_stream_and_terminated(
    durable: Durable, nats_client: Client
) -> None:
    await durable.serve()

    refused = decode(await ask(nats_client, durable.prefix, call("bad-1", boom=True)))
    fine = decode(await ask(nats_client, durable.prefix, call("ok-1")))

    assert refused["error"]["code"] == "INTERNAL"
    assert fine["status"] == "success"
    await eventually(lambda: has_messages(nats_client, f"DEAD_{durable.tag}"))
    (letter,) = await stream_messages(nats_client, f"DEAD_{durable.tag}")
    assert letter.subject == f"{durable.prefix}.dead.tool.bad-1"
    assert letter.headers is not None
    assert letter.headers["Nats-Msg-Id"].startswith(f"dead:CALLS_{durable.tag}:")
    assert decode(letter)["attempts"] == 1
    assert durable.work.calls == {"bad-1": 1, "ok-1": 1}
    # Acknowledged or terminated: the work queue lets it go.
    await eventually(lambda: drained(nats_client, f"CALLS_{durable.tag}"))


async def test_a_call_whose_worker_died_mid_call_is_answered_unknown_not_run_twice(
    durable: Durable, nats_client: Client
) -> None:
    first = await durable.serve()
    inbox = nats_client.new_inbox()
    replies = await nats_client.subscribe(inbox)
    await nats_client.request(
        f"{durable.prefix}.tool.call",
        call("died-1", seconds=30),
        headers={"Interaction-Reply-To": inbox},
        timeout=5,
    )
    with anyio.fail_after(10):
        await durable.work.started.wait()
    await durable.kill(first)

    await (
        durable.serve()
    )  # the ack wait (2 s) and the lease (1 s) run out; then it comes back
    reply = decode(await replies.next_msg(timeout=15))

    assert reply["status"] == "unknown"
    assert reply["error"]["code"] == "OUTCOME_UNKNOWN"
    assert durable.work.calls == {"died-1": 1}


async def test_a_call_delivered_past_max_deliver_without_a_record_is_dead_lettered(
    durable: Durable, nats_client: Client
) -> None:
    """Ledger off, one executed attempt: the worker dies during it, the extra delivery gives up."""
    settings = durable.settings(max_deliver=1)
    ledger = durable.ledger(enabled=False)
    first = await durable.serve(settings, ledger)
    await nats_client.jetstream().publish(
        f"{durable.prefix}.tool.call", call("gone-1", seconds=30)
    )
    with anyio.fail_after(10):
        await durable.work.started.wait()
    await durable.kill(first)

    await durable.serve(settings, ledger)
    dead = f"DEAD_{durable.tag}"
    await eventually(lambda: has_messages(nats_client, dead), within=15)

    (letter,) = await stream_messages(nats_client, dead)
    assert decode(letter)["error"] == {
        "code": "UNAVAILABLE",
        "message": "Gave up after 1 deliveries",
    }
    assert decode(letter)["attempts"] == 1
    assert durable.work.calls == {"gone-1": 1}


async def test_two_workers_on_one_consumer_share_the_calls_each_run_once(
    durable: Durable, nats_client: Client
) -> None:
    works = [Work(), Work()]
    for work in works:
        await durable.serve(
            worker=InteractionWorker(
                tools=[work], sandbox=Sandbox(tools=("work",)), concurrency=4
            )
        )
    js = nats_client.jetstream()
    ids = [f"s-{i}" for i in range(60)]

    for call_id in ids:
        await js.publish(f"{durable.prefix}.tool.call", call(call_id, seconds=0.05))

    async def all_ran() -> bool:
        return sum(sum(work.calls.values()) for work in works) >= len(ids)

    await eventually(all_ran, within=20)

    assert works[0].calls + works[1].calls == dict.fromkeys(ids, 1)
    # Neither hoards: each fetches at most its 4 free slots, so both take part.
    assert all(len(work.calls) >= 10 for work in works), [len(w.calls) for w in works]
    consumer = await js.consumer_info(
        f"CALLS_{durable.tag}", f"{durable.prefix}-workers-tool"
    )
    assert consumer.config.max_deliver == 4  # durable.max_deliver + 1
    assert consumer.config.max_ack_pending == 1000


async def test_a_consumer_whose_settings_changed_is_updated(
    durable: Durable, nats_client: Client
) -> None:
    first = await durable.serve()
    await first.stop(1.0)

    await durable.serve(
        durable.settings(ack_wait=5.0, max_deliver=7, max_ack_pending=50)
    )

    consumer = await nats_client.jetstream().consumer_info(
        f"CALLS_{durable.tag}", f"{durable.prefix}-workers-mcp"
    )
    assert (
        consumer.config.ack_wait,
        consumer.config.max_deliver,
        consumer.config.max_ack_pending,
    ) == (5.0, 8, 50)


async def test_a_calls_stream_with_another_retention_stops_the_start(
    durable: Durable, nats_client: Client
) -> None:
    await nats_client.jetstream().add_stream(
        api.StreamConfig(
            name=f"CALLS_{durable.tag}", subjects=[f"{durable.prefix}.other"]
        )
    )

    with pytest.raises(ServeError) as refused:
        await durable.serve()

    assert str(refused.value) == (
        f"stream CALLS_{durable.tag} exists with retention limits, durable mode needs workqueue"
    )


async def test_a_stream_missing_subjects_gets_them_and_another_capturing_them_stops_the_start(
    durable: Durable, nats_client: Client
) -> None:
    js = nats_client.jetstream()
    await js.add_stream(
        api.StreamConfig(
            name=f"CALLS_{durable.tag}",
            subjects=[f"{durable.prefix}.tool.call"],
            retention=api.RetentionPolicy.WORK_QUEUE,
        )
    )
    await durable.serve()
    info = await js.stream_info(f"CALLS_{durable.tag}")
    # The subjects of what this worker serves: no command protocol, so no P.command.
    assert sorted(info.config.subjects or []) == sorted(
        f"{durable.prefix}.{s}" for s in ("tool.call", "mcp.call", "output.deliver")
    )

    other = Durable(durable.url, prefix=durable.prefix)
    with pytest.raises(ServeError) as refused:
        await other.serve()
    await other.close()

    assert "overlap another stream's" in str(refused.value)


async def test_the_events_stream_allows_direct_gets_even_one_an_earlier_version_made(
    durable: Durable, nats_client: Client
) -> None:
    """Its history is read with direct gets (docs/console.md), which need no consumer right."""
    js = nats_client.jetstream()
    earlier = f"EVENTS_{durable.tag}"
    await js.add_stream(
        api.StreamConfig(name=earlier, subjects=[f"{durable.prefix}.tool.result.>"])
    )
    await durable.serve()
    assert (await js.stream_info(earlier)).config.allow_direct
    fresh = Durable(durable.url)
    await fresh.serve()
    try:
        assert (await js.stream_info(f"EVENTS_{fresh.tag}")).config.allow_direct
    finally:
        await fresh.close()


class Unreachable:
    """A sink that could not connect (nothing sent) its first `times` deliveries, then accepts."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.deliveries: list[str] = []

    async def deliver(self, request: Any, context: Any) -> Any:
        self.deliveries.append(request.delivery_id)
        if len(self.deliveries) <= self.times:
            return {
                "deliveryId": request.delivery_id,
                "status": "rejected",
                "error": {
                    "code": "SINK_UNAVAILABLE",
                    "message": "not connected",
                    "retryable": True,
                },
            }
        return {"deliveryId": request.delivery_id, "status": "accepted"}


async def test_a_delivery_no_sink_could_send_is_redelivered_until_it_is_sent(
    durable: Durable, nats_client: Client
) -> None:
    sink = Unreachable(times=2)
    await durable.serve(worker=InteractionWorker(output=sink, concurrency=2))
    delivery = {"deliveryId": "u-1", "message": {"role": "assistant", "content": "hi"}}

    receipt = decode(
        await ask(
            nats_client, durable.prefix, json.dumps(delivery).encode(), "output.deliver"
        )
    )

    assert receipt == {"deliveryId": "u-1", "status": "accepted"}
    assert (
        sink.deliveries == ["u-1"] * 3
    )  # two returns with nothing sent (nak_backoff 0.1 s), then sent


async def test_on_its_last_attempt_a_delivery_no_sink_could_send_gets_its_rejected_receipt(
    durable: Durable, nats_client: Client
) -> None:
    sink = Unreachable(times=10)
    await durable.serve(
        durable.settings(max_deliver=2),
        worker=InteractionWorker(output=sink, concurrency=2),
    )
    delivery = {"deliveryId": "u-2", "message": {"role": "assistant", "content": "hi"}}

    receipt = decode(
        await ask(
            nats_client, durable.prefix, json.dumps(delivery).encode(), "output.deliver"
        )
    )

    assert receipt["status"] == "rejected"
    assert receipt["error"]["code"] == "SINK_UNAVAILABLE"
    assert sink.deliveries == ["u-2"] * 2


async def test_a_call_longer_than_ack_wait_is_kept_in_progress_not_redelivered(
    durable: Durable, nats_client: Client
) -> None:
    # The ledger off: a redelivery would run the call again, and the count would show it.
    settings, ledger = durable.settings(ack_wait=1.0), durable.ledger(enabled=False)
    await durable.serve(settings, ledger)
    await durable.serve(
        settings, ledger
    )  # a second worker that a redelivery would reach

    reply = decode(await ask(nats_client, durable.prefix, call("long-1", seconds=2.5)))

    assert reply["status"] == "success"
    await asyncio.sleep(1.5)  # past another ack_wait: nothing comes back
    assert durable.work.calls == {"long-1": 1}


async def test_a_call_delivered_past_max_deliver_left_started_is_answered_unknown(
    durable: Durable, nats_client: Client
) -> None:
    """Ledger on, one executed attempt: the worker dies during it; the extra delivery is never run,
    it is resolved from the ledger (a write tool left started: unknown, recorded) and terminated."""
    settings = durable.settings(max_deliver=1)
    first = await durable.serve(settings)
    inbox = nats_client.new_inbox()
    replies = await nats_client.subscribe(inbox)
    await nats_client.jetstream().publish(
        f"{durable.prefix}.tool.call",
        call("left-1", seconds=30),
        headers={"Interaction-Reply-To": inbox},
    )
    with anyio.fail_after(10):
        await durable.work.started.wait()
    await durable.kill(first)

    await durable.serve(settings)
    reply = decode(await replies.next_msg(timeout=15))

    assert reply["status"] == "unknown"
    assert reply["error"]["code"] == "OUTCOME_UNKNOWN"
    assert durable.work.calls == {"left-1": 1}
    await eventually(lambda: drained(nats_client, f"CALLS_{durable.tag}"))
    kv = await nats_client.jetstream().key_value(f"ledger_{durable.tag}")
    entry = await kv.get("tool.left-1")
    assert entry.value is not None
    assert json.loads(entry.value)["result"] == reply


async def test_a_consumer_loop_cancelled_from_outside_is_started_again(
    durable: Durable, nats_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    binding = await durable.serve()
    loops = list(binding._fetchers)
    for loop in loops:
        loop.cancel()
    await asyncio.gather(*loops, return_exceptions=True)

    reply = decode(await ask(nats_client, durable.prefix, call("after-loss")))

    assert reply["status"] == "success"
    assert binding.lost == len(loops) == len(binding._fetchers)
    assert "the consumer loop of tool ended (cancelled)" in caplog.text


class Denied:
    """An MCP server that refuses the worker's credentials: nothing runs, only a person can help."""

    def __init__(self) -> None:
        self.calls = 0

    async def list_tools(self, cursor: str | None = None) -> Any:
        raise McpDenied("MCP server docs is not signed in")

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        self.calls += 1
        raise McpDenied("MCP server docs is not signed in")


async def test_an_invoke_refused_for_its_credentials_is_answered_at_once_not_delivered_again(
    durable: Durable, nats_client: Client
) -> None:
    docs = Denied()
    await durable.serve(
        worker=InteractionWorker(mcp={"docs": docs}, sandbox=Sandbox(mcp=("docs",)))
    )
    invoke = {
        "operation": "invoke",
        "server": "docs",
        "call": {"id": "d-1", "name": "read", "arguments": {}},
    }

    result = decode(
        await ask(nats_client, durable.prefix, json.dumps(invoke).encode(), "mcp.call")
    )["result"]

    assert result["error"]["code"] == "MCP_UNAUTHORIZED"
    assert docs.calls == 1  # max_deliver 3: not delivered again


@pytest.mark.parametrize(
    ("stream", "body", "subjects"),
    [
        ("EVENTS", call("kept-1"), ("tool.observation.kept-1", "tool.result.kept-1")),
        ("DEAD", call("kept-2", boom=True), ("dead.tool.kept-2",)),
    ],
    ids=["events", "dead-letter"],
)
async def test_events_and_dead_letters_no_stream_takes_are_written_again_until_stored(
    durable: Durable,
    nats_client: Client,
    stream: str,
    body: bytes,
    subjects: tuple[str, ...],
) -> None:
    """A stream that cannot store (here: gone, as one without a leader answers no-responders) costs
    the call latency, never its events (docs/wire.md 7): they wait, counted, and the call is
    acknowledged once they are stored."""
    binding = await durable.serve()
    js = nats_client.jetstream()
    name = f"{stream}_{durable.tag}"
    config = (await js.stream_info(name)).config
    await js.delete_stream(name)
    inbox = nats_client.new_inbox()
    replies = await nats_client.subscribe(inbox)
    await js.publish(
        f"{durable.prefix}.tool.call", body, headers={"Interaction-Reply-To": inbox}
    )

    await eventually(lambda: _ran(durable.work))
    with pytest.raises(nats.errors.TimeoutError):
        await replies.next_msg(timeout=0.5)  # the reply follows the stored events
    assert binding.waiting.count == 1 and binding.waiting.oldest() > 0
    await js.add_stream(config)

    reply = decode(await replies.next_msg(timeout=10))
    assert reply.get("status", "refused") in ("success", "refused")
    stored = await stream_messages(nats_client, name)
    assert sorted(m.subject for m in stored) == [
        f"{durable.prefix}.{subject}" for subject in subjects
    ]
    await eventually(lambda: drained(nats_client, f"CALLS_{durable.tag}"))
    assert binding.waiting.count == 0
    assert list(durable.work.calls.values()) == [1]


async def _ran(work: Work) -> bool:
    return bool(work.calls)


class Peak:
    """Counts the calls running at once."""

    name = "work"
    input_schema = OBJECT
    effects = ("write",)

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.done = 0

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(0.1)
        finally:
            self.running -= 1
            self.done += 1
        return {"status": "success", "content": "ok"}


async def test_a_fetch_that_brings_more_than_it_asked_never_runs_more_than_concurrency(
    durable: Durable, nats_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """nats-py's fetch also returns what earlier pull requests left on the subscription's inbox (a
    fetch that timed out, a restart): more messages than slots taken."""
    peak = Peak()
    worker = InteractionWorker(
        tools=[peak], sandbox=Sandbox(tools=("work",)), concurrency=4
    )
    binding = await durable.serve(worker=worker)
    (tool,) = [s for s in binding._subscriptions if s._consumer.endswith("-tool")]
    # A pull request that no fetch of the binding made, answered on its inbox.
    await nats_client.publish(
        tool._nms,
        json.dumps({"batch": 20, "expires": 5_000_000_000}).encode(),
        reply=tool._deliver,
    )
    await nats_client.flush()
    js = nats_client.jetstream()
    for index in range(24):
        await js.publish(f"{durable.prefix}.tool.call", call(f"p-{index}"))

    await eventually(lambda: drained(nats_client, f"CALLS_{durable.tag}"))
    assert peak.done == 24
    assert peak.peak <= 4
    assert 0 <= binding._slots.free <= 4
    assert "invalid batch size" not in caplog.text.lower()


async def test_a_calls_stream_without_a_leader_is_one_line_in_the_log_not_a_traceback_a_fetch(
    durable: Durable, nats_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """While the calls stream has no leader (here: gone, then back with its consumers, as after an
    election), every fetch meets no-responders: the log says so once it is over (docs/operations.md,
    "Logs")."""
    binding = await durable.serve()
    js = nats_client.jetstream()
    name = f"CALLS_{durable.tag}"
    stream = (await js.stream_info(name)).config
    consumers = [info.config for info in await js.consumers_info(name)]
    caplog.set_level(logging.INFO, logger="interaction_worker")
    await js.delete_stream(name)
    await asyncio.sleep(1.5)  # each consumer loop fetches meanwhile
    await js.add_stream(stream)
    for consumer in consumers:
        await js.add_consumer(name, consumer)

    reply = decode(await ask(nats_client, durable.prefix, call("back-1")))

    assert reply["status"] == "success"
    await eventually(lambda: _logged(caplog, "; resumed"))  # each loop fetched again
    ours = [r for r in caplog.records if r.name == "interaction_worker"]
    assert [r.getMessage() for r in ours if r.exc_info] == []
    (line,) = [r.getMessage() for r in ours if r.levelno >= logging.WARNING]
    assert line.startswith("fetching from the calls stream interrupted for ")
    assert line.endswith("; resumed")
    assert binding.lost == 0


async def _logged(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return text in caplog.text


async def test_a_delivery_past_max_deliver_that_finds_a_live_claim_waits_for_its_outcome(
    durable: Durable, nats_client: Client
) -> None:
    """Another worker holds the call, alive (it renews its lease), and records its outcome late:
    the server's last delivery is answered with that outcome, never `unknown` (docs/wire.md 7)."""
    await durable.serve(durable.settings(max_deliver=1))
    js = nats_client.jetstream()
    kv = await js.key_value(f"ledger_{durable.tag}")
    what = {"tool": "work", "arguments": {}}

    def claim(state: str, **fields: Any) -> bytes:
        return Record(
            state=state,  # type: ignore[arg-type]
            fingerprint=fingerprint(what),
            worker="alive:2",
            at=time.time(),
            **fields,
        ).encode()

    revision = await kv.create(
        "tool.live-1", claim("started", lease_until=time.time() + 1)
    )

    async def renew() -> None:
        nonlocal revision
        while True:
            await asyncio.sleep(0.3)
            revision = await kv.update(
                "tool.live-1",
                claim("started", lease_until=time.time() + 1),
                last=revision,
            )

    renewing = asyncio.create_task(renew())
    inbox = nats_client.new_inbox()
    replies = await nats_client.subscribe(inbox)
    await js.publish(
        f"{durable.prefix}.tool.call",
        call("live-1"),
        headers={"Interaction-Reply-To": inbox},
    )
    try:
        # The first delivery comes back when the lease would end; the second is the server's last.
        await eventually(lambda: _delivered(nats_client, durable, 2))
        with pytest.raises(nats.errors.TimeoutError):
            await replies.next_msg(timeout=0.5)
    finally:
        renewing.cancel()
        await asyncio.gather(renewing, return_exceptions=True)
    result = {
        "callId": "live-1",
        "source": "work",
        "status": "success",
        "content": "done elsewhere",
    }
    await kv.update(
        "tool.live-1", claim("done", outcome={"result": result}), last=revision
    )

    assert decode(await replies.next_msg(timeout=10)) == result
    assert durable.work.calls == {}
    await eventually(lambda: drained(nats_client, f"CALLS_{durable.tag}"))


async def _delivered(client: Client, durable: Durable, count: int) -> bool:
    infos = await client.jetstream().consumers_info(f"CALLS_{durable.tag}")
    (tool,) = [info for info in infos if info.name.endswith("-tool")]
    delivered = tool.delivered
    return delivered is not None and (delivered.consumer_seq or 0) >= count
