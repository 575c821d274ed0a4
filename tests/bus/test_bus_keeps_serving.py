"""A worker keeps serving whatever its calls end in (docs/guarantees.md): a refused call leaves no
deadline behind to cancel what its worker runs next, a tool or sink that raises a CancelledError of its
own is answered, and the worker serves the calls after them. Both bindings, on a real nats-server, with
concurrency 1 so that every call runs in the same long-lived task.
"""

import asyncio
import json
import time
from typing import Any

from bus_doubles import Kit
from bus_harness import Serve, decode

pytest_plugins = ["bus_fixtures"]

# A short tool_timeout, a refused call at t=0, and a call of the slow tool from t=GAP to t=GAP+SLOW,
# across the moment the refused call's deadline would fire (GAP < TIMEOUT < GAP + SLOW) and well
# before its own (GAP + TIMEOUT).
TIMEOUT = 1.0
GAP = 0.5
SLOW = 0.8


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
