"""Load, backpressure and shutdown on a real nats-server (wire.md sections 2 and 6): a queue group shares
the work exactly once, `concurrency` bounds executions, `max_pending` refuses with OVERLOADED, and a
stop lets running calls finish or reports them as cancelled, refusing what had not started.
"""

import asyncio
import json
from typing import Any

import nats
import pytest
from bus_doubles import Kit
from bus_harness import Bus, Serve, decode, settled, unique_prefix
from nats.aio.client import Client
from nats.aio.msg import Msg

from interaction_worker import InteractionWorker, Sandbox

pytest_plugins = ["bus_fixtures"]

nats_py_only = pytest.mark.parametrize("serve", ["nats-py"], indirect=True)


def call(call_id: str, name: str = "echo", **arguments: Any) -> bytes:
    if name == "echo":
        arguments.setdefault("text", call_id)
    return json.dumps(
        {"call": {"id": call_id, "name": name, "arguments": arguments}}
    ).encode()


def replies(bus: Bus) -> list[Msg]:
    return [m for m in bus.messages if m.subject.startswith(f"{bus.prefix}.reply.")]


def observations(bus: Bus) -> list[Msg]:
    prefix = f"{bus.prefix}.tool.observation."
    return [m for m in bus.messages if m.subject.startswith(prefix)]


def is_reply(bus: Bus) -> Any:
    return lambda m: m.subject.startswith(f"{bus.prefix}.reply.")


@pytest.mark.parametrize("second", ["same", "other"])
async def test_two_workers_in_one_queue_group_handle_each_call_exactly_once(
    serve: Serve, second: str
) -> None:
    first_kit, second_kit = Kit(), Kit()
    served = await serve(first_kit.worker(concurrency=None))
    other = "faststream" if serve.binding == "nats-py" else "nats-py"
    await serve(
        second_kit.worker(concurrency=None),
        prefix=served.prefix,
        binding=serve.binding if second == "same" else other,
    )
    bus = served.bus
    ids = [f"q-{i}" for i in range(200)]

    for call_id in ids:
        await bus.send("tool", call(call_id))
    got = await bus.wait(is_reply(bus), 200)
    await bus.wait(lambda m: m in observations(bus), 200)

    executions = first_kit.echo.calls + second_kit.echo.calls
    assert executions == dict.fromkeys(ids, 1)
    assert sorted(decode(m)["callId"] for m in got) == sorted(ids)
    assert all(decode(m)["status"] == "success" for m in got)
    # Both members took part (200 calls all going to one of two members has probability 2**-199).
    assert first_kit.echo.calls and second_kit.echo.calls
    assert bus.dead_letters() == []


async def test_concurrency_bounds_executions_in_flight(serve: Serve) -> None:
    kit = Kit(slow_seconds=0.1)
    served = await serve(kit.worker(concurrency=3))
    bus = served.bus
    ids = [f"s-{i}" for i in range(30)]

    for call_id in ids:
        await bus.send("tool", call(call_id, "slow"))
    got = await bus.wait(is_reply(bus), 30)

    assert sorted(decode(m)["callId"] for m in got) == sorted(ids)
    assert all(decode(m)["status"] == "success" for m in got)
    assert kit.slow.peak == 3
    assert sorted(kit.slow.finished) == sorted(ids)


@nats_py_only
async def test_past_max_pending_calls_are_refused_with_overloaded_and_none_is_lost(
    serve: Serve,
) -> None:
    kit = Kit(slow_seconds=0.2)
    served = await serve(kit.worker(concurrency=1), max_pending=5)
    bus, p = served.bus, served.prefix
    bodies = {f"o-{i}": call(f"o-{i}", "slow") for i in range(40)}
    dead_subject = f"{p}.dead.tool.="

    for body in bodies.values():
        await bus.send("tool", body)

    def accounted(msg: Msg) -> bool:
        return msg.subject == dead_subject or msg in observations(bus)

    await bus.wait(accounted, 40, within=30)
    got = await bus.wait(is_reply(bus), 40)

    observed = {decode(m)["callId"] for m in observations(bus)}
    dead = [decode(m) for m in bus.on(dead_subject)]
    refused = {json.loads(letter["payload"])["call"]["id"] for letter in dead}
    assert observed | refused == set(bodies)
    assert not observed & refused
    assert observed and refused
    for letter in dead:
        assert letter["error"]["code"] == "OVERLOADED"
        assert (
            letter["payload"]
            == bodies[json.loads(letter["payload"])["call"]["id"]].decode()
        )
        assert letter["subject"] == f"{p}.tool.call"
    errors = [m for m in got if m.headers and "Nats-Service-Error-Code" in m.headers]
    assert len(errors) == len(refused)
    for msg in errors:
        assert msg.headers is not None
        assert msg.headers["Nats-Service-Error-Code"] == "503"
        assert decode(msg)["error"]["code"] == "OVERLOADED"
    assert len(got) == 40  # one reply per call, no more
    assert sorted(kit.slow.finished) == sorted(observed)


async def test_a_full_outgoing_buffer_holds_the_queue_not_more_workers(
    nats_url: str,
) -> None:
    """nats-py's publish waits for its flusher once the outgoing buffer passes `pending_size`: the
    worker waiting there takes the queue on afterwards, and no other is summoned to pile more output
    behind it. Every call is still answered, once."""
    kit = Kit()
    prefix = unique_prefix()
    watcher = await nats.connect(nats_url, max_reconnect_attempts=1)
    # A buffer smaller than one call's publishes: every call waits on the flusher.
    client = await nats.connect(nats_url, max_reconnect_attempts=1, pending_size=512)
    binding = kit.worker(concurrency=None).nats_binding(client, prefix=prefix)
    try:
        bus = Bus(watcher, prefix)
        await bus.watch()
        await binding.start()
        ids = [f"full-{i}" for i in range(300)]
        for call_id in ids:
            await bus.send("tool", call(call_id), reply=False)
        await settled(watcher)

        observed = f"{prefix}.tool.observation."
        got = await bus.wait(lambda m: m.subject.startswith(observed), 300, within=30)

        assert sorted(decode(m)["callId"] for m in got) == sorted(ids)
        assert binding.dispatcher.workers == 1
        assert binding.dispatcher.refused == 0
    finally:
        await binding.stop(1.0)
        await client.close()
        await watcher.close()


