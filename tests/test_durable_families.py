"""The families of a durable handler, without a bus: what certainly did not start comes back later
(`Redelivered`) for MCP requests and deliveries only, and a message delivered past its last attempt
still finds the ledger through every wrapper (`Measured`, `Redelivered`). What crosses the bus is
proven in tests/bus/test_bus_durable_served.py."""

import pytest

from interaction_worker import InteractionWorker
from interaction_worker.ledger import Ledger, MemoryStore
from interaction_worker.subscribers.requests import (
    Ledgered,
    Measured,
    Redelivered,
    ledgered,
)


@pytest.mark.parametrize("measured", [False, True], ids=["plain", "measured"])
def test_a_durable_handler_redelivers_mcp_and_output_and_finds_the_ledger_inside(
    measured: bool,
) -> None:
    handler = InteractionWorker().message_handler(
        ledger=Ledger(MemoryStore(), worker="w"), durable=True
    )
    if measured:
        handler.measure()
    inner = {
        kind: f.family if isinstance(f, Measured) else f
        for kind, f in handler.families.items()
    }

    assert [k for k, f in inner.items() if isinstance(f, Redelivered)] == [
        "mcp",
        "output",
    ]
    for kind in ("tool", "mcp", "output"):
        assert isinstance(ledgered(handler.families[kind]), Ledgered)
    assert ledgered(handler.families["observe"]) is None


def test_a_core_handler_answers_what_did_not_start_as_it_is() -> None:
    handler = InteractionWorker().message_handler(
        ledger=Ledger(MemoryStore(), worker="w")
    )

    assert not any(isinstance(f, Redelivered) for f in handler.families.values())
