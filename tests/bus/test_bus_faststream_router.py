"""The FastStream router inside a team's own broker: what FastStream still does around each message
(the broker's subscriber middlewares, its message object) and what the router does its own way (it
publishes on the broker's connection with the wire's headers only, and never hands a message to a
worker thread). Behaviour itself is tested through both bindings in the other bus modules."""

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import anyio.to_thread
import nats
import pytest
from bus_doubles import Kit
from bus_harness import Bus, decode, reply_prefixes, settled, unique_prefix
from faststream import BaseMiddleware
from faststream.message import StreamMessage
from faststream.nats import NatsBroker

from interaction_worker.subscribers import Incoming
from interaction_worker.subscribers.faststream_router import _CallsInFlight

pytest_plugins = ["bus_fixtures"]


@dataclass
class Seen:
    """What the broker's middlewares saw."""

    consumed: list[StreamMessage[Any]] = field(default_factory=list)
    decoded: list[Any] = field(default_factory=list)
    published: list[Any] = field(default_factory=list)
    acknowledge: bool = False


def middleware(seen: Seen) -> type[BaseMiddleware]:
    class Recorder(BaseMiddleware):
        async def consume_scope(
            self, call_next: Callable[[Any], Awaitable[Any]], msg: StreamMessage[Any]
        ) -> Any:
            seen.consumed.append(msg)
            seen.decoded.append(await msg.decode())
            if seen.acknowledge:
                await msg.ack()
            return await call_next(msg)

        async def publish_scope(
            self, call_next: Callable[[Any], Awaitable[Any]], cmd: Any
        ) -> Any:
            seen.published.append(cmd)
            return await call_next(cmd)

    return Recorder


@dataclass
class Mounted:
    bus: Bus
    seen: Seen
    prefix: str


# Concurrency 1 makes FastStream subscribers of one worker at a time; any other, concurrent ones.
@pytest.fixture(params=[1, None], ids=["sequential", "concurrent"])
async def mounted(
    request: pytest.FixtureRequest, nats_url: str
) -> AsyncIterator[Mounted]:
    """The router of a worker with the test tools, in a broker with a recording middleware."""
    prefix = unique_prefix()
    seen = Seen()
    watcher = await nats.connect(nats_url, max_reconnect_attempts=1)
    broker = NatsBroker(nats_url, logger=None, middlewares=[middleware(seen)])
    worker = Kit().worker(concurrency=request.param)
    broker.include_router(
        worker.router(prefix=prefix, reply_prefixes=reply_prefixes(prefix))
    )
    try:
        bus = Bus(watcher, prefix)
        await bus.watch()
        await broker.start()
        await settled(broker.connection)
        yield Mounted(bus, seen, prefix)
    finally:
        await broker.stop()
        await watcher.close()


def tool_call(call_id: str) -> bytes:
    return json.dumps(
        {"call": {"id": call_id, "name": "echo", "arguments": {"text": "hi"}}}
    ).encode()


async def test_publishes_carry_the_wire_headers_and_nothing_of_faststream(
    mounted: Mounted,
) -> None:
    bus, p = mounted.bus, mounted.prefix
    sent = await bus.send("tool", tool_call("h-1"))

    reply = await bus.reply(sent)
    result, observation = await bus.wait(bus.is_event, 2)

    assert decode(reply)["status"] == "success"
    assert reply.headers == {"Content-Type": "application/json"}
    for event, family in ((result, "tool.result"), (observation, "tool.observation")):
        assert event.headers == {
            "Content-Type": "application/json",
            "Interaction-Key": "h-1",
            "Interaction-Call-Id": "h-1",
            "Interaction-Status": "success",
            "Nats-Msg-Id": f"{p}.{family}:h-1",
        }


async def test_the_brokers_middlewares_wrap_each_message_and_see_none_of_its_publishes(
    mounted: Mounted,
) -> None:
    bus, p, seen = mounted.bus, mounted.prefix, mounted.seen
    sent = await bus.send("tool", tool_call("m-1"), headers={"X-Team": "a"})
    await bus.reply(sent)
    await bus.wait(bus.is_event, 2)

    (message,) = seen.consumed
    assert message.raw_message.subject == f"{p}.tool.call"
    assert message.reply_to == sent.reply
    assert message.headers["X-Team"] == "a"
    (incoming,) = seen.decoded
    assert incoming == Incoming(
        f"{p}.tool.call", sent.data, {"X-Team": "a"}, sent.reply
    )
    # The reply and the events go out on the broker's connection, past its publish middlewares.
    assert seen.published == []