async def test_stop_with_grace_lets_running_calls_finish_and_publish(
    serve: Serve,
) -> None:
    kit = Kit(slow_seconds=0.5)
    served = await serve(kit.worker(concurrency=None))
    bus = served.bus
    ids = ["g-1", "g-2", "g-3"]
    for call_id in ids:
        await bus.send("tool", call(call_id, "slow"))
    await kit.slow.wait_started(3)

    await served.stop(grace=5)
    got = await bus.wait(is_reply(bus), 3)
    await bus.wait(lambda m: m in observations(bus), 3)

    assert sorted(decode(m)["callId"] for m in got) == ids
    assert all(decode(m)["status"] == "success" for m in got)
    assert sorted(kit.slow.finished) == ids
    assert kit.slow.cancelled == []


async def test_stop_past_grace_reports_running_calls_as_cancelled_by_shutdown(
    serve: Serve,
) -> None:
    kit = Kit(slow_seconds=10)
    # FastStream's grace is the broker's graceful_timeout; the nats-py binding's is stop()'s.
    served = await serve(kit.worker(concurrency=None), graceful_timeout=0.2)
    bus, p = served.bus, served.prefix
    sent = await bus.send("tool", call("late-1", "slow"))
    await kit.slow.wait_started(1)

    await served.stop(grace=0.2)
    reply = await bus.reply(sent)
    result, observation = await bus.wait(bus.is_event, 2)

    body = decode(reply)
    assert body["callId"] == "late-1"
    assert body["status"] == "cancelled"
    assert body["error"]["code"] == "WORKER_SHUTDOWN"
    assert body["error"]["retryable"] is False
    assert decode(result) == body
    assert result.subject == f"{p}.tool.result.late-1"
    assert observation.subject == f"{p}.tool.observation.late-1"
    assert result.headers is not None
    assert result.headers["Interaction-Status"] == "cancelled"
    assert result.headers["Interaction-Error-Code"] == "WORKER_SHUTDOWN"
    assert kit.slow.cancelled == ["late-1"]


@nats_py_only
async def test_stop_refuses_waiting_messages_with_shutting_down(serve: Serve) -> None:
    kit = Kit(slow_seconds=10)
    served = await serve(kit.worker(concurrency=1))
    bus, p = served.bus, served.prefix
    running = await bus.send("tool", call("run-1", "slow"))
    await kit.slow.wait_started(1)
    waiting = [await bus.send("tool", call(f"wait-{i}", "slow")) for i in range(3)]
    # The server has routed them to the worker before it unsubscribes, so its drain hands them over.
    await settled(bus.client)

    await served.stop(grace=0.2)
    got = await bus.wait(is_reply(bus), 4)
    dead = await bus.wait(bus.is_dead, 3)

    assert decode(await bus.reply(running))["error"]["code"] == "WORKER_SHUTDOWN"
    for sent in waiting:
        reply = await bus.reply(sent)
        assert decode(reply)["error"]["code"] == "SHUTTING_DOWN"
        assert reply.headers is not None
        assert reply.headers["Nats-Service-Error-Code"] == "503"
    payloads = sorted(decode(m)["payload"] for m in dead)
    assert payloads == sorted(sent.data.decode() for sent in waiting)
    assert all(m.subject == f"{p}.dead.tool.=" for m in dead)
    assert all(decode(m)["error"]["code"] == "SHUTTING_DOWN" for m in dead)
    assert kit.slow.started == ["run-1"]
    assert len(got) == 4


async def test_a_call_sent_right_after_start_returns_is_answered(
    nats_url: str, nats_client: Client
) -> None:
    """`start()` returns once the server has the subscriptions: no NoRespondersError right after."""
    worker = Kit().worker()
    for attempt in range(50):
        prefix = unique_prefix()
        client = await nats.connect(nats_url, max_reconnect_attempts=1)
        binding = worker.nats_binding(client, prefix=prefix)
        try:
            await binding.start()
            reply = await nats_client.request(
                f"{prefix}.tool.call", call(f"start-{attempt}"), timeout=10
            )
            assert decode(reply)["status"] == "success"
        finally:
            await binding.stop(1.0)
            await client.close()


class StuckDiscovery:
    """An MCP server whose listing never ends."""

    async def list_tools(self, cursor: str | None = None) -> Any:
        await asyncio.Event().wait()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        raise AssertionError("not called")


@nats_py_only
async def test_a_discover_cut_by_shutdown_is_refused_shutting_down(
    serve: Serve,
) -> None:
    worker = InteractionWorker(
        mcp={"stuck": StuckDiscovery()}, sandbox=Sandbox(mcp=["stuck"])
    )
    served = await serve(worker)
    bus = served.bus
    sent = await bus.send("mcp", {"operation": "discover", "server": "stuck"})
    await asyncio.sleep(0.2)

    await served.stop(grace=0.1)
    reply = await bus.reply(sent)
    (dead,) = await bus.wait(bus.is_dead)

    assert decode(reply) == {
        "error": {
            "code": "SHUTTING_DOWN",
            "message": "The worker shut down before the request finished",
        }
    }
    assert decode(dead)["error"]["code"] == "SHUTTING_DOWN"
