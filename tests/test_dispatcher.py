"""The dispatcher's scheduling, without a bus: workers take queued messages one after another, a call
that waits never holds up the calls behind it, each call runs start to finish in one task, and nothing
one call does to its task (a timeout, a stray cancellation) reaches the next call on the same worker.

What crosses the bus (replies, events, OVERLOADED, shutdown) is proven against a real nats-server in
tests/bus; here the publisher records what would be sent.
"""

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from interaction_worker import (
    DeliveryContext,
    InteractionWorker,
    OutputRequest,
    Sandbox,
    ToolContext,
)
from interaction_worker.subscribers import Dispatcher, Incoming, Publish

SCHEMA = {"type": "object"}


class Probe:
    """Records the task each call ran in, before and after its waits; waits as told by its arguments."""

    name = "probe"
    input_schema = SCHEMA

    def __init__(self) -> None:
        self.tasks: dict[str, tuple[asyncio.Task[Any] | None, ...]] = {}
        self.gate = asyncio.Event()
        self.running = 0
        self.peak = 0

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.running += 1
        self.peak = max(self.peak, self.running)
        first = asyncio.current_task()
        try:
            if arguments.get("gate"):
                await self.gate.wait()
            if "sleep" in arguments:
                await asyncio.sleep(arguments["sleep"])
            if arguments.get("cancel_self"):
                assert first is not None
                first.cancel()
                await asyncio.sleep(0)
            if arguments.get("cancel_later"):
                assert first is not None
                first.cancel()  # and return before the cancellation is delivered
        finally:
            self.running -= 1
        self.tasks[context.call_id] = (first, asyncio.current_task())
        return {"status": "success", "content": context.call_id}


class Recorder:
    def __init__(self) -> None:
        self.sent: list[Publish] = []
        self.arrived = asyncio.Event()

    async def __call__(self, publishes: list[Publish]) -> None:
        self.sent.extend(publishes)
        self.arrived.set()

    async def until(self, done: Callable[[], bool]) -> None:
        """Wait (10 s at most) until `done()` holds after something was published."""
        async with asyncio.timeout(10):
            while not done():
                self.arrived.clear()
                await self.arrived.wait()

    def replies(self) -> dict[str, dict[str, Any]]:
        """The reply bodies, by the call id their reply subject names."""
        return {
            subject.removeprefix("_INBOX.r."): json.loads(body)
            for subject, body, _ in self.sent
            if subject.startswith("_INBOX.r.")
        }


def request(call_id: str, **arguments: Any) -> Incoming:
    body = {"call": {"id": call_id, "name": "probe", "arguments": arguments}}
    return Incoming(
        "interaction.tool.call", json.dumps(body).encode(), None, f"_INBOX.r.{call_id}"
    )


def dispatcher(
    probe: Probe,
    recorder: Recorder,
    *,
    concurrency: int | None = None,
    max_pending: int = 1000,
    tool_timeout: float | None = 60.0,
) -> Dispatcher:
    worker = InteractionWorker(tools=[probe], sandbox=Sandbox(tools=["probe"]))
    handler = worker.message_handler(tool_timeout=tool_timeout)
    return Dispatcher(
        handler, recorder, concurrency=concurrency, max_pending=max_pending
    )


async def test_calls_that_never_wait_run_one_after_another_on_one_worker() -> None:
    probe, recorder = Probe(), Recorder()
    d = dispatcher(probe, recorder)
    ids = [f"quick-{i}" for i in range(200)]

    for call_id in ids:
        await d.submit("tool", request(call_id))
    await recorder.until(lambda: d.pending == 0)

    replies = recorder.replies()
    assert sorted(replies) == sorted(ids)
    assert all(reply["status"] == "success" for reply in replies.values())
    assert len({first for first, _ in probe.tasks.values()}) == 1
    assert d.workers == 1  # parked, ready for the next burst


