"""NatsSink on a real nats-server: accepted once the server has read the message, and every failure."""

import asyncio
import contextlib
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from interaction_worker import DeliveryContext, InteractionWorker, OutputRequest
from interaction_worker.errors import ConfigurationError
from interaction_worker.nodes import deliver_output
from interaction_worker.sinks import NatsSink
from interaction_worker.testing import NatsServer, NatsServerFactory

UNAVAILABLE = {
    "code": "SINK_UNAVAILABLE",
    "message": "The sink is not connected; nothing was sent",
    "retryable": True,
}


def _request(delivery_id: str = "d-1", content: Any = "hello") -> OutputRequest:
    return OutputRequest.model_validate(
        {
            "deliveryId": delivery_id,
            "message": {"role": "assistant", "content": content},
        }
    )


async def _deliver(
    sink: NatsSink, delivery_id: str = "d-1", content: Any = "hi"
) -> Any:
    return await sink.deliver(
        _request(delivery_id, content), DeliveryContext(delivery_id)
    )


def _subject() -> str:
    return f"t{uuid.uuid4().hex}"


@asynccontextmanager
async def _connected(url: str, **options: Any) -> AsyncIterator[Client]:
    client = await nats.connect(url, max_reconnect_attempts=1, **options)
    try:
        yield client
    finally:
        await client.close()


def _wait_stopped(pid: int) -> None:
    """Until every thread of `pid` is stopped: a thread running on another core when SIGSTOP is
    sent may still answer a PING that arrives right after."""
    deadline = time.monotonic() + 5
    while True:
        states = set()
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError):
                # The state follows the command name in parentheses, which may hold spaces.
                states.add((task / "stat").read_text().rpartition(")")[2].split()[0])
        if states <= {"T", "t"}:
            return
        assert time.monotonic() < deadline, f"nats-server not stopped: {states}"
        time.sleep(0.001)


@contextmanager
def _paused(server: NatsServer) -> Iterator[None]:
    """The server process stopped (SIGSTOP): connections stay open, nothing is answered."""
    os.kill(server.pid, signal.SIGSTOP)
    try:
        _wait_stopped(server.pid)
        yield
    finally:
        os.kill(server.pid, signal.SIGCONT)


class Inbox:
    """A subscriber (a UI) that records what it receives."""

    def __init__(self) -> None:
        self.messages: list[Msg] = []
        self._changed = asyncio.Event()

    async def on_message(self, msg: Msg) -> None:
        self.messages.append(msg)
        self._changed.set()

    async def wait(self, count: int) -> list[Msg]:
        with anyio.fail_after(10):
            while len(self.messages) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.messages


async def test_two_subscribers_receive_the_wire_json_and_the_receipt_is_accepted(
    nats_url: str,
) -> None:
    base = _subject()
    async with (
        _connected(nats_url) as worker_client,
        _connected(nats_url) as ui_a,
        _connected(nats_url) as ui_b,
    ):
        inboxes = Inbox(), Inbox()
        await ui_a.subscribe(f"{base}.ui.*", cb=inboxes[0].on_message)
        await ui_b.subscribe(f"{base}.ui.*", cb=inboxes[1].on_message)
        await ui_a.flush()
        await ui_b.flush()
        sink = NatsSink(f"{base}.ui.{{key}}", client=worker_client, name="ui")
        request = _request("a.b c", {"text": "✓"})
        receipt = await deliver_output(request, sink)
        assert receipt.to_wire() == {"deliveryId": "a.b c", "status": "accepted"}
        for inbox in inboxes:
            [msg] = await inbox.wait(1)
            assert msg.subject == f"{base}.ui.a=2Eb=20c"
            assert msg.data == request.to_json()
            assert msg.headers == {
                "Content-Type": "application/json",
                "Interaction-Key": "a=2Eb=20c",
                "Interaction-Delivery-Id": "a.b c",
                "Nats-Msg-Id": "ui:a=2Eb=20c",
            }
        await sink.aclose()


async def test_an_id_unsafe_in_a_header_travels_only_as_its_key(nats_url: str) -> None:
    base = _subject()
    async with _connected(nats_url) as client:
        inbox = Inbox()
        await client.subscribe(f"{base}.>", cb=inbox.on_message)
        sink = NatsSink(f"{base}.{{key}}", client=client)
        assert (await _deliver(sink, " é\n"))["status"] == "accepted"
        [msg] = await inbox.wait(1)
        assert msg.subject == f"{base}.=20=C3=A9=0A"
        assert msg.headers is not None
        assert "Interaction-Delivery-Id" not in msg.headers
        assert msg.headers["Nats-Msg-Id"] == "nats:=20=C3=A9=0A"


async def test_with_no_subscriber_the_delivery_is_still_accepted(nats_url: str) -> None:
    # Core NATS is at most once: `accepted` says the server read it, not that anyone did.
    async with _connected(nats_url) as client:
        sink = NatsSink(f"{_subject()}.nobody", client=client)
        assert await _deliver(sink) == {"deliveryId": "d-1", "status": "accepted"}


async def test_a_slow_subscriber_does_not_hold_up_the_receipts(nats_url: str) -> None:
    subject = _subject()
    release = asyncio.Event()

    async def stuck(msg: Msg) -> None:
        await release.wait()

    async with _connected(nats_url) as client, _connected(nats_url) as ui:
        await ui.subscribe(subject, cb=stuck, pending_msgs_limit=2)
        await ui.flush()
        sink = NatsSink(subject, client=client, timeout=5)
        with anyio.fail_after(5):
            receipts = await asyncio.gather(
                *(_deliver(sink, f"d-{n}") for n in range(50))
            )
        assert {r["status"] for r in receipts} == {"accepted"}
        release.set()


