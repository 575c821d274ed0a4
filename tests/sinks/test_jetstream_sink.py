"""JetStreamSink on a real nats-server: accepted on the PubAck, deduplicated, and every failure."""

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy, DiscardPolicy, StreamConfig

from interaction_worker import DeliveryContext, InteractionWorker, OutputRequest
from interaction_worker.errors import ConfigurationError
from interaction_worker.nodes import deliver_output
from interaction_worker.sinks import JetStreamSink, StreamTemplate
from interaction_worker.testing import NatsServerFactory


def _request(delivery_id: str = "d-1", content: Any = "hello") -> OutputRequest:
    return OutputRequest.model_validate(
        {
            "deliveryId": delivery_id,
            "message": {"role": "assistant", "content": content},
        }
    )


async def _deliver(sink: JetStreamSink, delivery_id: str = "d-1") -> Any:
    return await sink.deliver(_request(delivery_id), DeliveryContext(delivery_id))


@asynccontextmanager
async def _stream(
    url: str, *, max_msgs: int = -1, discard: DiscardPolicy = DiscardPolicy.OLD
) -> AsyncIterator[tuple[Client, str, str]]:
    """A client and a fresh stream `S` over `<base>.>`; the stream is deleted afterwards."""
    unique = uuid.uuid4().hex
    name, base = f"S{unique}", f"t{unique}"
    client = await nats.connect(url, max_reconnect_attempts=1)
    js = client.jetstream()
    await js.add_stream(
        StreamConfig(
            name=name, subjects=[f"{base}.>"], max_msgs=max_msgs, discard=discard
        )
    )
    try:
        yield client, name, base
    finally:
        if client.is_connected:
            await js.delete_stream(name)
        await client.close()


async def _stored(client: Client, stream: str) -> list[Msg]:
    """Every message of the stream, replayed by a consumer that starts after the publishes."""
    js = client.jetstream()
    info = await js.stream_info(stream)
    subscription = await js.subscribe(
        "", stream=stream, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL
    )
    try:
        return [
            await subscription.next_msg(timeout=5) for _ in range(info.state.messages)
        ]
    finally:
        await subscription.unsubscribe()


async def test_the_pub_ack_is_the_receipt_and_the_message_carries_its_msg_id(
    nats_url: str,
) -> None:
    async with _stream(nats_url) as (client, stream, base):
        sink = JetStreamSink(
            f"{base}.out.{{key}}", stream=stream, client=client, name="audit"
        )
        request = _request("a.b")
        receipt = await deliver_output(request, sink)
        assert receipt.to_wire() == {
            "deliveryId": "a.b",
            "status": "accepted",
            "metadata": {"stream": stream, "seq": 1, "duplicate": False},
        }
        [msg] = await _stored(client, stream)
        assert msg.subject == f"{base}.out.a=2Eb"
        assert msg.data == request.to_json()
        assert msg.headers is not None
        assert msg.headers["Nats-Msg-Id"] == "audit:a=2Eb"
        assert msg.headers["Content-Type"] == "application/json"
        assert msg.headers["Interaction-Delivery-Id"] == "a.b"


async def test_the_same_delivery_twice_is_stored_once_and_marked_duplicate(
    nats_url: str,
) -> None:
    async with _stream(nats_url) as (client, stream, base):
        sink = JetStreamSink(f"{base}.out", client=client)
        first = await _deliver(sink, "d-1")
        second = await _deliver(sink, "d-1")
        assert first["metadata"] == {"stream": stream, "seq": 1, "duplicate": False}
        assert second == {
            "deliveryId": "d-1",
            "status": "accepted",
            "metadata": {"stream": stream, "seq": 1, "duplicate": True},
        }
        assert len(await _stored(client, stream)) == 1


async def test_two_sinks_on_one_stream_do_not_drop_each_others_copy(
    nats_url: str,
) -> None:
    async with _stream(nats_url) as (client, stream, base):
        sinks = [JetStreamSink(f"{base}.{n}", client=client, name=n) for n in "ab"]
        receipts = [await _deliver(sink, "d-1") for sink in sinks]
        assert [r["metadata"]["duplicate"] for r in receipts] == [False, False]
        stored = await _stored(client, stream)
        assert [m.headers and m.headers["Nats-Msg-Id"] for m in stored] == [
            "a:d-1",
            "b:d-1",
        ]


async def test_a_reader_that_connects_later_replays_every_delivery(
    nats_url: str,
) -> None:
    # No consumer exists while the deliveries are stored: an absent reader loses nothing.
    async with _stream(nats_url) as (client, stream, base):
        sink = JetStreamSink(f"{base}.ui", client=client)
        ids = [f"d-{n}" for n in range(5)]
        for delivery_id in ids:
            assert (await _deliver(sink, delivery_id))["status"] == "accepted"
        replayed = await _stored(client, stream)
        assert [
            OutputRequest.model_validate_json(m.data).delivery_id for m in replayed
        ] == ids


async def test_no_stream_for_the_subject_is_rejected(nats_url: str) -> None:
    async with _stream(nats_url) as (client, _, _):
        sink = JetStreamSink(f"nostream{uuid.uuid4().hex}.out", client=client)
        assert await _deliver(sink) == {
            "deliveryId": "d-1",
            "status": "rejected",
            "error": {
                "code": "NO_STREAM",
                "message": "No stream stores the sink's subject",
                "retryable": False,
            },
        }


async def test_a_subject_stored_by_another_stream_is_rejected(nats_url: str) -> None:
    async with _stream(nats_url) as (client, _, base):
        sink = JetStreamSink(f"{base}.out", stream="SOMEOTHER", client=client)
        receipt = await _deliver(sink)
        assert receipt["status"] == "rejected"
        assert receipt["error"]["code"] == "STREAM_MISMATCH"


