"""A claim lives as long as its message (wire.md 8): its lease is renewed while the request runs and
never after, however the request ends."""

import asyncio
from typing import Any

import pytest

from interaction_worker.contracts.wire import IdNames
from interaction_worker.errors import Internal
from interaction_worker.ledger import Ledger, MemoryStore
from interaction_worker.nodes.side_effects import side_effect_starts
from interaction_worker.subscribers import Incoming
from interaction_worker.subscribers.outgoing import Publish
from interaction_worker.subscribers.requests import Ledgered

KEY = "tool.c-1"
MSG = Incoming("interaction.tool.call", b"{}", None, None)


class Started:
    """A family whose request marks its side effect started, then answers."""

    def identify(self, body: dict[str, Any], msg: Incoming) -> str | None:
        return "c-1"

    def id_names(self, body: dict[str, Any]) -> IdNames | None:
        return None

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> dict[str, Any]:
        await side_effect_starts()
        return {"status": "success"}

    def publishes(
        self, outcome: dict[str, Any], msg: Incoming, key: str, target: str | None
    ) -> list[Publish]:
        return []


class RecordFails:
    """Terms whose record of the outcome raises (a bug after the request ran)."""

    kind = "tool"
    label = "call.id"

    def request(self, body: dict[str, Any]) -> tuple[object, bool] | None:
        return {"tool": "t"}, False

    def unknown(self, body: dict[str, Any], identifier: str) -> dict[str, Any]:
        return {"status": "unknown"}

    def record(self, outcome: dict[str, Any]) -> dict[str, Any] | None:
        raise RuntimeError("cannot record")

    def recorded(self, outcome: dict[str, Any]) -> dict[str, Any]:
        return outcome


async def test_a_request_that_fails_after_its_call_stops_renewing_its_claim() -> None:
    store = MemoryStore()
    ledgered = Ledgered(
        Started(), RecordFails(), Ledger(store, worker="w-1", lease=0.3)
    )

    with pytest.raises(RuntimeError):
        await ledgered.run({}, "c-1", MSG)
    left = store._entries[KEY].revision
    await asyncio.sleep(0.25)  # two renewals, were the claim still renewed

    assert store._entries[KEY].revision == left


class RaisesCancelled(Started):
    """A family whose call, once started, raises a CancelledError of its own (not a cancellation
    of the request: it awaited something cancelled)."""

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> dict[str, Any]:
        await side_effect_starts()
        cut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        cut.cancel()
        await cut
        return {"status": "success"}


class Terms(RecordFails):
    def record(self, outcome: dict[str, Any]) -> dict[str, Any] | None:
        return {"result": outcome}


async def test_a_cancellation_a_started_call_raises_itself_is_recorded_as_its_failure() -> (
    None
):
    ledgered = Ledgered(
        RaisesCancelled(), Terms(), Ledger(MemoryStore(), worker="w-1", wait=0.1)
    )

    with pytest.raises(asyncio.CancelledError):
        await ledgered.run({}, "c-1", MSG)
    # Refused INTERNAL by the handler, and so recorded: a retry gets the same answer at once,
    # not IN_PROGRESS for as long as the lease of a claim nobody renews.
    with pytest.raises(Internal):
        await ledgered.run({}, "c-1", MSG)