async def test_a_waiting_call_does_not_hold_up_the_calls_behind_it() -> None:
    probe, recorder = Probe(), Recorder()
    d = dispatcher(probe, recorder)

    await d.submit("tool", request("held", gate=True))
    for i in range(5):
        await d.submit("tool", request(f"behind-{i}"))
    await recorder.until(lambda: len(recorder.replies()) == 5)

    assert sorted(recorder.replies()) == [f"behind-{i}" for i in range(5)]
    assert d.pending == 1 and d.in_flight == 1
    probe.gate.set()
    await recorder.until(lambda: d.pending == 0)
    assert recorder.replies()["held"]["status"] == "success"


async def test_each_call_runs_start_to_finish_in_one_task_of_its_own_while_it_waits() -> (
    None
):
    probe, recorder = Probe(), Recorder()
    d = dispatcher(probe, recorder)
    ids = [f"wait-{i}" for i in range(20)]

    for call_id in ids:
        await d.submit("tool", request(call_id, sleep=0.02))
    await recorder.until(lambda: d.pending == 0)

    assert sorted(recorder.replies()) == sorted(ids)
    assert all(first is after for first, after in probe.tasks.values())
    # All twenty waited at once, each in its own task.
    assert probe.peak == 20
    assert len({first for first, _ in probe.tasks.values()}) == 20


class FullConnection(Recorder):
    """A connection whose outgoing buffer is full until `drained` is set: publishing waits, as
    nats-py's does past its pending size."""

    def __init__(self) -> None:
        super().__init__()
        self.drained = asyncio.Event()
        self.waiting = 0

    async def __call__(self, publishes: list[Publish]) -> None:
        if not self.drained.is_set():
            self.waiting += 1
            await self.drained.wait()
        await super().__call__(publishes)


async def test_a_worker_waiting_on_the_connection_summons_no_other() -> None:
    probe, connection = Probe(), FullConnection()
    d = dispatcher(probe, connection)

    for i in range(50):
        await d.submit("tool", request(f"queued-{i}"))
    await asyncio.sleep(0.05)
    # One call ran and waits to be published. The others wait in the queue, not run by 49 more
    # workers that would pile their outcomes behind the first.
    assert connection.waiting == 1 and len(probe.tasks) == 1
    assert d.workers == 1 and d.pending == 50
    await d.submit("tool", request("late"))
    await asyncio.sleep(0.01)
    assert d.workers == 1 and len(probe.tasks) == 1

    connection.drained.set()
    await connection.until(lambda: d.pending == 0)
    assert len(connection.replies()) == 51
    assert d.workers == 1


async def test_concurrency_bounds_the_calls_running_and_the_workers() -> None:
    probe, recorder = Probe(), Recorder()
    d = dispatcher(probe, recorder, concurrency=3)
    ids = [f"bounded-{i}" for i in range(12)]

    for call_id in ids:
        await d.submit("tool", request(call_id, sleep=0.01))
    await asyncio.sleep(0.005)
    assert d.in_flight == 3 and d.pending == 12 and d.workers == 3
    await recorder.until(lambda: d.pending == 0)

    assert sorted(recorder.replies()) == sorted(ids)
    assert probe.peak == 3


async def test_past_max_pending_a_call_is_refused_with_overloaded_at_once() -> None:
    probe, recorder = Probe(), Recorder()
    d = dispatcher(probe, recorder, max_pending=2)

    for call_id in ("a", "b", "c"):
        await d.submit("tool", request(call_id, gate=True))

    assert recorder.replies() == {
        "c": {
            "error": {
                "code": "OVERLOADED",
                "message": "The worker's pending limit is reached",
            }
        }
    }
    assert d.refused == 1 and d.pending == 2
    probe.gate.set()
    await recorder.until(lambda: d.pending == 0)
    assert sorted(recorder.replies()) == ["a", "b", "c"]