async def test_a_middleware_acknowledging_a_core_message_sends_nothing_to_its_reply_subject(
    mounted: Mounted,
) -> None:
    bus, seen = mounted.bus, mounted.seen
    seen.acknowledge = True
    sent = await bus.send("tool", tool_call("a-1"))
    await bus.reply(sent)

    # An acknowledgement would have been published before the reply, on the same connection.
    (reply,) = bus.on(sent.reply or "")
    assert decode(reply)["callId"] == "a-1"


async def test_a_requests_correlation_id_is_kept_and_every_other_message_gets_its_own(
    mounted: Mounted,
) -> None:
    bus, seen = mounted.bus, mounted.seen
    for index, headers in enumerate(({"correlation_id": "abc"}, {}, {})):
        await bus.reply(
            await bus.send("tool", tool_call(f"c-{index}"), headers=headers)
        )

    ids = [message.correlation_id for message in seen.consumed]
    assert ids[0] == "abc"
    assert all(ids[1:]) and len(set(ids)) == 3
    assert [message.message_id for message in seen.consumed] == ids


async def test_no_message_is_handed_to_a_worker_thread(
    mounted: Mounted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FastStream runs any synchronous parser, decoder, filter or context parameter in a worker
    thread, one round trip per message; the router declares none."""
    handed: list[object] = []
    run_sync = anyio.to_thread.run_sync

    async def recording(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        handed.append(func)
        return await run_sync(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", recording)
    bus = mounted.bus
    await bus.request("tool", tool_call("t-1"))
    await bus.request(
        "observe", {"result": {"callId": "t-2", "source": "echo", "status": "success"}}
    )
    await bus.request("list", {})
    await bus.request(
        "output",
        {"deliveryId": "t-3", "message": {"role": "assistant", "content": "x"}},
    )
    await bus.request("tool", b"not json")

    assert handed == []


async def test_a_restarted_broker_still_waits_for_its_calls_then_cancels_them(
    nats_url: str,
) -> None:
    """The router's calls run in tasks of its own, held by the lock each subscriber's `stop()` waits
    on; a broker started again makes new locks, and the calls must hold those."""
    prefix = unique_prefix()
    kit = Kit()
    watcher = await nats.connect(nats_url, max_reconnect_attempts=1)
    bus = Bus(watcher, prefix)
    await bus.watch()
    broker = NatsBroker(nats_url, logger=None, graceful_timeout=1.0)
    broker.include_router(
        kit.worker(concurrency=4).router(
            prefix=prefix, reply_prefixes=reply_prefixes(prefix)
        )
    )
    try:
        for round_ in range(2):
            await broker.start()
            await settled(broker.connection)
            short = await bus.send("tool", slow_call(f"short-{round_}", 0.3))
            long = await bus.send("tool", slow_call(f"long-{round_}", 30))
            await kit.slow.wait_started(2 * round_ + 2)
            await broker.stop()

            assert decode(await bus.reply(short))["status"] == "success"
            assert decode(await bus.reply(long))["error"]["code"] == "WORKER_SHUTDOWN"
        assert kit.slow.finished == ["short-0", "short-1"]
        assert kit.slow.cancelled == ["long-0", "long-1"]
    finally:
        await broker.stop()
        await watcher.close()


def slow_call(call_id: str, seconds: float) -> bytes:
    return json.dumps(
        {"call": {"id": call_id, "name": "slow", "arguments": {"seconds": seconds}}}
    ).encode()


async def test_a_call_cancelled_other_than_by_the_brokers_stop_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls = _CallsInFlight(2, "p.tool.call")
    subscriber = SimpleNamespace(lock=None)
    started = asyncio.Event()

    async def call() -> None:
        started.set()
        await asyncio.Event().wait()

    await calls.start(subscriber, call())
    await started.wait()
    (task,) = calls.running
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    assert "a call on p.tool.call was cancelled unanswered" in caplog.text
