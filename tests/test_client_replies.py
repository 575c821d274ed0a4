"""Which reply a client takes as its request's answer (docs/wire.md 7): one that carries the request's
id and source; for a request whose answer carries no id, whatever comes on its own inbox."""

from typing import Any

import pytest

from interaction_worker.client.replies import matcher, matcher_of_bytes

CALL = {"call": {"id": "c-1", "name": "echo", "arguments": {}}}
INVOKE = {
    "operation": "invoke",
    "server": "docs",
    "call": {"id": "m-1", "name": "search", "arguments": {}},
}
RESULT = {"callId": "o-1", "source": "s", "status": "success"}
DELIVERY = {"deliveryId": "d-1", "message": {"role": "assistant", "content": "hi"}}
COMMAND = {"type": "reply", "text": "hello"}


@pytest.mark.parametrize(
    ("subject", "body", "reply", "taken"),
    [
        ("tool.call", CALL, {"callId": "c-1", "source": "echo"}, True),
        ("tool.call", CALL, {"callId": "c-2", "source": "echo"}, False),
        ("tool.call", CALL, {"callId": "c-1", "source": "other"}, False),
        ("tool.call", CALL, ["c-1"], False),
        ("tool.call", {"call": {"id": 5, "name": "echo"}}, {"callId": 5}, False),
        ("tool.call", {"call": "c-1"}, {"callId": "c-1"}, False),
        (
            "mcp.call",
            INVOKE,
            {
                "operation": "invoke",
                "result": {"callId": "m-1", "source": "docs:search"},
            },
            True,
        ),
        (
            "mcp.call",
            INVOKE,
            {
                "operation": "invoke",
                "result": {"callId": "m-1", "source": "evil:search"},
            },
            False,
        ),
        ("mcp.call", INVOKE, {"callId": "m-1", "source": "docs:search"}, False),
        ("mcp.call", {"operation": "discover"}, {"capabilities": []}, True),
        ("observe", {"result": RESULT}, {"callId": "o-1", "source": "s"}, True),
        ("observe", {"result": RESULT}, {"callId": "o-2", "source": "s"}, False),
        ("output.deliver", DELIVERY, {"deliveryId": "d-1", "status": "accepted"}, True),
        (
            "output.deliver",
            DELIVERY,
            {"deliveryId": "d-2", "status": "accepted"},
            False,
        ),
        ("command", COMMAND, {"id": "reply", "result": 1}, True),
        ("command", COMMAND, {"id": "unavailable", "result": 1}, False),
        ("tool.list", {}, {"tools": []}, True),
        ("command.catalog", {}, {"commands": []}, True),
        ("tool.call", "not an object", {"callId": "c-1"}, False),
    ],
)
def test_a_reply_is_taken_only_when_it_carries_the_requests_id(
    subject: str, body: Any, reply: Any, taken: bool
) -> None:
    expected = matcher(subject, body)

    assert (expected is None or expected(reply)) is taken


def test_a_request_sent_as_bytes_is_matched_as_its_json_and_unreadable_bytes_take_nothing() -> (
    None
):
    expected = matcher_of_bytes("tool.call", b'{"call": {"id": "c-1", "name": "echo"}}')
    unreadable = matcher_of_bytes("tool.call", b"\xff{not json")

    assert expected is not None and expected({"callId": "c-1", "source": "echo"})
    assert unreadable is not None and not unreadable({"callId": "c-1"})