async def test_a_full_stream_that_discards_new_messages_rejects(nats_url: str) -> None:
    async with _stream(nats_url, max_msgs=1, discard=DiscardPolicy.NEW) as (
        client,
        _,
        base,
    ):
        sink = JetStreamSink(f"{base}.out", client=client)
        assert (await _deliver(sink, "d-1"))["status"] == "accepted"
        receipt = await _deliver(sink, "d-2")
        assert receipt["status"] == "rejected"
        assert receipt["error"]["code"] == "STREAM_REJECTED"
        assert receipt["error"]["message"].startswith(
            "The stream refused the message (JetStream error 100"
        )


async def test_a_responder_that_never_acks_gives_unknown(nats_url: str) -> None:
    subject = f"t{uuid.uuid4().hex}"
    async with await nats.connect(nats_url) as client:

        async def silent(msg: Msg) -> None:
            return None  # a core subscriber, not a stream: no PubAck ever comes

        await client.subscribe(subject, cb=silent)
        sink = JetStreamSink(subject, client=client, timeout=0.3)
        receipt = await _deliver(sink)
        assert receipt == {
            "deliveryId": "d-1",
            "status": "unknown",
            "error": {
                "code": "SINK_TIMEOUT",
                "message": "The sink did not answer within 0.3 s",
                "retryable": False,
            },
        }


async def test_a_stalled_server_gives_unknown_though_the_stream_may_store_it(
    nats_server_factory: NatsServerFactory,
) -> None:
    server = nats_server_factory()
    async with _stream(server.url) as (client, stream, base):
        sink = JetStreamSink(f"{base}.out", client=client, timeout=0.3)
        os.kill(server.pid, signal.SIGSTOP)
        try:
            receipt = await _deliver(sink, "stalled")
        finally:
            os.kill(server.pid, signal.SIGCONT)
        assert receipt["status"] == "unknown"
        assert receipt["error"]["code"] == "SINK_TIMEOUT"
        # Once the server runs again it stores the message (it reads the connection in order, so
        # before the next publish): "unknown" was the honest answer, and the same delivery sent
        # again is dropped as a duplicate of it.
        again = await _deliver(sink, "stalled")
        assert again["metadata"] == {"stream": stream, "seq": 1, "duplicate": True}


async def test_a_stopped_server_gives_rejected(
    nats_server_factory: NatsServerFactory,
) -> None:
    server = nats_server_factory()
    disconnected = asyncio.Event()

    async def on_disconnect() -> None:
        disconnected.set()

    client = await nats.connect(
        server.url,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.1,
        disconnected_cb=on_disconnect,
    )
    try:
        sink = JetStreamSink("anything.out", client=client)
        nats_server_factory.stop(server)
        with anyio.fail_after(10):
            await disconnected.wait()
        receipt = await _deliver(sink)
        assert receipt["status"] == "rejected"
        assert receipt["error"]["code"] == "SINK_UNAVAILABLE"
        assert receipt["error"]["retryable"] is True
    finally:
        await client.close()


async def test_the_worker_hands_its_connection_to_the_sink_on_start(
    nats_url: str,
) -> None:
    async with _stream(nats_url) as (client, stream, base):
        sink = JetStreamSink(f"{base}.out", stream=stream)
        with pytest.raises(RuntimeError, match="has no NATS connection"):
            await _deliver(sink)
        worker = InteractionWorker(output=sink)
        await worker.astart(client)
        receipt = await worker.deliver(_request("d-1"))
        assert receipt.metadata == {"stream": stream, "seq": 1, "duplicate": False}
        await worker.aclose()


async def test_a_missing_stream_is_created_for_direct_gets_and_an_existing_one_kept(
    nats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    unique = uuid.uuid4().hex
    stream, base = f"H{unique}", f"h{unique}"
    template = StreamTemplate(max_age=3600.0, duplicate_window=60.0)
    client = await nats.connect(nats_url)
    js = client.jetstream()
    try:
        sink = JetStreamSink(f"{base}.user-{{key}}.out", stream=stream, create=template)
        await sink.start(client)
        config = (await js.stream_info(stream)).config
        assert config.subjects == [f"{base}.*.out"]
        assert (config.allow_direct, config.max_age, config.duplicate_window) == (
            True,
            3600.0,
            60.0,
        )
        assert (await _deliver(sink))["status"] == "accepted"
        # Started again (a restart of the worker): the stream, and what it holds, stay.
        await JetStreamSink(
            f"{base}.user-{{key}}.out", stream=stream, create=template
        ).start(client)
        assert (await js.stream_info(stream)).state.messages == 1
        # A stream that cannot be created (its subject is another stream's): logged, and the
        # receipts say why nothing is stored.
        clash = JetStreamSink(
            f"{base}.user-{{key}}.out", stream=f"X{unique}", create=template
        )
        await clash.start(client)
        assert f"cannot create its stream X{unique}" in caplog.text
        assert (await _deliver(clash, "d-2"))["error"]["code"] == "STREAM_MISMATCH"
    finally:
        await js.delete_stream(stream)
        await client.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param({"stream": "A.B"}, "stream must be", id="stream-dot"),
        pytest.param({"stream": ""}, "stream must be", id="stream-empty"),
        pytest.param({"name": ""}, "name must be", id="name-empty"),
        pytest.param({"timeout": -1}, "timeout must be", id="negative-timeout"),
    ],
)
def test_invalid_settings_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        JetStreamSink("a.b", **options)
