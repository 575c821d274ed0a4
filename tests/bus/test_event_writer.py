"""The events writer (`subscribers/event_writer.py`) on a real nats-server: events stored with
their PubAcks awaited, one at a time or as one atomic batch, a batch refused as a duplicate written
again one event at a time, a stream that refuses atomic publish written one event at a time from
then on, and a late retry that looks the stream up before it writes again."""

import asyncio
import uuid
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client
from nats.js import api

from interaction_worker.subscribers.acked_publish import AckedPublisher
from interaction_worker.subscribers.event_writer import EventsNotStored, JetStreamEvents
from interaction_worker.subscribers.outgoing import Publish, wire_headers


@pytest.fixture
async def client(nats_url: str) -> AsyncIterator[Client]:
    connection = await nats.connect(nats_url)
    try:
        yield connection
    finally:
        await connection.close()


async def stream(client: Client, *, atomic: bool, window: float = 60.0) -> str:
    """A stream of its own over `<name>.>`; its name, which is also its subjects' prefix."""
    name = f"EV_{uuid.uuid4().hex[:10]}"
    await client.jetstream().add_stream(
        api.StreamConfig(
            name=name,
            subjects=[f"{name}.>"],
            allow_atomic=True if atomic else None,
            duplicate_window=window,
        )
    )
    return name


def events(name: str, call_id: str) -> list[Publish]:
    return [
        (
            f"{name}.result.{call_id}",
            b'{"status":"success"}',
            {"Nats-Msg-Id": f"r:{call_id}"},
        ),
        (f"{name}.observation.{call_id}", b"{}", {"Nats-Msg-Id": f"o:{call_id}"}),
    ]


async def stored(client: Client, name: str) -> int:
    return (await client.jetstream().stream_info(name)).state.messages


async def writer(client: Client, name: str, *, atomic: bool) -> JetStreamEvents:
    publisher = AckedPublisher(client, timeout=5.0)
    await publisher.open()
    return JetStreamEvents(publisher, [(f"{name}.", name)], atomic=atomic)


async def test_a_call_s_events_go_in_one_atomic_batch_and_a_duplicate_batch_one_by_one(
    client: Client,
) -> None:
    name = await stream(client, atomic=True)
    events_writer = await writer(client, name, atomic=True)

    await events_writer.write(events(name, "c-1"))
    assert await stored(client, name) == 2
    assert events_writer.peak_batches == 1

    # Sent again (a retry): the batch is refused as a duplicate, the events deduplicated one by one.
    await events_writer.write(events(name, "c-1"))
    await events_writer.write([*events(name, "c-1")[:1], *events(name, "c-2")])
    assert await stored(client, name) == 4
    assert events_writer.atomic


async def test_a_stream_that_refuses_atomic_publish_gets_each_event_on_its_own(
    client: Client,
) -> None:
    name = await stream(client, atomic=False)
    events_writer = await writer(client, name, atomic=True)

    await events_writer.write(events(name, "c-1"))

    assert await stored(client, name) == 2
    assert not events_writer.atomic  # from now on, one by one


async def test_events_no_stream_captures_are_not_stored_and_said_so(
    client: Client,
) -> None:
    events_writer = await writer(client, "NONE", atomic=False)
    with pytest.raises(EventsNotStored) as failed:
        await events_writer.write(events(f"none{uuid.uuid4().hex[:6]}", "c-1"))
    assert len(failed.value.events) == 2
    assert "no stream answered" in failed.value.reason


async def test_a_late_retry_skips_an_event_the_stream_holds_already(
    client: Client,
) -> None:
    name = await stream(client, atomic=False, window=0.5)
    events_writer = await writer(client, name, atomic=False)
    await events_writer.write(events(name, "c-1"))
    # One of the two was not stored after all; past the duplicate window, the other would be
    # stored again: each is looked up first.
    await client.jetstream().purge_stream(name, subject=f"{name}.observation.c-1")
    await asyncio.sleep(0.7)

    await events_writer.write(events(name, "c-1"), look_up=True)

    info = await client.jetstream().stream_info(name, subjects_filter=f"{name}.>")
    assert info.state.subjects == {
        f"{name}.result.c-1": 1,
        f"{name}.observation.c-1": 1,
    }


async def test_past_fifty_batches_in_flight_a_call_s_events_go_one_at_a_time(
    client: Client,
) -> None:
    name = await stream(client, atomic=True)
    events_writer = await writer(client, name, atomic=True)
    events_writer.batches_in_flight = 50  # the server's bound per stream

    await events_writer.write(events(name, "c-1"))

    assert await stored(client, name) == 2
    assert events_writer.peak_batches == 0


def wired(name: str, call_id: str) -> list[Publish]:
    """`events`, each with its header block ready, as `outgoing` builds the worker's."""
    return [
        (
            subject,
            payload,
            wire_headers(
                dict(headers or {}),
                f"NATS/1.0\r\nNats-Msg-Id: {(headers or {})['Nats-Msg-Id']}\r\n\r\n",
            ),
        )
        for subject, payload, headers in events(name, call_id)
    ]


async def test_events_with_their_header_blocks_are_queued_at_once_and_each_acknowledged(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = await stream(client, atomic=False)
    events_writer = await writer(client, name, atomic=False)

    async def no_coroutine(writes: object) -> None:
        raise AssertionError("queued without `send`")

    monkeypatch.setattr(events_writer.publisher, "send", no_coroutine)
    await events_writer.write(wired(name, "c-1"))
    await events_writer.write(wired(name, "c-1"))  # a retry: deduplicated by its id

    assert await stored(client, name) == 2
    got = await client.jetstream().get_last_msg(name, f"{name}.result.c-1")
    assert got.headers == {"Nats-Msg-Id": "r:c-1"}
    assert got.data == b'{"status":"success"}'


async def test_events_with_header_blocks_no_stream_captures_are_said_not_stored(
    client: Client,
) -> None:
    events_writer = await writer(client, "NONE", atomic=False)
    with pytest.raises(EventsNotStored) as failed:
        await events_writer.write(wired(f"none{uuid.uuid4().hex[:6]}", "c-1"))
    assert len(failed.value.events) == 2
    assert "no stream answered" in failed.value.reason
