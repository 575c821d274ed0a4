"""A worker keeps serving whatever its calls end in (docs/guarantees.md): a refused call leaves no
deadline behind to cancel what its worker runs next, a tool or sink that raises a CancelledError of its
own is answered, and the worker serves the calls after them. Both bindings, on a real nats-server, with
concurrency 1 so that every call runs in the same long-lived task.
"""

import asyncio
import time
from typing import Any

import pytest
from bus_doubles import OBJECT_SCHEMA, Echo, Kit
from bus_harness import Serve, decode

from interaction_worker import (
    DeliveryContext,
    InteractionWorker,
    OutputRequest,
    Sandbox,
    ToolContext,
)

pytest_plugins = ["bus_fixtures"]

# A short tool_timeout, a refused call at t=0, and a call of the slow tool from t=GAP to t=GAP+SLOW,
# across the moment the refused call's deadline would fire (GAP < TIMEOUT < GAP + SLOW) and well
# before its own (GAP + TIMEOUT).
TIMEOUT = 0.8
GAP = 0.3
SLOW = 0.6


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"call": {"id": call_id, "name": name, "arguments": arguments}}


async def test_a_refused_call_leaves_no_deadline_behind_for_the_next_call(
    serve: Serve,
) -> None:
    served = await serve(Kit().worker(concurrency=1), tool_timeout=TIMEOUT)
    bus = served.bus

    for refused in (
        call("refused-unknown", "ghost"),  # a tool that does not exist
        call("refused-invalid", "echo", text=5),  # its validate refuses the arguments
        call("refused-raises", "boom"),  # the tool raises
    ):
        reply = decode(await bus.request("tool", refused))
        assert "error" in reply, reply
    await asyncio.sleep(GAP)
    started = time.monotonic()
    reply = decode(await bus.request("tool", call("after", "slow", seconds=SLOW)))
    took = time.monotonic() - started

    assert reply["status"] == "success", reply
    assert took >= SLOW


class Quits:
    """A tool whose own work is cancelled: it awaits a future something else cancelled."""

    name = "quits"
    input_schema = OBJECT_SCHEMA

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        cut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        cut.cancel()
        await cut
        return {"status": "success"}


class QuittingSink:
    """A sink whose own work is cancelled for the content "quit"; it accepts anything else."""

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        if request.message.content == "quit":
            cut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            cut.cancel()
            await cut
        return {"deliveryId": request.delivery_id, "status": "accepted"}


def delivery(delivery_id: str, content: str) -> dict[str, Any]:
    return {
        "deliveryId": delivery_id,
        "message": {"role": "assistant", "content": content},
    }


async def test_a_cancellation_raised_by_a_tool_or_a_sink_itself_is_answered(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    worker = InteractionWorker(
        tools=[Quits(), Echo()],
        output=QuittingSink(),
        sandbox=Sandbox(tools=["quits", "echo"]),
        concurrency=1,
    )
    served = await serve(worker, tool_timeout=TIMEOUT)
    bus = served.bus

    refused = await bus.request("tool", call("quits-1", "quits"))
    receipt = decode(await bus.request("output", delivery("d-quit", "quit")))
    after = decode(await bus.request("tool", call("after", "echo", text="hi")))
    delivered = decode(await bus.request("output", delivery("d-after", "hi")))

    # A CancelledError the tool raised while its call was not being cancelled is the tool's failure:
    # refused INTERNAL with a dead letter, as any exception it raises.
    assert decode(refused) == {
        "error": {"code": "INTERNAL", "message": "Internal error"}
    }
    (letter,) = await bus.wait(bus.is_dead)
    assert decode(letter)["callId"] == "quits-1"  # and the delivery has none
    # A sink's: the receipt is unknown (it may have the delivery), logged.
    assert receipt == {
        "deliveryId": "d-quit",
        "status": "unknown",
        "error": {
            "code": "SINK_CANCELLED",
            "message": "The sink's call was cancelled before it answered",
            "retryable": False,
        },
    }
    assert "the sink's call for delivery d-quit was cancelled" in caplog.text
    # And the worker serves on.
    assert after["status"] == "success"
    assert delivered["status"] == "accepted"
