"""Deliveries over the bus to real sinks, through both bindings: a fan-out built in code and one built
by `app.build_worker` from a parsed configuration, their replies and their receipt events."""

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from bus_harness import Bus, Serve, Served, decode
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy, StreamConfig

from interaction_worker import DeliveryContext, InteractionWorker, OutputRequest
from interaction_worker.app import build_worker
from interaction_worker.config import parse_settings
from interaction_worker.sinks import FanoutSink, FileSink, JetStreamSink, NatsSink
from interaction_worker.subscribers import subject_key

pytest_plugins = ["bus_fixtures"]


def _delivery(delivery_id: str, content: Any = "hello") -> dict[str, Any]:
    return {
        "deliveryId": delivery_id,
        "message": {"role": "assistant", "content": content},
    }


class Collect:
    """A sink given in code."""

    name = "collect"

    def __init__(self) -> None:
        self.requests: list[OutputRequest] = []

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        self.requests.append(request)
        return {"deliveryId": request.delivery_id, "status": "accepted"}


class Broken:
    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        raise RuntimeError("sink unavailable")


class Stuck:
    timeout = 0.2

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        await asyncio.Event().wait()


class Destinations:
    """A UI subscribed to `ui.<id>.>` and a stream `S<id>` over `store.<id>.>` on the session server."""

    def __init__(self, client: Client) -> None:
        unique = uuid.uuid4().hex
        self.client = client
        self.ui_subject = f"ui.{unique}"
        self.store_subject = f"store.{unique}"
        self.stream = f"S{unique}"
        self.ui: list[Msg] = []
        self._changed = asyncio.Event()

    async def open(self) -> None:
        await self.client.jetstream().add_stream(
            StreamConfig(name=self.stream, subjects=[f"{self.store_subject}.>"])
        )
        await self.client.subscribe(f"{self.ui_subject}.>", cb=self._on_ui)
        await self.client.flush()

    async def _on_ui(self, msg: Msg) -> None:
        self.ui.append(msg)
        self._changed.set()

    async def ui_messages(self, count: int) -> list[Msg]:
        with anyio.fail_after(10):
            while len(self.ui) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.ui

    async def stored(self) -> list[Msg]:
        js = self.client.jetstream()
        count = (await js.stream_info(self.stream)).state.messages
        subscription = await js.subscribe(
            "",
            stream=self.stream,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.ALL,
        )
        try:
            return [await subscription.next_msg(timeout=5) for _ in range(count)]
        finally:
            await subscription.unsubscribe()

    async def close(self) -> None:
        await self.client.jetstream().delete_stream(self.stream)


@pytest.fixture
async def destinations(nats_client: Client) -> AsyncIterator[Destinations]:
    found = Destinations(nats_client)
    await found.open()
    try:
        yield found
    finally:
        await found.close()


async def _start(served: Served) -> None:
    """What `run` does after connecting: hand the worker's connection to its sinks."""
    client = served.client or (served.broker.connection if served.broker else None)
    assert client is not None
    await served.worker.astart(client)


async def _deliver(
    bus: Bus, delivery_id: str, content: Any = "hello"
) -> tuple[Msg, Msg]:
    """The reply and the receipt event of one delivery."""
    subject = f"{bus.prefix}.output.receipt.{subject_key(delivery_id)}"
    count = len(bus.on(subject)) + 1
    reply = await bus.request("output", _delivery(delivery_id, content))
    return reply, (await bus.wait_subject(subject, count))[-1]


def _header(msg: Msg, name: str) -> str | None:
    return (msg.headers or {}).get(name)


async def test_a_code_fanout_reaches_a_ui_a_stream_a_file_and_code(
    serve: Serve, destinations: Destinations, tmp_path: Path
) -> None:
    collect = Collect()
    fanout = FanoutSink(
        [
            NatsSink(f"{destinations.ui_subject}.{{key}}", name="ui"),
            JetStreamSink(
                f"{destinations.store_subject}.{{key}}",
                stream=destinations.stream,
                name="history",
            ),
            FileSink(tmp_path / "out.jsonl", name="audit"),
            collect,
        ]
    )
    served = await serve(InteractionWorker(output=fanout))
    await _start(served)
    reply, event = await _deliver(served.bus, "d.1")

    expected = {
        "deliveryId": "d.1",
        "status": "accepted",
        "metadata": {
            "sinks": {
                name: {"status": "accepted"}
                for name in ("ui", "history", "audit", "collect")
            }
        },
    }
    assert decode(reply) == decode(event) == expected
    assert event.subject == f"{served.prefix}.output.receipt.d=2E1"
    assert _header(event, "Interaction-Status") == "accepted"
    assert _header(event, "Interaction-Error-Code") is None

    body = OutputRequest.model_validate(_delivery("d.1")).to_json()
    [ui] = await destinations.ui_messages(1)
    assert (ui.subject, ui.data) == (f"{destinations.ui_subject}.d=2E1", body)
    [stored] = await destinations.stored()
    assert stored.data == body
    assert _header(stored, "Nats-Msg-Id") == "history:d=2E1"
    await served.worker.aclose()
    assert (tmp_path / "out.jsonl").read_bytes() == body + b"\n"
    assert [r.delivery_id for r in collect.requests] == ["d.1"]


