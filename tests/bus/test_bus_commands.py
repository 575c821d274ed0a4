"""The command protocol on the bus (docs/commands.md 5, wire.md 2) on a real nats-server, with both
bindings: the reply and the `P.command.done` event, the catalog, rejections with their `reason`,
`path` and dead letter, the sandbox's `command_ids`, a handler that fails or answers something that is
not JSON, and the id header's rules."""

import asyncio
import datetime
import json
import uuid
from typing import Any

import jsonschema
import pytest
from bus_harness import Serve, decode

from interaction_worker import InteractionWorker, Sandbox
from interaction_worker.client import (
    InteractionClient,
    InteractionRequestError,
)
from interaction_worker.commands import CommandDispatcher, Interaction
from interaction_worker.contracts import CommandCatalogReply, CommandReply, DeadLetter
from interaction_worker.nodes import CommandContext

pytest_plugins = ["bus_fixtures"]


class Handlers:
    """The handlers of `protocol()`, recording what they were given."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], Any]] = []

    def reply(self, value: dict[str, Any], context: Any) -> Any:
        self.calls.append(("reply", value, context))
        return "Explanation: " + value["text"]

    async def unavailable(self, value: dict[str, Any], context: Any) -> Any:
        self.calls.append(("unavailable", value, context))
        await asyncio.sleep(0)
        return {"shown": "The material is temporarily unavailable"}

    def fail(self, value: dict[str, Any], context: Any) -> Any:
        self.calls.append(("fail", value, context))
        raise RuntimeError("database password is hunter2")

    def odd(self, value: dict[str, Any], context: Any) -> Any:
        self.calls.append(("odd", value, context))
        cycle: list[Any] = []
        cycle.append(cycle)
        kinds: dict[str, Any] = {
            "cycle": cycle,
            "set": {1, 2},
            "date": datetime.date(2026, 12, 1),
            "nan": float("nan"),
            "tuple": (1, 2),
            "keys": {1: "one"},
        }
        return {"value": kinds[value["kind"]]}

    def big(self, value: dict[str, Any], context: Any) -> Any:
        self.calls.append(("big", value, context))
        return "x" * value["size"]


def dispatcher(handlers: Handlers) -> CommandDispatcher:
    protocol = Interaction.define(
        command_field="type",
        commands={
            "reply": {
                "category": "presentation",
                "description": "Show a confirmed explanation",
                "fields": {
                    "text": {"required": True, "json_schema": {"type": "string"}}
                },
                "checks": [
                    {
                        "occur": lambda v: not isinstance(v["text"], str),
                        "error": "text must be a string",
                        "path": "/text",
                    }
                ],
            },
            "unavailable": {
                "category": "receipt",
                "description": "The material is unavailable",
                "fields": {},
            },
            "fail": {"category": "action", "fields": {}},
            "odd": {
                "category": "query",
                "fields": {
                    "kind": {"required": True, "json_schema": {"type": "string"}}
                },
            },
            "big": {
                "category": "query",
                "fields": {
                    "size": {"required": True, "json_schema": {"type": "integer"}}
                },
            },
        },
    )
    return Interaction.bind(
        protocol,
        {
            "reply": handlers.reply,
            "unavailable": handlers.unavailable,
            "fail": handlers.fail,
            "odd": handlers.odd,
            "big": handlers.big,
        },
    )


def commanding(handlers: Handlers, sandbox: Sandbox | None = None) -> InteractionWorker:
    return InteractionWorker(commands=dispatcher(handlers), sandbox=sandbox)


def error_of(msg: Any) -> dict[str, Any]:
    assert msg.headers and "Nats-Service-Error" in msg.headers
    error: dict[str, Any] = decode(msg)["error"]
    return error


async def test_a_command_is_answered_and_published_as_done_keyed_by_its_id(
    serve: Serve,
) -> None:
    handlers = Handlers()
    served = await serve(commanding(handlers))
    bus, p = served.bus, served.prefix
    reply = await bus.request(
        "command",
        {"type": "reply", "text": "A plain object can implement an interface."},
        headers={"Interaction-Command-Id": "cmd 1", "traceparent": TRACEPARENT},
    )
    expected = {
        "id": "reply",
        "result": "Explanation: A plain object can implement an interface.",
    }
    assert decode(reply) == expected
    CommandReply.model_validate_json(reply.data)
    (done,) = await bus.wait_subject(f"{p}.command.done.reply.cmd=201")
    assert done.data == reply.data
    assert done.headers is not None
    assert done.headers["Nats-Msg-Id"] == f"{p}.command.done:cmd=201"
    assert done.headers["Interaction-Command-Id"] == "cmd 1"
    assert done.headers["Interaction-Key"] == "cmd=201"
    assert done.headers["traceparent"] == TRACEPARENT
    (call,) = handlers.calls
    context = call[2]
    assert isinstance(context, CommandContext)
    assert context.command_id == "cmd 1"
    assert context.subject == f"{p}.command"
    assert context.headers["traceparent"] == TRACEPARENT
    assert bus.dead_letters() == []


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def test_a_command_without_an_id_is_keyed_by_the_one_the_handler_was_given(
    serve: Serve,
) -> None:
    handlers = Handlers()
    served = await serve(commanding(handlers))
    bus, p = served.bus, served.prefix
    reply = await bus.request("command", {"type": "unavailable"})
    assert decode(reply) == {
        "id": "unavailable",
        "result": {"shown": "The material is temporarily unavailable"},
    }
    (done,) = await bus.wait(lambda m: m.subject.startswith(f"{p}.command.done."))
    given = handlers.calls[0][2].command_id
    assert str(uuid.UUID(given)) == given
    assert done.subject == f"{p}.command.done.unavailable.{given}"
    assert done.data == reply.data


async def test_the_catalog_lists_the_commands_and_their_model_schema(
    serve: Serve,
) -> None:
    served = await serve(commanding(Handlers()))
    reply = await served.bus.request("catalog", {})
    catalog = decode(reply)
    CommandCatalogReply.model_validate(catalog)
    assert catalog["commandField"] == "type"
    assert [entry["id"] for entry in catalog["commands"]] == [
        "reply",
        "unavailable",
        "fail",
        "odd",
        "big",
    ]
    assert catalog["commands"][0] == {
        "id": "reply",
        "category": "presentation",
        "description": "Show a confirmed explanation",
        # camelCase on the wire, as every wire key (the Python manifest keeps `json_schema`).
        "fields": {"text": {"required": True, "jsonSchema": {"type": "string"}}},
    }
    schema = catalog["modelJsonSchema"]
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"type": "reply", "text": "hi"})
    assert not validator.is_valid({"type": "reply"})
    assert not validator.is_valid({"type": "reply", "text": "hi", "extra": 1})
    # Anything but `{}` is refused, an empty body as everywhere.
    refused = await served.bus.request("catalog", {"name": "reply"})
    assert error_of(refused)["code"] == "INVALID_INPUT"
    empty = await served.bus.request("catalog", b"")
    assert error_of(empty)["code"] == "INVALID_JSON"
    letters = served.bus.dead_letters()
    assert [m.subject for m in letters] == [f"{served.prefix}.dead.command.="] * 2


@pytest.mark.parametrize(
    ("body", "reason", "path"),
    [
        ({"type": "reply", "text": "hi", "extra": 1}, "UNKNOWN_FIELD", "/extra"),
        ({"type": "reply"}, "MISSING_FIELD", "/text"),
        ({"type": "shout"}, "UNKNOWN_COMMAND", "/type"),
        ({"text": "hi"}, "MISSING_COMMAND", "/type"),
        ({"type": "reply", "text": 7}, "CHECK_FAILED", "/text"),
    ],
)
async def test_a_rejected_command_is_invalid_input_with_its_reason_path_and_dead_letter(
    serve: Serve, body: dict[str, Any], reason: str, path: str
) -> None:
    handlers = Handlers()
    served = await serve(commanding(handlers))
    bus, p = served.bus, served.prefix
    reply = await bus.request(
        "command", body, headers={"Interaction-Command-Id": "cmd-2"}
    )
    error = error_of(reply)
    assert error["code"] == "INVALID_INPUT"
    assert error["reason"] == reason
    assert error["path"] == path
    assert reply.headers is not None
    assert reply.headers["Nats-Service-Error-Code"] == "400"
    (letter,) = await bus.wait_subject(f"{p}.dead.command.cmd-2")
    document = decode(letter)
    DeadLetter.model_validate(document)
    assert document["commandId"] == "cmd-2"
    assert document["error"] == error
    assert json.loads(document["payload"]) == body
    assert handlers.calls == []
    assert bus.events() == []


async def test_input_that_is_not_a_command_object_is_refused_before_any_handler(
    serve: Serve,
) -> None:
    handlers = Handlers()
    served = await serve(commanding(handlers))
    bus = served.bus
    assert error_of(await bus.request("command", b"[1, 2]"))["code"] == "INVALID_JSON"
    assert error_of(await bus.request("command", b"{"))["code"] == "INVALID_JSON"
    too_long = await bus.request(
        "command",
        {"type": "unavailable"},
        headers={"Interaction-Command-Id": "x" * 257},
    )
    error = error_of(too_long)
    assert error["code"] == "INVALID_INPUT"
    assert "Interaction-Command-Id" in error["message"]
    letters = await bus.wait(bus.is_dead, 3)
    assert {m.subject for m in letters} == {f"{served.prefix}.dead.command.="}
    assert handlers.calls == []
    assert bus.events() == []


async def test_the_sandbox_grants_command_ids_and_a_denied_handler_never_runs(
    serve: Serve,
) -> None:
    handlers = Handlers()
    served = await serve(commanding(handlers, Sandbox(command_ids=["reply"])))
    bus, p = served.bus, served.prefix
    denied = await bus.request(
        "command", {"type": "unavailable"}, headers={"Interaction-Command-Id": "no"}
    )
    error = error_of(denied)
    assert error == {
        "code": "PERMISSION_DENIED",
        "message": "Permission denied: command_ids:unavailable",
    }
    await bus.wait_subject(f"{p}.dead.command.no")
    assert handlers.calls == []
    granted = await bus.request("command", {"type": "reply", "text": "ok"})
    assert decode(granted)["result"] == "Explanation: ok"
    catalog = decode(await bus.request("catalog", {}))
    assert [entry["id"] for entry in catalog["commands"]] == ["reply"]
    assert [s["title"] for s in catalog["modelJsonSchema"]["anyOf"]] == ["reply"]


async def test_a_handler_that_raises_is_internal_and_its_text_never_leaves(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    served = await serve(commanding(Handlers()))
    bus, p = served.bus, served.prefix
    reply = await bus.request(
        "command", {"type": "fail"}, headers={"Interaction-Command-Id": "f"}
    )
    assert error_of(reply) == {"code": "INTERNAL", "message": "Internal error"}
    (letter,) = await bus.wait_subject(f"{p}.dead.command.f")
    assert b"hunter2" not in letter.data
    assert b"hunter2" not in reply.data
    assert bus.events() == []


@pytest.mark.parametrize("kind", ["set", "date", "nan", "tuple", "keys", "cycle"])
async def test_a_result_that_is_not_json_is_invalid_result(
    serve: Serve, kind: str
) -> None:
    served = await serve(commanding(Handlers()))
    bus = served.bus
    reply = await bus.request("command", {"type": "odd", "kind": kind})
    error = error_of(reply)
    assert error["code"] == "INVALID_RESULT"
    assert error["message"] == (
        "The handler of command odd returned a value that is not JSON"
    )
    await bus.wait(bus.is_dead)
    assert bus.events() == []


async def test_a_result_larger_than_max_payload_is_refused_whole(
    serve: Serve, nats_client: Any
) -> None:
    served = await serve(commanding(Handlers()))
    bus = served.bus
    size = nats_client.max_payload
    reply = await bus.request("command", {"type": "big", "size": size})
    assert error_of(reply)["code"] == "RESULT_TOO_LARGE"
    fits = await bus.request("command", {"type": "big", "size": 1000})
    assert decode(fits)["result"] == "x" * 1000
    await bus.wait(lambda m: m.subject.startswith(f"{served.prefix}.command.done."))
    assert len(bus.events()) == 1


async def test_a_worker_without_a_dispatcher_does_not_serve_commands(
    serve: Serve,
) -> None:
    served = await serve(InteractionWorker())
    # The bus's own subscription on `P.>` keeps the server from answering "no responders": the
    # request goes unanswered instead.
    client = InteractionClient(served.bus.client, prefix=served.prefix, timeout=0.5)
    with pytest.raises(TimeoutError):
        await client.command({"type": "reply", "text": "hi"})
    with pytest.raises(TimeoutError):
        await client.command_catalog()
    assert decode(await served.bus.request("list", {})) == {"tools": []}


async def test_the_client_sends_commands_and_reads_rejections(serve: Serve) -> None:
    served = await serve(commanding(Handlers()))
    client = InteractionClient(served.bus.client, prefix=served.prefix, timeout=5)
    assert await client.command({"type": "reply", "text": "hi"}, command_id="c-1") == {
        "id": "reply",
        "result": "Explanation: hi",
    }
    await served.bus.wait_subject(f"{served.prefix}.command.done.reply.c-1")
    with pytest.raises(InteractionRequestError) as refused:
        await client.command({"type": "reply", "text": "hi", "extra": True})
    assert refused.value.code == "INVALID_INPUT"
    assert refused.value.reason == "UNKNOWN_FIELD"
    assert refused.value.path == "/extra"
    catalog = await client.command_catalog()
    assert catalog["commandField"] == "type"