async def test_the_worker_hands_its_connection_to_the_sink_on_start(
    nats_url: str,
) -> None:
    subject = _subject()
    sink = NatsSink(subject)
    with pytest.raises(RuntimeError, match="has no NATS connection"):
        await _deliver(sink)
    async with _connected(nats_url) as client:
        inbox = Inbox()
        await client.subscribe(subject, cb=inbox.on_message)
        worker = InteractionWorker(output=sink)
        await worker.astart(client)
        receipt = await worker.deliver(_request("d-9"))
        assert receipt.status == "accepted"
        assert [m.data for m in await inbox.wait(1)] == [_request("d-9").to_json()]
        await worker.aclose()
        # Closing the sink leaves the worker's connection open; a later delivery still works.
        assert client.is_connected
        assert (await _deliver(sink, "d-10"))["status"] == "accepted"


async def test_a_sink_given_a_client_keeps_it_on_start(nats_url: str) -> None:
    async with _connected(nats_url) as own, _connected(nats_url) as other:
        sink = NatsSink(_subject(), client=own)
        await sink.start(other)
        await other.close()
        assert (await _deliver(sink))["status"] == "accepted"


async def test_a_stopped_server_gives_rejected_and_a_restarted_one_accepted(
    nats_server_factory: NatsServerFactory,
) -> None:
    server = nats_server_factory()
    disconnected, reconnected = asyncio.Event(), asyncio.Event()

    async def on_disconnect() -> None:
        disconnected.set()

    async def on_reconnect() -> None:
        reconnected.set()

    client = await nats.connect(
        server.url,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.1,
        disconnected_cb=on_disconnect,
        reconnected_cb=on_reconnect,
    )
    try:
        sink = NatsSink(_subject(), client=client)
        assert (await _deliver(sink, "before"))["status"] == "accepted"
        nats_server_factory.stop(server)
        with anyio.fail_after(10):
            await disconnected.wait()
        # Nothing is published while disconnected: the client would send it after reconnecting,
        # so the receipt could not be honest about it. Rejected, and safe to retry.
        assert await _deliver(sink, "during") == {
            "deliveryId": "during",
            "status": "rejected",
            "error": UNAVAILABLE,
        }
        nats_server_factory("-p", str(server.port), workdir=server.workdir)
        with anyio.fail_after(15):
            await reconnected.wait()
        assert (await _deliver(sink, "after"))["status"] == "accepted"
    finally:
        await client.close()


async def test_a_stalled_server_gives_unknown_and_the_connection_survives(
    nats_server_factory: NatsServerFactory,
) -> None:
    server = nats_server_factory()
    subject = _subject()
    async with _connected(server.url) as client, _connected(server.url) as ui:
        inbox = Inbox()
        await ui.subscribe(subject, cb=inbox.on_message)
        await ui.flush()
        sink = NatsSink(subject, client=client, timeout=0.3)
        with _paused(server):
            receipt = await _deliver(sink, "stalled")
        # The message was sent; the server reads it once it runs again: unknown was the truth.
        assert receipt == {
            "deliveryId": "stalled",
            "status": "unknown",
            "error": {
                "code": "SINK_TIMEOUT",
                "message": "The sink did not answer within 0.3 s",
                "retryable": False,
            },
        }
        assert [m.subject for m in await inbox.wait(1)] == [subject]
        # The late confirmation does not break the connection (nats-py's flush timeout would).
        assert (await _deliver(sink, "next"))["status"] == "accepted"
        await inbox.wait(2)


async def test_a_closed_connection_gives_rejected(nats_url: str) -> None:
    client = await nats.connect(nats_url)
    sink = NatsSink(_subject(), client=client)
    await client.close()
    assert (await _deliver(sink))["error"] == UNAVAILABLE


async def test_a_delivery_over_max_payload_is_rejected_and_the_connection_kept(
    nats_server_factory: NatsServerFactory, tmp_path: Any
) -> None:
    config = tmp_path / "small.conf"
    config.write_text("max_payload: 2048\n")
    server = nats_server_factory("-c", str(config))
    async with _connected(server.url) as client:
        sink = NatsSink(_subject(), client=client)
        # It fits the client's own check (the payload alone), not with the sink's headers.
        receipt = await _deliver(sink, "big", "x" * (2048 - 80))
        assert receipt["status"] == "rejected"
        assert receipt["error"]["code"] == "PAYLOAD_TOO_LARGE"
        assert client.is_connected
        assert (await _deliver(sink, "small"))["status"] == "accepted"


@pytest.mark.parametrize(
    ("subject", "options", "message"),
    [
        pytest.param("a.*", {}, "subject must be", id="wildcard"),
        pytest.param("a..b", {}, "subject must be", id="empty-token"),
        pytest.param("a b", {}, "subject must be", id="space"),
        pytest.param("a.{id}", {}, "subject must be", id="other-placeholder"),
        pytest.param("a", {"name": " "}, "name must be", id="blank-name"),
        pytest.param("a", {"name": "a\nb"}, "name must be", id="name-newline"),
        pytest.param("a", {"timeout": 0}, "timeout must be", id="zero-timeout"),
        pytest.param("a", {"timeout": True}, "timeout must be", id="bool-timeout"),
    ],
)
def test_invalid_settings_are_refused(
    subject: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        NatsSink(subject, **options)
