"""Durable mode (wire.md 7) on a real nats-server, for what a worker serves and what certainly did not
start: a kind's subject joins the calls stream only once a worker serving it has started, and an MCP
invoke or a delivery that sent nothing comes back, with the ledger on or off, until its last executed
delivery, where the invoke is refused UNAVAILABLE and dead-lettered without a result event."""

import json
from collections.abc import AsyncIterator
from typing import Any

import nats
import nats.js.errors
import pytest
from bus_harness import decode
from nats.aio.client import Client
from test_bus_durable import (
    Durable,
    Unreachable,
    ask,
    drained,
    eventually,
    has_messages,
    stream_messages,
)

from interaction_worker import (
    InteractionWorker,
    McpToolResult,
    McpUnavailable,
    Sandbox,
)
from interaction_worker.commands import Interaction
from interaction_worker.subscribers import DurableBinding

pytest_plugins = ["bus_fixtures"]


@pytest.fixture
async def durable(nats_url: str) -> AsyncIterator[Durable]:
    deployment = Durable(nats_url)
    try:
        yield deployment
    finally:
        await deployment.close()


def commands_worker() -> InteractionWorker:
    protocol = Interaction.define(
        command_field="type",
        commands={"ping": {"category": "query", "fields": {}}},
    )
    return InteractionWorker(
        commands=Interaction.bind(protocol, {"ping": lambda value, context: "pong"})
    )


async def calls_subjects(client: Client, durable: Durable) -> list[str]:
    info = await client.jetstream().stream_info(f"CALLS_{durable.tag}")
    return sorted(info.config.subjects or [])


async def test_a_kind_joins_the_calls_stream_only_once_a_worker_serving_it_has_started(
    durable: Durable, nats_client: Client
) -> None:
    p, js = durable.prefix, nats_client.jetstream()
    await durable.serve()  # no command protocol

    assert await calls_subjects(nats_client, durable) == [
        f"{p}.mcp.call",
        f"{p}.output.deliver",
        f"{p}.tool.call",
    ]
    consumers = await js.consumers_info(f"CALLS_{durable.tag}")
    assert sorted(c.name for c in consumers) == [
        f"{p}-workers-{kind}" for kind in ("mcp", "output", "tool")
    ]
    # Refused at once, as a core request gets no responders, never accepted to wait for good.
    with pytest.raises(nats.js.errors.NoStreamResponseError):
        await js.publish(f"{p}.command", b'{"type": "ping"}', timeout=2)

    await durable.serve(worker=commands_worker())

    assert f"{p}.command" in await calls_subjects(nats_client, durable)
    answer = decode(await ask(nats_client, p, b'{"type": "ping"}', "command"))
    assert answer == {"id": "ping", "result": "pong"}


class Unconnected:
    """An MCP server that is not connected for its first `times` invokes (nothing sent), then
    answers."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.invokes = 0

    async def list_tools(self, cursor: str | None = None) -> Any:
        raise McpUnavailable()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        self.invokes += 1
        if self.invokes <= self.times:
            raise McpUnavailable()
        return McpToolResult(content=[{"type": "text", "text": "found"}])


def invoke(call_id: str) -> bytes:
    return json.dumps(
        {
            "operation": "invoke",
            "server": "docs",
            "call": {"id": call_id, "name": "search", "arguments": {}},
        }
    ).encode()


def mcp_worker(server: Unconnected) -> InteractionWorker:
    return InteractionWorker(mcp={"docs": server}, sandbox=Sandbox(mcp=("docs",)))


@pytest.mark.parametrize("ledger", [True, False], ids=["ledger", "no-ledger"])
async def test_an_mcp_invoke_whose_server_was_not_connected_comes_back_until_it_is_answered(
    durable: Durable, nats_client: Client, ledger: bool
) -> None:
    server = Unconnected(times=2)
    await durable.serve(
        ledger=durable.ledger(enabled=ledger), worker=mcp_worker(server)
    )

    reply = decode(await ask(nats_client, durable.prefix, invoke("m-1"), "mcp.call"))

    assert reply["result"]["status"] == "success"
    assert (
        server.invokes == 3
    )  # two returns with nothing sent (nak_backoff 0.1 s), then sent


@pytest.mark.parametrize("ledger", [True, False], ids=["ledger", "no-ledger"])
async def test_an_mcp_invoke_not_connected_on_its_last_delivery_is_refused_and_dead_lettered(
    durable: Durable, nats_client: Client, ledger: bool
) -> None:
    server = Unconnected(times=10)
    await durable.serve(
        ledger=durable.ledger(enabled=ledger), worker=mcp_worker(server)
    )

    reply = await ask(nats_client, durable.prefix, invoke("m-2"), "mcp.call")

    assert reply.headers is not None
    assert reply.headers["Nats-Service-Error-Code"] == "503"
    assert decode(reply) == {
        "error": {"code": "UNAVAILABLE", "message": "MCP server is not connected"}
    }
    assert server.invokes == 3  # durable.max_deliver
    dead = f"DEAD_{durable.tag}"
    await eventually(lambda: has_messages(nats_client, dead))
    (letter,) = await stream_messages(nats_client, dead)
    assert letter.subject == f"{durable.prefix}.dead.mcp.m-2"
    assert decode(letter)["attempts"] == 3
    assert decode(letter)["error"]["code"] == "UNAVAILABLE"
    await eventually(lambda: drained(nats_client, f"CALLS_{durable.tag}"))
    # The dead letter is the event: no result, no observation.
    assert await stream_messages(nats_client, f"EVENTS_{durable.tag}") == []
    if ledger:  # nothing ran: the claim was released, so a retry runs it
        kv = await nats_client.jetstream().key_value(f"ledger_{durable.tag}")
        with pytest.raises(nats.js.errors.KeyNotFoundError):
            await kv.get("mcp.m-2")


async def test_without_the_ledger_a_delivery_no_sink_could_send_is_redelivered_until_sent(
    durable: Durable, nats_client: Client
) -> None:
    sink = Unreachable(times=2)
    await durable.serve(
        ledger=durable.ledger(enabled=False),
        worker=InteractionWorker(output=sink, concurrency=2),
    )
    delivery = {"deliveryId": "u-3", "message": {"role": "assistant", "content": "hi"}}

    receipt = decode(
        await ask(
            nats_client, durable.prefix, json.dumps(delivery).encode(), "output.deliver"
        )
    )

    assert receipt == {"deliveryId": "u-3", "status": "accepted"}
    assert sink.deliveries == ["u-3"] * 3


async def test_a_binding_that_serves_no_durable_kind_makes_no_calls_stream(
    durable: Durable, nats_client: Client
) -> None:
    """The kinds a binding serves are its own to say (by default its handler's): observe and list
    only need the events and dead-letter streams, no calls stream and no consumer."""
    client = await nats.connect(durable.url)
    handler = InteractionWorker().message_handler(prefix=durable.prefix, durable=True)
    binding = DurableBinding(
        client,
        handler,
        queue=f"{durable.prefix}-workers",
        settings=durable.settings(),
        kinds=("observe", "list"),
    )
    durable.bindings.append((binding, client))
    await binding.start()
    js = nats_client.jetstream()

    with pytest.raises(nats.js.errors.NotFoundError):
        await js.stream_info(f"CALLS_{durable.tag}")
    await js.stream_info(f"DEAD_{durable.tag}")
    listed = await nats_client.request(f"{durable.prefix}.tool.list", b"{}", timeout=5)
    assert decode(listed) == {"tools": []}
    assert [e.endpoint.kind for e in binding.served_endpoints()] == ["observe", "list"]