async def test_a_timed_out_call_leaves_nothing_behind_for_the_next_call_on_its_worker() -> (
    None
):
    probe, recorder = Probe(), Recorder()
    d = dispatcher(probe, recorder, concurrency=1, tool_timeout=0.1)

    await d.submit("tool", request("too-slow", sleep=5))
    await d.submit("tool", request("next", sleep=0.03))
    await d.submit("tool", request("last"))
    await recorder.until(lambda: d.pending == 0)

    replies = recorder.replies()
    assert replies["too-slow"]["status"] == "timeout"
    assert replies["too-slow"]["error"]["code"] == "TOOL_TIMEOUT"
    # The same (only) worker ran the next calls, and their waits were not cancelled.
    assert replies["next"]["status"] == "success"
    assert replies["last"]["status"] == "success"
    assert d.workers == 1


async def test_calls_queued_behind_a_worker_that_dies_are_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    probe, recorder = Probe(), Recorder()
    d = dispatcher(probe, recorder, concurrency=1)

    await d.submit("tool", request("dies", cancel_self=True))
    for i in range(3):
        await d.submit("tool", request(f"after-{i}"))
    await recorder.until(lambda: d.pending == 0 and len(recorder.replies()) == 4)

    # A cancellation that is neither a deadline nor shutdown ends the worker, as a cancelled task
    # would: its call is refused INTERNAL, the worker counted and logged, and the calls behind it
    # get a new one.
    replies = recorder.replies()
    assert replies.pop("dies") == {
        "error": {"code": "INTERNAL", "message": "Internal error"}
    }
    assert all(reply["status"] == "success" for reply in replies.values())
    assert d.pending == 0 and d.in_flight == 0 and d.lost == 1
    assert "a dispatcher worker ended (cancelled, not by shutdown)" in caplog.text


async def test_a_cancellation_left_on_a_worker_after_its_call_does_not_reach_the_next() -> (
    None
):
    probe, recorder = Probe(), Recorder()
    d = dispatcher(probe, recorder, concurrency=1)

    await d.submit("tool", request("leaves-one", cancel_later=True))
    await d.submit("tool", request("next", sleep=0.01))
    await recorder.until(lambda: d.pending == 0 and len(recorder.replies()) == 2)

    # The first call finished; the cancellation it requested of its task would have cut the next
    # call on that task. A fresh worker runs it instead.
    replies = recorder.replies()
    assert replies["leaves-one"]["status"] == "success"
    assert replies["next"]["status"] == "success"
    first, _ = probe.tasks["leaves-one"]
    after, _ = probe.tasks["next"]
    assert first is not after and d.lost == 1


async def test_a_worker_woken_for_a_call_then_cancelled_before_it_runs_is_replaced() -> (
    None
):
    probe, recorder = Probe(), Recorder()
    d = dispatcher(probe, recorder)
    await d.submit("tool", request("first"))
    await recorder.until(lambda: d.pending == 0)
    (parked,) = workers()

    # The message wakes the parked worker (counted ready for it); it is cancelled before it runs.
    await d.submit("tool", request("second"))
    parked.cancel()
    await asyncio.wait([parked])
    await d.submit("tool", request("third"))
    async with asyncio.timeout(2):
        await recorder.until(lambda: len(recorder.replies()) == 3)

    assert all(reply["status"] == "success" for reply in recorder.replies().values())
    assert d.pending == 0 and d.lost == 1


