"""Text a tool or a sink supplies reaches neither an error reply nor a dead letter when it carries a
credential (docs/wire.md 4): the message is replaced by its code's fixed message."""

import json
from typing import Any

from bus_harness import Serve, decode

from interaction_worker import InteractionWorker, Sandbox, ToolContext

pytest_plugins = ["bus_fixtures"]

LEAKS = (
    "db password=hunter2 rejected",
    "token ghp_" + "a1" * 18 + " is not allowed",
    "key AKIAIOSFODNN7EXAMPLE has no access",
    "cannot read ~/.ssh/id_rsa",
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    'config {"api_key": "abc123"} refused',
)


class Leaky:
    """Its validate rejects with the text of argument `leak`; its execute fails with it."""

    name = "leaky"
    input_schema = {"type": "object"}

    def validate(self, arguments: dict[str, Any]) -> None:
        if arguments.get("in") == "validate":
            raise ValueError(LEAKS[arguments["leak"]])

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        message = LEAKS[arguments["leak"]]
        return {"status": "failed", "error": {"code": "E", "message": message}}


class LeakySink:
    async def deliver(self, request: Any, context: Any) -> Any:
        leak = LEAKS[int(request.delivery_id.rsplit("-", 1)[1])]
        return {
            "deliveryId": request.delivery_id,
            "status": "rejected",
            "error": {"code": "E", "message": leak},
        }


async def test_a_credential_in_a_tools_or_sinks_text_never_reaches_a_reply_or_dead_letter(
    serve: Serve,
) -> None:
    worker = InteractionWorker(
        tools=[Leaky()], output=LeakySink(), sandbox=Sandbox(tools=["leaky"])
    )
    served = await serve(worker)
    bus = served.bus
    replies = []
    for number in range(len(LEAKS)):
        for where in ("validate", "execute"):
            arguments = {"leak": number, "in": where}
            call = {"id": f"{where}-{number}", "name": "leaky", "arguments": arguments}
            replies.append(await bus.request("tool", {"call": call}))
        delivery = {
            "deliveryId": f"d-{number}",
            "message": {"role": "assistant", "content": "hi"},
        }
        replies.append(await bus.request("output", delivery))
    await bus.settle("tool")
    await bus.settle("output")

    errors = [decode(reply)["error"] for reply in replies]
    assert {(e["code"], e["message"]) for e in errors} == {
        ("INVALID_INPUT", "Invalid input"),  # validate's text
        ("INVALID_RESULT", "Unsafe interaction error message"),  # a result's error
    }
    assert [(reply.headers or {}).get("Nats-Service-Error") for reply in replies] == [
        e["message"] for e in errors
    ]
    letters = [decode(letter) for letter in bus.dead_letters()]
    assert len(letters) == len(replies)
    published = json.dumps([errors, [letter["error"] for letter in letters]])
    for leak in LEAKS:
        for fragment in ("hunter2", "ghp_", "AKIA", "id_rsa", "PRIVATE KEY", "abc123"):
            assert fragment not in published, leak
    assert bus.events() == []