@pytest.mark.parametrize(
    ("policy", "status", "code", "message"),
    [
        pytest.param("all", "unknown", "SINKS_INCOMPLETE", "Not every sink accepted the delivery: history", id="all"),
        pytest.param("any", "accepted", None, None, id="any"),
    ],
)  # fmt: skip
async def test_a_fanout_with_a_missing_stream_follows_its_policy(
    serve: Serve,
    destinations: Destinations,
    policy: Any,
    status: str,
    code: str | None,
    message: str | None,
) -> None:
    fanout = FanoutSink(
        [
            NatsSink(f"{destinations.ui_subject}.{{key}}", name="ui"),
            JetStreamSink(f"nostream.{uuid.uuid4().hex}", name="history"),
        ],
        policy=policy,
    )
    served = await serve(InteractionWorker(output=fanout))
    await _start(served)
    reply, event = await _deliver(served.bus, "d-2")

    receipt = decode(reply)
    assert decode(event) == receipt
    assert receipt["status"] == status
    assert receipt["metadata"]["sinks"] == {
        "ui": {"status": "accepted"},
        "history": {
            "status": "rejected",
            "error": {
                "code": "NO_STREAM",
                "message": "No stream stores the sink's subject",
                "retryable": False,
            },
        },
    }
    if code is None:
        assert "error" not in receipt
    else:
        assert receipt["error"] == {"code": code, "message": message}
    assert _header(event, "Interaction-Status") == status
    assert _header(event, "Interaction-Error-Code") == code
    assert served.bus.dead_letters() == []
    await served.worker.aclose()


async def test_a_worker_built_from_a_configuration_delivers_through_its_fanout(
    serve: Serve, destinations: Destinations, tmp_path: Path
) -> None:
    text = f"""\
output:
  policy: all
  sinks:
    - {{type: nats, name: ui, subject: "{destinations.ui_subject}.{{key}}"}}
    - {{type: jetstream, subject: "{destinations.store_subject}.{{key}}", stream: {destinations.stream}}}
    - {{type: file, path: deliveries.jsonl}}
"""
    settings = parse_settings(yaml.safe_load(text), base_dir=tmp_path)
    collect = Collect()
    worker = build_worker(settings, InteractionWorker(output=collect))
    served = await serve(worker)
    await _start(served)
    bus = served.bus
    first, first_event = await _deliver(bus, "c-1")
    again, again_event = await _deliver(
        bus, "c-1"
    )  # a client retrying the same delivery

    names = ("collect", "ui", "jetstream#1", "file#2")
    for msg in (first, first_event, again, again_event):
        assert decode(msg) == {
            "deliveryId": "c-1",
            "status": "accepted",
            "metadata": {"sinks": {name: {"status": "accepted"} for name in names}},
        }
    # The stream kept one copy (Nats-Msg-Id "jetstream#1:c-1"); core NATS, the file and the code
    # sink have no deduplication of their own: they got it twice, as the idempotency key says.
    [stored] = await destinations.stored()
    assert _header(stored, "Nats-Msg-Id") == "jetstream#1:c-1"
    assert len(await destinations.ui_messages(2)) == 2
    await worker.aclose()
    lines = (tmp_path / "deliveries.jsonl").read_bytes().splitlines()
    assert [json.loads(line)["deliveryId"] for line in lines] == ["c-1", "c-1"]
    assert len(collect.requests) == 2


async def test_a_lone_sink_that_raises_gets_an_error_reply_and_a_dead_letter(
    serve: Serve, tmp_path: Path
) -> None:
    worker = build_worker(
        parse_settings({}, base_dir=tmp_path), InteractionWorker(output=Broken())
    )
    served = await serve(worker)
    bus = served.bus
    sent = await bus.send("output", _delivery("d-3"))
    reply = await bus.reply(sent)
    [dead] = await bus.wait_subject(f"{served.prefix}.dead.output.d-3")
    assert decode(reply) == {"error": {"code": "INTERNAL", "message": "Internal error"}}
    assert _header(reply, "Nats-Service-Error-Code") == "500"
    assert decode(dead)["deliveryId"] == "d-3"
    await bus.settle("output")
    assert bus.events() == []


async def test_a_lone_sink_past_its_timeout_gets_an_unknown_receipt(
    serve: Serve, tmp_path: Path
) -> None:
    worker = build_worker(
        parse_settings({}, base_dir=tmp_path), InteractionWorker(output=Stuck())
    )
    served = await serve(worker)
    reply, event = await _deliver(served.bus, "d-4")
    expected = {
        "deliveryId": "d-4",
        "status": "unknown",
        "error": {
            "code": "SINK_TIMEOUT",
            "message": "The sink did not answer within 0.2 s",
            "retryable": False,
        },
    }
    assert decode(reply) == decode(event) == expected
    assert _header(event, "Interaction-Error-Code") == "SINK_TIMEOUT"
    assert served.bus.dead_letters() == []
