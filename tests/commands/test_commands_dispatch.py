"""Binding handlers and dispatching to them (docs/commands.md section 4)."""

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from interaction_worker.commands import (
    CommandDefinitionError,
    CommandDispatcher,
    CommandProtocol,
    CommandRejected,
    Interaction,
)


def protocol() -> CommandProtocol:
    return Interaction.define(
        command_field="type",
        commands={
            "reply": {
                "category": "presentation",
                "fields": {
                    "text": {"required": True, "json_schema": {"type": "string"}}
                },
                "checks": [
                    {
                        "occur": lambda v: not isinstance(v["text"], str),
                        "error": "text must be a string",
                    }
                ],
                "additional_properties": True,
            },
            "unavailable": {"category": "receipt", "fields": {}},
        },
    )


def seed_dispatcher(calls: list[tuple[str, Any, Any]]) -> CommandDispatcher:
    def reply(value: dict[str, Any], context: Any) -> str:
        calls.append(("reply", value, context))
        return "Explanation: " + str(value["text"])

    async def unavailable(value: dict[str, Any], context: Any) -> str:
        calls.append(("unavailable", value, context))
        await anyio.lowlevel.checkpoint()
        return "The material is temporarily unavailable"

    return Interaction.bind(protocol(), {"reply": reply, "unavailable": unavailable})


async def test_a_sync_handler_gets_the_result_and_the_context() -> None:
    calls: list[tuple[str, Any, Any]] = []
    context = object()
    outcome = await seed_dispatcher(calls).dispatch(
        {"type": "reply", "text": "t"}, context
    )
    assert outcome == {"id": "reply", "result": "Explanation: t"}
    assert calls == [("reply", {"type": "reply", "text": "t"}, context)]


async def test_an_async_handler_is_awaited() -> None:
    calls: list[tuple[str, Any, Any]] = []
    outcome = await seed_dispatcher(calls).dispatch({"type": "unavailable"})
    assert outcome == {
        "id": "unavailable",
        "result": "The material is temporarily unavailable",
    }
    assert calls == [("unavailable", {"type": "unavailable"}, None)]


async def test_only_the_validated_id_chooses_the_handler() -> None:
    calls: list[tuple[str, Any, Any]] = []
    dispatcher = seed_dispatcher(calls)
    value = {
        "type": "reply",
        "text": "t",
        "handler": "unavailable",
        "id": "unavailable",
        "unavailable": True,
    }
    outcome = await dispatcher.dispatch(value)
    assert outcome["id"] == "reply"
    assert [name for name, _, _ in calls] == ["reply"]


async def test_a_rejected_command_runs_no_handler() -> None:
    calls: list[tuple[str, Any, Any]] = []
    dispatcher = seed_dispatcher(calls)
    for value in [{"type": "reply", "text": 1}, {"type": "delete"}, ["reply"]]:
        with pytest.raises(CommandRejected):
            await dispatcher.dispatch(value)
    assert calls == []


async def test_receive_and_run_are_separate_steps() -> None:
    calls: list[tuple[str, Any, Any]] = []
    dispatcher = seed_dispatcher(calls)
    received = dispatcher.receive({"type": "reply", "text": "t"})
    assert received == dispatcher.protocol.receive({"type": "reply", "text": "t"})
    assert calls == []
    assert await dispatcher.run(received, "ctx") == {
        "id": "reply",
        "result": "Explanation: t",
    }
    assert calls == [("reply", {"type": "reply", "text": "t"}, "ctx")]


@pytest.mark.parametrize(
    "received",
    [{"id": "delete", "result": {}}, {"result": {}}, {"id": 1, "result": {}}],
)
async def test_run_takes_only_what_receive_returned(received: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="run takes what receive returned"):
        await seed_dispatcher([]).run(received)


async def test_handler_exceptions_propagate_unchanged() -> None:
    failure = RuntimeError("handler failed")

    def reply(value: dict[str, Any], context: Any) -> str:
        raise failure

    async def unavailable(value: dict[str, Any], context: Any) -> str:
        raise CommandRejected("from a handler", "/x", code="UNKNOWN_FIELD")

    dispatcher = Interaction.bind(
        protocol(), {"reply": reply, "unavailable": unavailable}
    )
    with pytest.raises(RuntimeError) as raised:
        await dispatcher.dispatch({"type": "reply", "text": "t"})
    assert raised.value is failure
    with pytest.raises(CommandRejected) as rejected:
        await dispatcher.dispatch({"type": "unavailable"})
    assert (rejected.value.code, rejected.value.path) == ("UNKNOWN_FIELD", "/x")


def test_the_dispatcher_catalog_is_the_manifest() -> None:
    dispatcher = seed_dispatcher([])
    assert dispatcher.catalog == dispatcher.protocol.manifest()
    assert [entry["id"] for entry in dispatcher.catalog] == ["reply", "unavailable"]


async def test_binding_copies_the_handlers() -> None:
    handlers: dict[str, Any] = {
        "reply": lambda v, c: "reply",
        "unavailable": lambda v, c: "unavailable",
    }
    dispatcher = Interaction.bind(protocol(), handlers)
    handlers["reply"] = lambda v, c: "replaced"
    assert (await dispatcher.dispatch({"type": "reply", "text": "t"}))[
        "result"
    ] == "reply"


# --- handlers of zero, one or two parameters (docs/commands.md 4) -----------------------------


async def three_parameters(value: Any, context: Any, extra: Any) -> str:
    return "never"


def keyword_only(value: Any, *, must: Any) -> str:
    return "never"


async def no_parameter_async() -> str:
    return "awaited"


def value_with_default_context(value: Any, context: Any = "default") -> Any:
    return [value["type"], context]


def any_positional(*given: Any) -> int:
    return len(given)


@pytest.mark.parametrize(
    ("handler", "result"),
    [
        pytest.param(lambda: "none", "none", id="zero"),
        pytest.param(lambda value: value["type"], "unavailable", id="one"),
        pytest.param(lambda value, context: context, "ctx", id="two"),
        pytest.param(no_parameter_async, "awaited", id="zero-async"),
        pytest.param(value_with_default_context, ["unavailable", "ctx"], id="default"),
        pytest.param(any_positional, 2, id="varargs"),
    ],
)
async def test_a_handler_is_called_with_the_parameters_it_takes(
    handler: Any, result: Any
) -> None:
    dispatcher = Interaction.bind(
        protocol(), {"reply": lambda: "reply", "unavailable": handler}
    )
    outcome = await dispatcher.dispatch({"type": "unavailable"}, "ctx")
    assert outcome == {"id": "unavailable", "result": result}


@pytest.mark.parametrize(
    "handler",
    [
        pytest.param(three_parameters, id="three-required"),
        pytest.param(keyword_only, id="a-required-keyword"),
        pytest.param(lambda a, b, c=1, *, d: None, id="a-required-keyword-after"),
    ],
)
def test_a_handler_that_cannot_be_called_so_is_refused_at_bind(handler: Any) -> None:
    with pytest.raises(CommandDefinitionError) as raised:
        Interaction.bind(protocol(), {"reply": lambda: "r", "unavailable": handler})
    assert raised.value.command == "unavailable"
    assert raised.value.key == "handlers"
    assert "zero, one or two parameters" in str(raised.value)
