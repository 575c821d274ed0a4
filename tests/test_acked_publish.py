"""The acknowledged writes (`subscribers/acked_publish.py`) write, byte for byte, what nats-py's
public `publish` writes with the same reply subject, and their answers come back on one shared
subscription, with no timer per write.

The writes compared are the ones the worker makes: the ledger's create, update and delete (the
headers nats-py's key-value layer sends), the events with their template blocks and with plain
headers (trace headers), an atomic batch (only its last message asks for an answer), and a message
get without headers. A nats-py release that changes its framing fails here."""

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.js import api

from interaction_worker.subscribers.acked_answers import WriteFailed
from interaction_worker.subscribers.acked_publish import (
    AckedPublisher,
    Write,
    _plain,
)
from interaction_worker.subscribers.kv_frames import deleting, expecting
from interaction_worker.subscribers.outgoing import JSON_HEADERS, wire_headers

TRACE = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
EVENT = wire_headers(
    {
        "Content-Type": "application/json",
        "Interaction-Key": "c-1",
        "Interaction-Status": "success",
        "Nats-Msg-Id": "t.tool.result:c-1",
    },
    "NATS/1.0\r\nContent-Type: application/json\r\nInteraction-Key: c-1\r\n"
    "Interaction-Status: success\r\nNats-Msg-Id: t.tool.result:c-1\r\n\r\n",
)

WRITES: list[list[Write]] = [
    [("$KV.b.tool.c-1", b'{"state":"claimed"}', expecting(0))],
    [("$KV.b.tool.c-1", b'{"state":"started"}', expecting(12))],
    [("$KV.b.tool.c-1", b"", deleting(13))],
    [
        ("t.tool.result.c-1", b'{"callId":"c-1"}', EVENT),
        ("t.tool.observation.c-1", b"{}", {**EVENT, **TRACE}),
    ],
    [("$JS.API.STREAM.MSG.GET.S", b'{"last_by_subj":"t.tool.result.c-1"}', None)],
    [("t.dead.tool.c-1", b"x" * 3000, {" Spaced ": " v ", "Line": "a\r\nb"})],
]


@pytest.fixture
async def connection(nats_url: str) -> AsyncIterator[tuple[Client, list[bytes]]]:
    """A connection whose socket writes are recorded (and still sent)."""
    client = await nats.connect(nats_url)
    written: list[bytes] = []
    transport: Any = client._transport
    send = transport.writelines

    def writelines(data: list[bytes]) -> None:
        written.extend(data)
        send(data)

    transport.writelines = writelines
    try:
        yield client, written
    finally:
        await client.close()


@pytest.fixture
async def nats_client(nats_url: str) -> AsyncIterator[Client]:
    client = await nats.connect(nats_url)
    try:
        yield client
    finally:
        await client.close()


async def flushed(written: list[bytes]) -> bytes:
    for _ in range(1000):
        if written:
            break
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    data = b"".join(chunk for chunk in written if chunk != b"PING\r\n")
    written.clear()
    return data


def replies(publisher: AckedPublisher, count: int) -> list[str]:
    """The reply subjects of the last `count` writes sent."""
    assert publisher._waiting is not None
    tokens = list(publisher._waiting.writes)[-count:]
    return [f"{publisher._prefix}{token}" for token in tokens]


async def test_each_write_is_framed_as_the_public_publish_frames_it_with_its_reply(
    connection: tuple[Client, list[bytes]],
) -> None:
    client, written = connection
    publisher = AckedPublisher(client, timeout=1.0)
    await publisher.open()
    await flushed(written)  # the subscription
    for writes in WRITES:
        futures = await publisher.send(writes)
        actual = await flushed(written)
        for (subject, payload, headers), reply in zip(
            writes, replies(publisher, len(writes)), strict=True
        ):
            await client.publish(subject, payload, reply=reply, headers=_plain(headers))
        expected = await flushed(written)
        assert actual == expected
        await asyncio.gather(*futures, return_exceptions=True)


async def test_one_write_with_its_block_is_framed_as_the_public_publish_frames_it(
    connection: tuple[Client, list[bytes]],
) -> None:
    client, written = connection
    publisher = AckedPublisher(client, timeout=1.0)
    await publisher.open()
    await flushed(written)
    for (subject, payload, headers), *_ in WRITES[:3]:
        future = await publisher.send_one(subject, payload, headers)
        actual = await flushed(written)
        (reply,) = replies(publisher, 1)
        await client.publish(subject, payload, reply=reply, headers=_plain(headers))
        assert actual == await flushed(written)
        with pytest.raises(WriteFailed):
            await future  # no bucket here


async def test_a_batch_asks_for_one_answer_with_its_last_message(
    connection: tuple[Client, list[bytes]],
) -> None:
    client, written = connection
    publisher = AckedPublisher(client, timeout=1.0)
    await publisher.open()
    await flushed(written)
    batch = WRITES[3]

    future = await publisher.send_batch(batch)
    actual = await flushed(written)
    (reply,) = replies(publisher, 1)
    await client.publish(batch[0][0], batch[0][1], headers=_plain(batch[0][2]))
    await client.publish(
        batch[1][0], batch[1][1], reply=reply, headers=_plain(batch[1][2])
    )

    assert actual == await flushed(written)
    with pytest.raises(WriteFailed):
        await future  # no stream captures these subjects


