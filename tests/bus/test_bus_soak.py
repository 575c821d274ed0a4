"""A soak (slow): refused calls, slow calls, calls past a short tool_timeout and deliveries, mixed at
random for DURATION seconds on a real nats-server through each binding. Every request must get the
outcome its kind promises (docs/guarantees.md), and the worker must still serve at the end: nothing a
call leaves behind (a deadline, a cancellation) may reach the calls after it.
"""

import asyncio
import json
import random
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import nats
import nats.errors
import pytest
from bus_doubles import Boom, Echo, Slow
from bus_harness import Serve

from interaction_worker import (
    DeliveryContext,
    InteractionWorker,
    OutputRequest,
    Sandbox,
)

pytest_plugins = ["bus_fixtures"]

DURATION = 35.0  # seconds per binding
IN_FLIGHT = 16  # requests the client keeps outstanding
TIMEOUT = 1.0  # the worker's tool_timeout
PATIENCE = 15.0  # how long the client waits for any one reply

Expect = Callable[[dict[str, Any]], bool]


class SlowSink:
    """Accepts each delivery after sleeping the seconds its content gives."""

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        await asyncio.sleep(float(str(request.message.content)))
        return {"deliveryId": request.delivery_id, "status": "accepted"}


def refused(code: str) -> Expect:
    return lambda reply: reply.get("error", {}).get("code") == code and len(reply) == 1


def status(value: str, code: str | None = None) -> Expect:
    def check(reply: dict[str, Any]) -> bool:
        error = reply.get("error")
        return reply.get("status") == value and (
            code is None or (isinstance(error, dict) and error.get("code") == code)
        )

    return check


def call(call_id: str, name: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
    return "tool.call", {"call": {"id": call_id, "name": name, "arguments": arguments}}


def pick(rng: random.Random, n: int) -> tuple[str, str, dict[str, Any], Expect]:
    """The n-th request of the mix: its kind, subject suffix, body and expected outcome."""
    roll = rng.random()
    ident = f"soak-{n}"
    if roll < 0.04:
        return ("refused", *call(ident, "ghost"), refused("NOT_FOUND"))
    if roll < 0.08:
        return ("refused", *call(ident, "echo", text=5), refused("INVALID_INPUT"))
    if roll < 0.12:
        return ("refused", *call(ident, "boom"), refused("INTERNAL"))
    if roll < 0.50:
        seconds = round(rng.uniform(0.0, 0.6), 3)
        return ("slow", *call(ident, "slow", seconds=seconds), status("success"))
    if roll < 0.58:
        return (
            "timeout",
            *call(ident, "slow", seconds=TIMEOUT + 1.0),
            status("timeout", "TOOL_TIMEOUT"),
        )
    if roll < 0.88:
        body = {
            "deliveryId": ident,
            "message": {
                "role": "assistant",
                "content": str(round(rng.uniform(0.0, 0.3), 3)),
            },
        }
        return ("delivery", "output.deliver", body, status("accepted"))
    return ("quick", *call(ident, "echo", text="hi"), status("success"))


@pytest.mark.slow
async def test_every_request_of_a_long_mixed_run_is_answered_and_the_worker_serves_on(
    serve: Serve, nats_url: str
) -> None:
    slow = Slow()
    worker = InteractionWorker(
        tools=[slow, Echo(), Boom()],
        output=SlowSink(),
        sandbox=Sandbox(tools=["slow", "echo", "boom", "ghost"]),
        concurrency=4,
    )
    served = await serve(worker, tool_timeout=TIMEOUT)
    client = await nats.connect(nats_url, max_reconnect_attempts=1)
    rng = random.Random(29)
    sent: Counter[str] = Counter()
    wrong: list[tuple[str, dict[str, Any] | str]] = []
    counter = iter(range(10**9))

    async def one(n: int) -> None:
        kind, subject, body, expected = pick(rng, n)
        sent[kind] += 1
        try:
            msg = await client.request(
                f"{served.prefix}.{subject}",
                json.dumps(body).encode(),
                timeout=PATIENCE,
            )
        except nats.errors.TimeoutError:
            wrong.append((kind, "no reply"))
            return
        reply = json.loads(msg.data)
        if not expected(reply):
            wrong.append((kind, reply))

    async def client_loop(stop_at: float) -> None:
        while time.monotonic() < stop_at:
            await one(next(counter))

    try:
        stop_at = time.monotonic() + DURATION
        await asyncio.gather(*(client_loop(stop_at) for _ in range(IN_FLIGHT)))

        # Still serving: a burst of quick calls, each answered at once.
        started = time.monotonic()
        await asyncio.gather(
            *(
                client.request(
                    f"{served.prefix}.tool.call",
                    json.dumps(call(f"final-{i}", "echo", text="hi")[1]).encode(),
                    timeout=5,
                )
                for i in range(50)
            )
        )
        burst = time.monotonic() - started
    finally:
        await client.close()

    assert wrong == [], f"{len(wrong)} of {sum(sent.values())} wrong: {wrong[:5]}"
    assert sent["refused"] > 30 and sent["timeout"] > 20 and sent["delivery"] > 80
    assert burst < 5
    assert slow.active == 0
    if served.nats_binding is not None:
        dispatcher = served.nats_binding.dispatcher
        assert dispatcher.pending == 0 and dispatcher.lost == 0
