"""The counters behind discovery and the metrics, without a bus: the duration histogram's buckets,
the ledger's operations counted by result, and a worker without metrics paying for none of them
(its families are not wrapped). What crosses the bus is proven in tests/bus/test_bus_discovery.py
and tests/bus/test_bus_metrics.py."""

import asyncio
import json
from typing import Any

import pytest

from interaction_worker import InteractionWorker, Sandbox, ToolContext
from interaction_worker.ledger import Conflict, CountedStore, Ledger, MemoryStore
from interaction_worker.subscribers import Dispatcher, Durations, Incoming, Publish
from interaction_worker.subscribers.requests import Measured


class Ok:
    name = "ok"
    input_schema = {"type": "object"}

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        await asyncio.sleep(0.01)
        return {"status": "success", "content": "fine"}


def call(call_id: str, name: str = "ok") -> Incoming:
    body = {"call": {"id": call_id, "name": name, "arguments": {}}}
    return Incoming(
        "interaction.tool.call", json.dumps(body).encode(), None, "_INBOX.r"
    )


def test_a_duration_on_a_bound_falls_in_that_bucket_and_past_the_last_in_the_overflow() -> (
    None
):
    durations = Durations((0.001, 0.01))
    for elapsed in (1, 1_000_000, 1_000_001, 10_000_000, 10_000_001):
        durations.observe(elapsed)

    assert durations.counts == [2, 2, 1]
    assert durations.cumulative() == [2, 4, 5]
    assert durations.total_ns == 1 + 1_000_000 + 1_000_001 + 10_000_000 + 10_000_001


async def test_the_ledgers_operations_are_counted_by_result() -> None:
    store = CountedStore(MemoryStore())

    revision = await store.create("k", b"1")
    with pytest.raises(Conflict):
        await store.create("k", b"2")
    with pytest.raises(Conflict):
        await store.update("k", b"2", revision + 5)
    assert await store.get("absent") is None
    with pytest.raises(TimeoutError):
        await store.changed("k", revision, within=0.01)
    await store.delete("k", revision)

    assert store.counts == {
        ("create", "ok"): 1,
        ("create", "conflict"): 1,
        ("update", "conflict"): 1,
        ("get", "ok"): 1,
        ("changed", "timeout"): 1,
        ("delete", "ok"): 1,
    }


def test_without_metrics_no_family_is_wrapped_and_measure_wraps_each_once() -> None:
    worker = InteractionWorker(tools=[Ok()], sandbox=Sandbox(tools=["ok"]))
    handler = worker.message_handler(ledger=Ledger(MemoryStore(), worker="w"))
    assert handler.measures is None
    assert not any(isinstance(f, Measured) for f in handler.families.values())
    assert handler.ledger is not None
    assert not isinstance(handler.ledger.store, CountedStore)

    handler.measure()
    handler.measure()

    assert all(isinstance(f, Measured) for f in handler.families.values())
    assert not any(
        isinstance(f, Measured) and isinstance(f.family, Measured)
        for f in handler.families.values()
    )
    assert isinstance(handler.ledger.store, CountedStore)
    assert not isinstance(handler.ledger.store.store, CountedStore)


async def test_the_dispatcher_counts_every_offer_and_the_time_its_calls_took() -> None:
    worker = InteractionWorker(tools=[Ok()], sandbox=Sandbox(tools=["ok"]))
    handler = worker.message_handler()
    sent: list[Publish] = []
    done = asyncio.Event()

    async def publish(publishes: list[Publish]) -> None:
        sent.extend(publishes)
        # Three calls (a reply and two events each) and a refusal (an error reply and a dead
        # letter); the last call's time is added as this returns, before the test goes on.
        if len(sent) == 3 * 3 + 2:
            done.set()

    dispatcher = Dispatcher(handler, publish, max_pending=3)
    for index in range(4):  # the fourth is past max_pending: OVERLOADED
        await dispatcher.submit("tool", call(f"c-{index}"))
    async with asyncio.timeout(10):
        await done.wait()

    tool = handler.endpoints["tool"]
    assert (tool.requests, tool.errors) == (4, 1)
    assert tool.last_error.startswith("OVERLOADED: ")
    assert tool.refusals == {"OVERLOADED": 1}
    assert tool.processing_ns >= 3 * 10_000_000
    assert handler.endpoints["observe"].requests == 0


async def test_the_time_a_worker_waits_for_work_is_not_processing_time() -> None:
    now = [
        0
    ]  # the dispatcher's clock, in nanoseconds: moved by the tool and by the test alone

    class Tick:
        name = "tick"
        input_schema = {"type": "object"}

        def validate(self, arguments: dict[str, Any]) -> None:
            return None

        async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
            now[0] += 5
            return {"status": "success", "content": "tick"}

    worker = InteractionWorker(tools=[Tick()], sandbox=Sandbox(tools=["tick"]))
    handler = worker.message_handler()
    answered = asyncio.Queue[None]()

    async def publish(publishes: list[Publish]) -> None:
        answered.put_nowait(None)

    dispatcher = Dispatcher(handler, publish, clock=lambda: now[0])
    async with asyncio.timeout(10):
        await dispatcher.submit("tool", call("c-1", "tick"))
        await answered.get()
        now[0] = 1000  # idle: the worker is parked until the next call wakes it
        await dispatcher.submit("tool", call("c-2", "tick"))
        await answered.get()

    assert dispatcher.workers == 1
    assert handler.endpoints["tool"].processing_ns == 5 + 5


async def test_with_metrics_a_message_past_its_last_delivery_is_still_answered_from_the_ledger() -> (
    None
):
    worker = InteractionWorker(tools=[Ok()], sandbox=Sandbox(tools=["ok"]))
    handler = worker.message_handler(ledger=Ledger(MemoryStore(), worker="w"))
    handler.measure()

    first = await handler.handle("tool", call("c-1"))
    exhausted = await handler.resolve_exhausted("tool", call("c-1"), 3)

    reply = json.loads(first[0][1])
    assert reply["status"] == "success"
    assert [(subject, json.loads(body)) for subject, body, _ in exhausted][0] == (
        "_INBOX.r",
        reply,
    )
    assert not any(".dead." in subject for subject, _, _ in exhausted)