async def test_queued_calls_with_no_worker_to_take_them_are_seen_stalled() -> None:
    probe, recorder = Probe(), Recorder()
    d = dispatcher(probe, recorder, concurrency=2)
    assert d.stalled_for(100.0) == 0.0

    await d.submit("tool", request("held", gate=True))
    await d.submit("tool", request("behind", gate=True))
    await d.submit("tool", request("queued"))
    await asyncio.sleep(0.01)
    # Two running, at the limit: the third waits for one of them, which is no stall.
    assert d.in_flight == 2 and d.stalled_for(100.0) == 0.0 == d.stalled_for(200.0)

    # Both workers lost and not replaced (what the dispatcher's own accounting prevents): no one
    # takes the queued call.
    d._summon = lambda wanted: None  # type: ignore[method-assign]
    for task in workers():
        task.cancel()
    await asyncio.sleep(0.01)
    assert d.pending == 1 and d.in_flight == 0 and d.workers == 0
    assert d.stalled_for(100.0) == 0.0  # first seen
    assert d.stalled_for(103.5) == 3.5
    await d.submit("tool", request("more"))
    assert d.stalled_for(104.0) == 4.0  # the same head still waits


def workers() -> list[asyncio.Task[Any]]:
    return [
        task
        for task in asyncio.all_tasks()
        if task.get_coro().__qualname__ == "Dispatcher._work"  # type: ignore[union-attr]
    ]


async def test_shutdown_finishes_running_calls_refuses_queued_ones_and_ends_every_worker() -> (
    None
):
    probe, recorder = Probe(), Recorder()
    d = dispatcher(probe, recorder, concurrency=2)
    for i in range(2):
        await d.submit("tool", request(f"running-{i}", sleep=0.05))
    for i in range(3):
        await d.submit("tool", request(f"queued-{i}", sleep=0.05))
    await asyncio.sleep(0.01)

    await d.shutdown(grace=5)
    await d.submit("tool", request("too-late"))

    replies = recorder.replies()
    assert {k: v.get("status") for k, v in replies.items() if "running" in k} == {
        "running-0": "success",
        "running-1": "success",
    }
    refused = {k: v["error"]["code"] for k, v in replies.items() if "error" in v}
    assert refused == dict.fromkeys(
        ["queued-0", "queued-1", "queued-2", "too-late"], "SHUTTING_DOWN"
    )
    await asyncio.sleep(0.01)
    assert d.workers == 0 and d.pending == 0


async def test_a_parked_worker_cancelled_from_outside_is_replaced() -> None:
    probe, recorder = Probe(), Recorder()
    d = dispatcher(probe, recorder)
    await d.submit("tool", request("first"))
    await recorder.until(lambda: d.pending == 0)
    parked = workers()
    assert len(parked) == 1 and d.workers == 1

    parked[0].cancel()
    await asyncio.wait(parked)
    await d.submit("tool", request("second"))
    await recorder.until(lambda: d.pending == 0)

    assert sorted(recorder.replies()) == ["first", "second"]
    assert d.workers == 1


class CancelsItsDelivery:
    """A sink that cancels the task delivering through it (a bug of its own), then waits."""

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(0)
        return {"deliveryId": request.delivery_id, "status": "accepted"}


async def test_a_delivery_cancelled_by_anything_but_shutdown_is_an_unknown_receipt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = Recorder()
    worker = InteractionWorker(output=CancelsItsDelivery())
    d = Dispatcher(worker.message_handler(), recorder, concurrency=1)

    for delivery_id in ("d-1", "d-2"):
        body = {
            "deliveryId": delivery_id,
            "message": {"role": "assistant", "content": "hi"},
        }
        await d.submit(
            "output",
            Incoming(
                "interaction.output.deliver",
                json.dumps(body).encode(),
                None,
                f"_INBOX.r.{delivery_id}",
            ),
        )
    await recorder.until(lambda: len(recorder.replies()) == 2)

    # The sink may have it: never an error, never silence; the worker keeps serving.
    for delivery_id, receipt in recorder.replies().items():
        assert receipt == {
            "deliveryId": delivery_id,
            "status": "unknown",
            "error": {
                "code": "SINK_CANCELLED",
                "message": "The sink's call was cancelled before it answered",
                "retryable": False,
            },
        }
    assert d.lost == 0 and d.workers == 1
    assert "delivery d-1 on interaction.output.deliver was cancelled" in caplog.text
