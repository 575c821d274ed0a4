"""The package's own request headers, `Interaction-Reply-To` and `Interaction-Command-Id`, found
whatever their case (clients of other languages lower-case header names; docs/wire.md 3), in both
bindings and in durable mode."""

import asyncio
import json
import uuid
from typing import Any

import anyio
import nats
from bus_harness import Serve, decode, unique_prefix
from nats.aio.msg import Msg

from interaction_worker import (
    Interaction,
    InteractionWorker,
    Sandbox,
    ToolContext,
)
from interaction_worker.config import DurableSettings

pytest_plugins = ["bus_fixtures"]

SPELLINGS = ("interaction-reply-to", "INTERACTION-REPLY-TO", "interaction-Reply-to")


class Echo:
    name = "echo"
    input_schema = {"type": "object"}

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return {"status": "success", "content": context.call_id}


def commanding() -> InteractionWorker:
    protocol = Interaction.define(
        command_field="type",
        commands={"ping": {"category": "query", "fields": {}}},
    )
    return InteractionWorker(
        tools=[Echo()],
        sandbox=Sandbox(tools=["echo"]),
        commands=Interaction.bind(protocol, {"ping": lambda: "pong"}),
    )


def tool_call(call_id: str) -> dict[str, Any]:
    return {"call": {"id": call_id, "name": "echo", "arguments": {}}}


async def test_a_reply_to_and_a_command_id_in_any_case_are_read(serve: Serve) -> None:
    served = await serve(commanding())
    bus = served.bus
    inbox = f"_INBOX.{uuid.uuid4().hex}"
    await bus.watch_also(f"{inbox}.>")

    sent = [
        await bus.send(
            "tool", tool_call(f"c-{number}"), headers={spelling: f"{inbox}.{number}"}
        )
        for number, spelling in enumerate(SPELLINGS)
    ]
    await bus.send(
        "command", {"type": "ping"}, headers={"interaction-command-id": "k-1"}
    )
    # Refused: its dead letter is keyed by the lower-cased header's id too.
    await bus.send(
        "command", {"type": "pong"}, headers={"Interaction-command-ID": "k-2"}
    )

    replies = await bus.wait(lambda m: m.subject.startswith(inbox), len(SPELLINGS))
    done = await bus.wait_subject(f"{served.prefix}.command.done.ping.k-1")
    letter = await bus.wait_subject(f"{served.prefix}.dead.command.k-2")
    await bus.settle("tool")

    assert sorted((m.subject, decode(m)["content"]) for m in replies) == [
        (f"{inbox}.{number}", f"c-{number}") for number in range(len(SPELLINGS))
    ]
    # Only the header's inbox: nothing on the requests' own reply subjects.
    assert [m for m in bus.messages if m.subject in {s.reply for s in sent}] == []
    assert decode(done[0]) == {"id": "ping", "result": "pong"}
    assert decode(letter[0])["commandId"] == "k-2"


async def test_the_documented_spelling_wins_over_another_case(serve: Serve) -> None:
    served = await serve(commanding())
    bus = served.bus
    inbox = f"_INBOX.{uuid.uuid4().hex}"
    await bus.watch_also(f"{inbox}.>")
    headers = {
        "interaction-reply-to": f"{inbox}.lower",
        "Interaction-Reply-To": f"{inbox}.documented",
    }

    await bus.send("tool", tool_call("c-1"), headers=headers)

    (reply,) = await bus.wait(lambda m: m.subject.startswith(inbox))
    await bus.settle("tool")
    assert reply.subject == f"{inbox}.documented"
    assert [m.subject for m in bus.messages if m.subject.startswith(inbox)] == [
        f"{inbox}.documented"
    ]


async def test_a_durable_worker_replies_to_a_lower_cased_reply_to(
    nats_url: str,
) -> None:
    """The calls stream answers the publish itself with a PubAck; the reply goes only to the header."""
    tag = uuid.uuid4().hex[:10].upper()
    prefix = unique_prefix()
    settings = DurableSettings(
        enabled=True,
        calls_stream=f"CALLS_{tag}",
        events_stream=f"EVENTS_{tag}",
        dead_stream=f"DEAD_{tag}",
    )
    worker_client = await nats.connect(nats_url, max_reconnect_attempts=1)
    client = await nats.connect(nats_url, max_reconnect_attempts=1)
    binding = commanding().durable_binding(
        worker_client, durable=settings, prefix=prefix
    )
    await binding.start()
    try:
        inbox = client.new_inbox()
        replies: asyncio.Queue[Msg] = asyncio.Queue()
        await client.subscribe(f"{inbox}.>", cb=replies.put)
        done = await client.subscribe(f"{prefix}.command.done.>")
        await client.flush()
        acks = [
            await client.request(
                f"{prefix}.tool.call",
                json.dumps(tool_call("d-1")).encode(),
                headers={"interaction-reply-to": f"{inbox}.tool"},
                timeout=5,
            ),
            await client.request(
                f"{prefix}.command",
                b'{"type": "ping"}',
                headers={
                    "INTERACTION-REPLY-TO": f"{inbox}.command",
                    "interaction-command-id": "k-9",
                },
                timeout=5,
            ),
        ]
        with anyio.fail_after(10):
            got = [await replies.get(), await replies.get()]
            event = await done.next_msg(timeout=10)
    finally:
        await binding.stop(1.0)
        await worker_client.drain()
        await client.close()

    assert all(json.loads(ack.data)["stream"] == f"CALLS_{tag}" for ack in acks)
    assert sorted((m.subject, m.data) for m in got) == [
        (f"{inbox}.command", b'{"id":"ping","result":"pong"}'),
        (f"{inbox}.tool", json.dumps(_result("d-1"), separators=(",", ":")).encode()),
    ]
    assert event.subject == f"{prefix}.command.done.ping.k-9"


def _result(call_id: str) -> dict[str, Any]:
    return {
        "callId": call_id,
        "source": "echo",
        "status": "success",
        "content": call_id,
    }
