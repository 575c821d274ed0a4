"""The seams of `BindingOptions` on a real nats-server: a ledger store and an events writer given in
code take the place of the JetStream bucket and streams; and the defaults of the file, the service
and the bindings are one."""

import json
import uuid
from collections.abc import Sequence
from pathlib import Path

import nats
from bus_harness import unique_prefix
from nats.aio.client import Client

from interaction_worker import InteractionWorker, Sandbox
from interaction_worker.config import DurableSettings, IdempotencySettings, Settings
from interaction_worker.ledger import MemoryStore
from interaction_worker.service import ServeOptions
from interaction_worker.subscribers import Publish
from interaction_worker.subscribers.binding_options import BindingOptions

pytest_plugins = ["bus_fixtures"]


class Answer:
    name = "answer"
    input_schema = {"type": "object"}

    def validate(self, arguments: dict[str, object]) -> None:
        return None

    async def execute(
        self, arguments: dict[str, object], context: object
    ) -> dict[str, str]:
        return {"status": "success", "content": "42"}


class Written:
    """An `EventWriter` that keeps what it is given."""

    def __init__(self) -> None:
        self.subjects: list[str] = []

    async def write(self, events: Sequence[Publish], *, look_up: bool = False) -> None:
        self.subjects += [subject for subject, _, _ in events]


def worker() -> InteractionWorker:
    return InteractionWorker(tools=[Answer()], sandbox=Sandbox(tools=("answer",)))


def call(call_id: str) -> bytes:
    return json.dumps(
        {"call": {"id": call_id, "name": "answer", "arguments": {}}}
    ).encode()


async def test_a_ledger_store_given_in_code_holds_the_calls_claims(
    nats_client: Client,
) -> None:
    prefix, store = unique_prefix(), MemoryStore()
    binding = worker().nats_binding(
        nats_client,
        prefix=prefix,
        idempotency=IdempotencySettings(enabled=True, bucket="never_created"),
        ledger_store=store,
    )
    await binding.start()
    try:
        reply = await nats_client.request(f"{prefix}.tool.call", call("s-1"), timeout=5)
    finally:
        await binding.stop(1.0)

    assert json.loads(reply.data)["content"] == "42"
    entry = await store.get("tool.s-1")
    assert entry is not None
    assert json.loads(entry.value)["state"] == "done"


async def test_an_events_writer_given_in_code_stores_a_durable_calls_events(
    nats_url: str,
) -> None:
    prefix, tag = unique_prefix(), uuid.uuid4().hex[:10].upper()
    written = Written()
    client = await nats.connect(nats_url, max_reconnect_attempts=1)
    binding = worker().durable_binding(
        client,
        durable=DurableSettings(
            enabled=True,
            calls_stream=f"CALLS_{tag}",
            events_stream=f"EVENTS_{tag}",
            dead_stream=f"DEAD_{tag}",
        ),
        prefix=prefix,
        idempotency=IdempotencySettings(enabled=False),
        events=written,
    )
    await binding.start()
    try:
        inbox = client.new_inbox()
        replies = await client.subscribe(inbox)
        await client.jetstream().publish(
            f"{prefix}.tool.call",
            call("d-1"),
            headers={"Interaction-Reply-To": inbox},
        )
        reply = await replies.next_msg(timeout=5)
    finally:
        await binding.stop(1.0)
        await client.drain()

    assert json.loads(reply.data)["content"] == "42"
    assert written.subjects == [
        f"{prefix}.tool.result.d-1",
        f"{prefix}.tool.observation.d-1",
    ]


def test_the_file_the_service_and_the_bindings_share_their_defaults() -> None:
    settings = Settings(data_dir=Path("d"), workspace=Path("w"))
    options, service = BindingOptions(), ServeOptions()

    assert (
        settings.tool_timeout
        == service.tool_timeout
        == options.tool_timeout
        == InteractionWorker().message_handler().families["tool"].timeout  # type: ignore[attr-defined]
    )
    assert settings.max_pending == service.max_pending == options.max_pending
    assert settings.subjects.prefix == service.prefix == options.prefix
    assert settings.subjects.queue_group == options.queue_group
    assert settings.subjects.reply_prefixes == options.reply_prefixes
