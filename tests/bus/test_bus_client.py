"""`InteractionClient` against workers served on a real nats-server, through both bindings: each
request's typed answer, error replies, no worker, no reply, and a JetStream stream that captures the
requests (its PubAck is not the answer)."""

import asyncio
import uuid

import pytest
from bus_doubles import Kit
from bus_harness import Serve
from nats.aio.client import Client

from interaction_worker import ExternalResult, ToolCall
from interaction_worker.client import (
    InteractionClient,
    InteractionRequestError,
    NoWorkerError,
)

pytest_plugins = ["bus_fixtures"]


async def test_a_tool_call_returns_its_result_and_observation(
    serve: Serve, nats_client: Client
) -> None:
    served = await serve(Kit().worker())
    client = InteractionClient(nats_client, prefix=served.prefix, timeout=10)

    by_name = await client.call_tool("echo", text="hi", call_id="c-1")
    by_call = await client.call_tool(
        ToolCall(id="c-2", name="echo", arguments={"text": "yo"})
    )
    await client.close()

    assert by_name.result.call_id == "c-1"
    assert by_name.result.content == "hi"
    assert by_name.observation.message.content == "hi"
    assert (by_call.result.call_id, by_call.result.content) == ("c-2", "yo")


@pytest.mark.parametrize("serve", ["nats-py"], indirect=True)
@pytest.mark.parametrize(
    ("size", "shape"),
    [(10, "whole"), (400_000, "shortened"), (600_000, "RESULT_TOO_LARGE")],
)
async def test_a_calls_observation_is_the_workers_event_byte_for_byte(
    serve: Serve, nats_client: Client, size: int, shape: str
) -> None:
    """Computed from the result as the worker computes its event, never read from the public event
    subject: the same whether whole, shortened, or of a result replaced for its size (wire.md 1)."""
    served = await serve(Kit().worker())
    client = InteractionClient(nats_client, prefix=served.prefix, timeout=10)

    outcome = await client.call_tool("big", call_id="b-1", size=size, twice=True)
    await client.close()
    (event,) = await served.bus.wait_subject(f"{served.prefix}.tool.observation.b-1")

    assert outcome.observation.to_json() == event.data
    metadata = outcome.observation.metadata or {}
    error = outcome.observation.error
    assert {
        "whole": not metadata,
        "shortened": metadata == {"truncated": True},
        "RESULT_TOO_LARGE": error is not None and error.code == shape,
    }[shape]


async def test_every_family_answers_with_its_model(
    serve: Serve, nats_client: Client
) -> None:
    served = await serve(Kit().worker())
    async with InteractionClient(
        nats_client, prefix=served.prefix, timeout=10
    ) as client:
        tools = await client.list_tools()
        one = await client.list_tools("echo")
        discovered = await client.mcp_discover("docs")
        invoked = await client.mcp_invoke("docs", "search", q="nats", call_id="m-1")
        observation = await client.observe(
            ExternalResult(call_id="o-1", source="s", status="success", content="x")
        )
        receipt = await client.deliver(
            {"deliveryId": "d-1", "message": {"role": "assistant", "content": "hi"}}
        )

    assert [t.name for t in tools][:2] == ["echo", "slow"]
    assert [t.name for t in one] == ["echo"]
    assert [c.name for c in discovered.capabilities] == ["search"]
    assert invoked.result.source == "docs:search"
    assert invoked.observation.call_id == "m-1"
    assert observation.message.content == "x"
    assert (receipt.delivery_id, receipt.status) == ("d-1", "accepted")


async def test_an_error_reply_raises_with_the_wire_code(
    serve: Serve, nats_client: Client
) -> None:
    served = await serve(Kit().worker())
    client = InteractionClient(nats_client, prefix=served.prefix, timeout=10)

    with pytest.raises(InteractionRequestError) as refused:
        await client.call_tool("ghost", call_id="c-1")
    await client.close()

    assert (refused.value.code, refused.value.status) == ("NOT_FOUND", 404)
    assert refused.value.message == "Unknown tool: ghost"


async def test_no_worker_and_no_reply_are_told_apart(nats_client: Client) -> None:
    prefix = f"t{uuid.uuid4().hex}"
    client = InteractionClient(nats_client, prefix=prefix, timeout=0.5)
    with pytest.raises(NoWorkerError, match=f"no worker is serving {prefix}.tool.call"):
        await client.call_tool("echo", text="hi")

    silent = await nats_client.subscribe(
        f"{prefix}.tool.call"
    )  # takes it, never answers
    with pytest.raises(
        TimeoutError, match=f"no reply on {prefix}.tool.call within 0.5 s"
    ):
        await client.call_tool("echo", text="hi")
    await silent.unsubscribe()
    await client.close()


async def test_a_stream_capturing_the_requests_does_not_answer_for_the_worker(
    serve: Serve, nats_client: Client
) -> None:
    """The stream's PubAck comes to the publish's own reply subject; the worker's reply to the
    client's Interaction-Reply-To inbox, which is the only answer read."""
    served = await serve(Kit(slow_seconds=0.2).worker(concurrency=4))
    stream = f"CALLS_{served.prefix}"
    js = nats_client.jetstream()
    await js.add_stream(name=stream, subjects=[f"{served.prefix}.tool.call"])
    try:
        client = InteractionClient(nats_client, prefix=served.prefix, timeout=10)
        outcome = await client.call_tool("slow", call_id="s-1")
        await client.close()
    finally:
        await js.delete_stream(stream)

    assert outcome.result.call_id == "s-1"
    assert outcome.result.status == "success"


async def test_close_ends_waiting_requests(serve: Serve, nats_client: Client) -> None:
    served = await serve(Kit(slow_seconds=0.5).worker())
    client = InteractionClient(nats_client, prefix=served.prefix, timeout=10)
    waiting = asyncio.ensure_future(client.call_tool("slow"))
    await asyncio.sleep(0.1)

    await client.close()

    with pytest.raises(asyncio.CancelledError):
        await waiting
