"""What a delivery's receipt tells the ledger: a delivery no sink could send is released (it may be
sent again), any other receipt is recorded. And what a recorded outcome must be to be answered
again: one a worker could have written for that id, else the id is refused."""

from typing import Any

import pytest

from interaction_worker import InteractionWorker, Sandbox, ToolContext
from interaction_worker.contracts import validation as check
from interaction_worker.errors import IdReused
from interaction_worker.ledger import Ledger, MemoryStore, Record, fingerprint
from interaction_worker.subscribers import Incoming, Subjects
from interaction_worker.subscribers.outgoing import Outgoing
from interaction_worker.subscribers.requests import Shutdown, families
from interaction_worker.subscribers.requests.ledgered import DeliveryTerms

UNAVAILABLE = {
    "code": "SINK_UNAVAILABLE",
    "message": "not connected",
    "retryable": True,
}
TIMEOUT = {"code": "SINK_TIMEOUT", "message": "no answer", "retryable": False}


def receipt(**fields: Any) -> Any:
    return check.output_receipt({"deliveryId": "d-1", **fields})


@pytest.mark.parametrize(
    ("answer", "released"),
    [
        (receipt(status="rejected", error=UNAVAILABLE), True),
        (receipt(status="rejected", error=TIMEOUT), False),
        (receipt(status="accepted"), False),
        (
            receipt(
                status="rejected",
                error={"code": "SINKS_REJECTED", "message": "a, b", "retryable": True},
                metadata={
                    "sinks": {
                        "a": {"status": "rejected", "error": UNAVAILABLE},
                        "b": {"status": "rejected", "error": UNAVAILABLE},
                    }
                },
            ),
            True,
        ),
        (
            receipt(
                status="unknown",
                error={"code": "SINKS_INCOMPLETE", "message": "a", "retryable": False},
                metadata={
                    "sinks": {
                        "a": {"status": "rejected", "error": UNAVAILABLE},
                        "b": {"status": "accepted"},
                    }
                },
            ),
            False,
        ),
        (
            receipt(
                status="rejected",
                error={"code": "SINKS_REJECTED", "message": "a, b", "retryable": False},
                metadata={
                    "sinks": {
                        "a": {"status": "rejected", "error": UNAVAILABLE},
                        "b": {
                            "status": "rejected",
                            "error": {"code": "POLICY", "message": "no"},
                        },
                    }
                },
            ),
            False,
        ),
    ],
    ids=[
        "lone-unreachable",
        "lone-timeout",
        "accepted",
        "fanout-none-sent",
        "fanout-one-sent",
        "fanout-one-refused",
    ],
)
def test_a_delivery_is_released_only_when_every_sink_certainly_sent_nothing(
    answer: Any, released: bool
) -> None:
    terms = DeliveryTerms(Outgoing(Subjects()))

    recorded = terms.record(answer)

    assert (recorded is None) is released
    if not released:
        assert recorded == {"receipt": answer.to_wire()}


class Echo:
    name = "echo"
    input_schema = {"type": "object"}

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        raise AssertionError("a recorded call is never run again")


@pytest.mark.parametrize(
    "outcome",
    [
        {
            "result": {
                "callId": "c-2",
                "source": "echo",
                "status": "success",
                "content": "x",
            }
        },
        {"result": {"callId": "c-1", "source": "echo", "status": "bogus"}},
        {"error": {"message": "a refusal without a code"}},
        {"receipt": {"deliveryId": "c-1", "status": "accepted"}},
    ],
    ids=["another-ids-result", "not-a-result", "not-a-refusal", "a-receipt"],
)
async def test_a_recorded_outcome_no_worker_wrote_for_the_id_refuses_it(
    outcome: dict[str, Any],
) -> None:
    store = MemoryStore()
    what = {"tool": "echo", "arguments": {}}
    planted = Record(
        state="done", fingerprint=fingerprint(what), worker="w", at=0.0, outcome=outcome
    )
    await store.create("tool.c-1", planted.encode())
    ledger = Ledger(store, worker="w-1")
    worker = InteractionWorker(tools=[Echo()], sandbox=Sandbox(tools=["echo"]))
    tool = families(worker, Outgoing(Subjects()), Shutdown(), ledger=ledger)["tool"]
    body = {"call": {"id": "c-1", "name": "echo", "arguments": {}}}

    with pytest.raises(IdReused) as refused:
        await tool.run(body, "c-1", Incoming("interaction.tool.call", b"", None, None))

    assert refused.value.message == (
        "call.id cannot be used: its ledger entry is not a ledger record"
    )
    assert ledger.invalid_entries == 1