async def test_without_the_non_public_methods_the_public_publish_writes_the_same(
    connection: tuple[Client, list[bytes]],
) -> None:
    client, written = connection
    fast = AckedPublisher(client, timeout=1.0)
    public = AckedPublisher(client, timeout=1.0)
    public._queued.fast = False
    for publisher in (fast, public):
        await publisher.open()
    await flushed(written)
    for writes in WRITES:
        by_fast = await fast.send(writes)
        fast_bytes = (await flushed(written)).replace(fast._prefix.encode(), b"R.")
        by_public = await public.send(writes)
        public_bytes = (await flushed(written)).replace(public._prefix.encode(), b"R.")
        # The two publishers count their tokens alike: the same writes, the same bytes.
        assert fast_bytes == public_bytes
        await asyncio.gather(*by_fast, *by_public, return_exceptions=True)


async def test_the_stream_s_answers_resolve_the_writes_that_asked_for_them(
    nats_client: Client,
) -> None:
    js = nats_client.jetstream()
    await js.add_stream(name="ACKED", subjects=["acked.>"])
    publisher = AckedPublisher(nats_client)
    try:
        futures = await publisher.send(
            [
                (f"acked.{index}", b"x", {"Nats-Msg-Id": f"m-{index}"})
                for index in range(3)
            ]
        )
        answers = [json.loads(await future) for future in futures]
        again = json.loads(
            await (await publisher.send([("acked.0", b"x", {"Nats-Msg-Id": "m-0"})]))[0]
        )
    finally:
        await js.delete_stream("ACKED")

    assert [answer["seq"] for answer in answers] == [1, 2, 3]
    assert again == {"stream": "ACKED", "seq": 1, "duplicate": True}
    assert publisher.in_flight == 0  # nothing left behind


async def test_a_subject_no_stream_captures_fails_at_once_as_certainly_not_stored(
    nats_client: Client,
) -> None:
    publisher = AckedPublisher(nats_client, timeout=30)
    (future,) = await publisher.send([("nowhere.at.all", b"x", None)])

    with pytest.raises(WriteFailed) as failed:
        await asyncio.wait_for(future, 5)
    assert failed.value.sent is False
    assert publisher.in_flight == 0


async def test_an_unanswered_write_times_out_with_one_timer_for_them_all(
    nats_client: Client,
) -> None:
    # A plain subscriber that never answers: the server has interest, so no "no responders".
    await nats_client.subscribe("silent.>")
    await nats_client.flush()
    publisher = AckedPublisher(nats_client, timeout=0.2)
    await publisher.open()
    loop: Any = asyncio.get_running_loop()
    scheduled = len(loop._scheduled)

    futures = await publisher.send(
        [(f"silent.{index}", b"x", None) for index in range(100)]
    )

    assert len(loop._scheduled) <= scheduled + 1  # one sweep, not a timer per write
    results = await asyncio.gather(*futures, return_exceptions=True)
    assert all(isinstance(result, WriteFailed) and result.sent for result in results)
    assert publisher.in_flight == 0


async def test_a_write_on_a_closed_connection_fails_at_once_and_sends_nothing(
    nats_url: str,
) -> None:
    client = await nats.connect(nats_url)
    publisher = AckedPublisher(client)
    await publisher.open()
    await client.close()

    with pytest.raises(WriteFailed) as failed:
        await publisher.send([("acked.x", b"x", JSON_HEADERS)])
    assert failed.value.sent is False
    assert "closed" in failed.value.reason


async def test_a_write_while_the_connection_reconnects_is_not_buffered(
    nats_client: Client,
) -> None:
    publisher = AckedPublisher(nats_client)
    await publisher.open()
    client: Any = nats_client
    pending = client._pending_data_size
    client._status = Client.RECONNECTING  # as nats-py marks it while the server is away
    try:
        with pytest.raises(WriteFailed) as failed:
            await publisher.send([("acked.x", b"x", None)])
    finally:
        client._status = Client.CONNECTED
    assert "reconnecting" in failed.value.reason
    assert (
        client._pending_data_size == pending
    )  # nothing queued for after the reconnect


async def test_the_subscription_is_made_again_after_a_reconnect(
    nats_server_factory: Any,
) -> None:
    server = nats_server_factory()
    client = await nats.connect(server.url, reconnect_time_wait=0.1)
    try:
        await client.jetstream().add_stream(
            api.StreamConfig(name="BACK", subjects=["back.>"])
        )
        publisher = AckedPublisher(client, timeout=2)
        await publisher.open()
        await client.force_reconnect()
        for _ in range(100):
            if client.is_connected:
                break
            await asyncio.sleep(0.05)
        (future,) = await publisher.send([("back.1", b"x", None)])
        assert json.loads(await asyncio.wait_for(future, 5))["seq"] == 1
    finally:
        await client.close()
