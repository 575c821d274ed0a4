"""What a delivery's receipt tells the ledger: a delivery no sink could send is released (it may be
sent again), any other receipt is recorded."""

from typing import Any

import pytest

from interaction_worker.contracts import validation as check
from interaction_worker.subscribers import Subjects
from interaction_worker.subscribers.outgoing import Outgoing
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
