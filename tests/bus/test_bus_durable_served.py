"""Durable mode (wire.md 7) on a real nats-server, for what a worker serves: a kind's subject joins the
calls stream only once a worker serving it has started."""

from collections.abc import AsyncIterator

import nats.js.errors
import pytest
from bus_harness import decode
from nats.aio.client import Client
from test_bus_durable import (
    Durable,
    ask,
)

from interaction_worker import (
    InteractionWorker,
)
from interaction_worker.commands import Interaction

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
