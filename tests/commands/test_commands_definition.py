"""Every definition error is raised when compiling or binding, naming the command and the key."""

from collections.abc import Callable
from typing import Any

import pytest

from interaction_worker.commands import (
    CheckSpec,
    CommandCatalog,
    CommandDefinitionError,
    CommandSpec,
    FieldSpec,
    Interaction,
    compile_commands,
    define_command,
)


def never(value: dict[str, Any]) -> bool:
    return False


async def async_never(value: dict[str, Any]) -> bool:
    return False


def reply(**changes: Any) -> dict[str, Any]:
    declaration: dict[str, Any] = {
        "category": "presentation",
        "fields": {"text": {"required": True, "json_schema": {"type": "string"}}},
        "checks": [{"occur": never, "error": "never"}],
    }
    declaration.update(changes)
    return declaration


def text_field(**changes: Any) -> dict[str, Any]:
    return reply(fields={"text": {"required": True, **changes}})


def one_check(**check: Any) -> dict[str, Any]:
    return reply(checks=[check])


DEFINE_ERRORS = [
    pytest.param("type", {}, None, "commands", id="no-commands"),
    pytest.param(
        "type", [("reply", reply())], None, "commands", id="commands-not-a-mapping"
    ),
    pytest.param(
        "", {"reply": reply()}, None, "command_field", id="empty-command-field"
    ),
    pytest.param(
        "a b", {"reply": reply()}, None, "command_field", id="command-field-with-space"
    ),
    pytest.param(
        "t" * 65, {"reply": reply()}, None, "command_field", id="command-field-65"
    ),
    pytest.param(
        "typé", {"reply": reply()}, None, "command_field", id="command-field-non-ascii"
    ),
    pytest.param("type", {"bad id": reply()}, None, "commands", id="id-with-space"),
    pytest.param("type", {"": reply()}, None, "commands", id="empty-id"),
    pytest.param("type", {"r" * 65: reply()}, None, "commands", id="id-65"),
    pytest.param(
        "type",
        {"reply": "text"},
        "reply",
        "declaration",
        id="declaration-not-a-mapping",
    ),
    pytest.param(
        "type", {"reply": reply(colour="red")}, "reply", "colour", id="unknown-key"
    ),
    pytest.param(
        "type", {"reply": reply(category=None)}, "reply", "category", id="no-category"
    ),
    pytest.param(
        "type",
        {"reply": reply(category="display")},
        "reply",
        "category",
        id="bad-category",
    ),
    pytest.param(
        "type",
        {"reply": reply(description=3)},
        "reply",
        "description",
        id="description-not-text",
    ),
    pytest.param(
        "type",
        {"reply": reply(fields=["text"])},
        "reply",
        "fields",
        id="fields-not-a-mapping",
    ),
    pytest.param(
        "type",
        {"reply": reply(fields={"te xt": {}})},
        "reply",
        "fields",
        id="field-name-with-space",
    ),
    pytest.param(
        "type",
        {"reply": reply(fields={"f" * 65: {}})},
        "reply",
        "fields",
        id="field-name-65",
    ),
    pytest.param(
        "type",
        {"reply": reply(fields={"type": {}})},
        "reply",
        "fields.type",
        id="field-is-command-field",
    ),
    pytest.param(
        "type",
        {"reply": reply(fields={"text": True})},
        "reply",
        "fields.text",
        id="field-not-a-mapping",
    ),
    pytest.param(
        "type",
        {"reply": text_field(kind="string")},
        "reply",
        "fields.text.kind",
        id="unknown-field-key",
    ),
    pytest.param(
        "type",
        {"reply": text_field(required="yes")},
        "reply",
        "fields.text.required",
        id="required-not-bool",
    ),
    pytest.param(
        "type",
        {"reply": text_field(json_schema="string")},
        "reply",
        "fields.text.json_schema",
        id="schema-not-a-mapping",
    ),
    pytest.param(
        "type",
        {"reply": text_field(json_schema={"enum": {1, 2}})},
        "reply",
        "fields.text.json_schema",
        id="schema-not-json",
    ),
    pytest.param(
        "type",
        {"reply": text_field(json_schema={"maximum": float("inf")})},
        "reply",
        "fields.text.json_schema",
        id="schema-infinite",
    ),
    pytest.param(
        "type",
        {"reply": text_field(description=["a"])},
        "reply",
        "fields.text.description",
        id="field-description-not-text",
    ),
    pytest.param(
        "type",
        {"reply": reply(checks=never)},
        "reply",
        "checks",
        id="checks-not-a-list",
    ),
    pytest.param(
        "type",
        {"reply": reply(checks="never")},
        "reply",
        "checks",
        id="checks-a-string",
    ),
    pytest.param(
        "type",
        {"reply": reply(checks=[never])},
        "reply",
        "checks[0]",
        id="check-not-a-mapping",
    ),
    pytest.param(
        "type",
        {"reply": one_check(occur=never, error="e", message="m")},
        "reply",
        "checks[0].message",
        id="unknown-check-key",
    ),
    pytest.param(
        "type",
        {"reply": one_check(error="e")},
        "reply",
        "checks[0].occur",
        id="no-occur",
    ),
    pytest.param(
        "type",
        {"reply": one_check(occur=True, error="e")},
        "reply",
        "checks[0].occur",
        id="occur-not-callable",
    ),
    pytest.param(
        "type",
        {"reply": one_check(occur=never, error="e", when="always")},
        "reply",
        "checks[0].when",
        id="when-not-callable",
    ),
    pytest.param(
        "type",
        {"reply": one_check(occur=never)},
        "reply",
        "checks[0].error",
        id="no-error",
    ),
    pytest.param(
        "type",
        {"reply": one_check(occur=never, error="")},
        "reply",
        "checks[0].error",
        id="empty-error",
    ),
    pytest.param(
        "type",
        {"reply": one_check(occur=never, error="  ")},
        "reply",
        "checks[0].error",
        id="blank-error",
    ),
    pytest.param(
        "type",
        {"reply": one_check(occur=never, error=7)},
        "reply",
        "checks[0].error",
        id="error-not-text",
    ),
    pytest.param(
        "type",
        {"reply": one_check(occur=never, error="a\nb")},
        "reply",
        "checks[0].error",
        id="error-two-lines",
    ),
    pytest.param(
        "type",
        {"reply": one_check(occur=never, error="e" * 513)},
        "reply",
        "checks[0].error",
        id="error-513",
    ),
    pytest.param(
        "type",
        {"reply": one_check(occur=never, error="e", path="text")},
        "reply",
        "checks[0].path",
        id="path-not-a-pointer",
    ),
    pytest.param(
        "type",
        {"reply": one_check(occur=never, error="e", path=1)},
        "reply",
        "checks[0].path",
        id="path-not-text",
    ),
    pytest.param(
        "type",
        {"reply": reply(refine="upper")},
        "reply",
        "refine",
        id="refine-not-callable",
    ),
    # Called with the command and not awaited: an async one would be a coroutine, always true.
    pytest.param(
        "type",
        {"reply": one_check(occur=async_never, error="e")},
        "reply",
        "checks[0].occur",
        id="occur-async",
    ),
    pytest.param(
        "type",
        {"reply": one_check(occur=never, error="e", when=async_never)},
        "reply",
        "checks[0].when",
        id="when-async",
    ),
    pytest.param(
        "type",
        {"reply": reply(refine=async_never)},
        "reply",
        "refine",
        id="refine-async",
    ),
    pytest.param(
        "type",
        {"reply": one_check(occur=lambda: True, error="e")},
        "reply",
        "checks[0].occur",
        id="occur-of-no-parameter",
    ),
    pytest.param(
        "type",
        {"reply": one_check(occur=never, error="e", when=lambda a, b: True)},
        "reply",
        "checks[0].when",
        id="when-of-two-parameters",
    ),
    pytest.param(
        "type",
        {"reply": reply(refine=lambda *, value: value)},
        "reply",
        "refine",
        id="refine-keyword-only",
    ),
    pytest.param(
        "type",
        {"reply": reply(owned_fields="text")},
        "reply",
        "owned_fields",
        id="owned-a-string",
    ),
    pytest.param(
        "type",
        {"reply": reply(owned_fields=["tone"])},
        "reply",
        "owned_fields",
        id="owned-not-a-field",
    ),
    pytest.param(
        "type",
        {"reply": reply(owned_fields=["text", "text"])},
        "reply",
        "owned_fields",
        id="owned-twice",
    ),
    pytest.param(
        "type",
        {"reply": reply(additional_properties="no")},
        "reply",
        "additional_properties",
        id="additional-not-bool",
    ),
    pytest.param(
        "type",
        {"reply": reply(optional_presence="optional")},
        "reply",
        "optional_presence",
        id="bad-presence",
    ),
    pytest.param(
        "type",
        {"reply": reply(discriminator={"field": "kind", "value": "r"})},
        "reply",
        "discriminator",
        id="discriminator-in-protocol",
    ),
    pytest.param(
        "type",
        {"reply": reply(owned_fields=["text"]), "ask": reply(owned_fields=["text"])},
        "ask",
        "owned_fields",
        id="owned-by-two-commands",
    ),
    pytest.param(
        "type",
        {"reply": reply(owned_fields=["text"]), "ask": reply()},
        "ask",
        "fields.text",
        id="another-command-declares-an-owned-field",
    ),
]


@pytest.mark.parametrize(("command_field", "commands", "command", "key"), DEFINE_ERRORS)
def test_a_bad_declaration_is_refused_when_defined(
    command_field: str, commands: Any, command: str | None, key: str
) -> None:
    with pytest.raises(CommandDefinitionError) as raised:
        Interaction.define(command_field=command_field, commands=commands)
    assert (raised.value.command, raised.value.key) == (command, key)
    message = str(raised.value)
    assert key in message
    if command is not None:
        assert repr(command) in message
    assert "\n" not in message


SINGLE_ERRORS = [
    pytest.param(
        {"discriminator": {"field": "k ind", "value": "r"}},
        "discriminator.field",
        id="discriminator-field-bad",
    ),
    pytest.param(
        {"discriminator": {"field": "kind", "value": ""}},
        "discriminator.value",
        id="discriminator-value-empty",
    ),
    pytest.param(
        {"discriminator": {"field": "kind", "value": 1}},
        "discriminator.value",
        id="discriminator-value-number",
    ),
    pytest.param(
        {"discriminator": {"field": "kind"}},
        "discriminator.value",
        id="discriminator-without-value",
    ),
    pytest.param(
        {"discriminator": {"field": "kind", "value": "r", "x": 1}},
        "discriminator.x",
        id="discriminator-unknown-key",
    ),
    pytest.param(
        {"discriminator": "kind"}, "discriminator", id="discriminator-not-a-mapping"
    ),
    pytest.param(
        {"discriminator": {"field": "kind", "value": "r"}, "fields": {"kind": {}}},
        "fields.kind",
        id="field-is-discriminator-field",
    ),
    pytest.param({"category": "display"}, "category", id="bad-category"),
    pytest.param(
        {"checks": [{"occur": "x", "error": "e"}]},
        "checks[0].occur",
        id="occur-not-callable",
    ),
]


@pytest.mark.parametrize(("spec", "key"), SINGLE_ERRORS)
def test_a_bad_single_command_is_refused_by_define_command(
    spec: dict[str, Any], key: str
) -> None:
    with pytest.raises(CommandDefinitionError) as raised:
        define_command(spec, id="reply")
    assert (raised.value.command, raised.value.key) == ("reply", key)


def test_define_command_refuses_a_bad_id() -> None:
    with pytest.raises(CommandDefinitionError) as raised:
        define_command({}, id="no spaces")
    assert raised.value.key == "id"


def test_define_command_and_compile_commands_need_no_category() -> None:
    assert define_command({"fields": {}}).category is None
    assert compile_commands({"reply": {"fields": {}}})["reply"].category is None


@pytest.mark.parametrize(
    "commands", [{}, None, ["reply"]], ids=["empty", "none", "list"]
)
def test_compile_commands_refuses_no_commands(commands: Any) -> None:
    with pytest.raises(CommandDefinitionError) as raised:
        compile_commands(commands)
    assert raised.value.key == "commands"


def test_the_dataclass_form_is_checked_like_the_mapping_form() -> None:
    with pytest.raises(CommandDefinitionError) as raised:
        Interaction.define(
            command_field="type",
            commands={
                "reply": CommandSpec(
                    category="presentation",
                    fields={"text": FieldSpec(required="yes")},  # type: ignore[arg-type]
                )
            },
        )
    assert (raised.value.command, raised.value.key) == ("reply", "fields.text.required")
    with pytest.raises(CommandDefinitionError) as raised:
        Interaction.define(
            command_field="type",
            commands={
                "reply": CommandSpec(
                    category="presentation", checks=[CheckSpec(occur=never, error="")]
                )
            },
        )
    assert raised.value.key == "checks[0].error"


def _protocol() -> Any:
    return Interaction.define(
        command_field="type",
        commands={
            "reply": reply(),
            "unavailable": {"category": "receipt", "fields": {}},
        },
    )


def handle(value: dict[str, Any], context: Any) -> str:
    return "handled"


BIND_ERRORS: list[Any] = [
    pytest.param({"reply": handle}, "unavailable", id="a-command-without-a-handler"),
    pytest.param(
        {"reply": handle, "unavailable": handle, "delete": handle},
        "delete",
        id="a-handler-for-no-command",
    ),
    pytest.param(
        {"reply": handle, "unavailable": "handle"},
        "unavailable",
        id="a-handler-not-callable",
    ),
    pytest.param([("reply", handle)], None, id="handlers-not-a-mapping"),
]


@pytest.mark.parametrize(("handlers", "command"), BIND_ERRORS)
def test_binding_must_be_complete(handlers: Any, command: str | None) -> None:
    with pytest.raises(CommandDefinitionError) as raised:
        Interaction.bind(_protocol(), handlers)
    assert raised.value.command == command
    assert raised.value.key == "handlers"


def test_bind_takes_only_a_protocol() -> None:
    with pytest.raises(TypeError):
        Interaction.bind({"type": "reply"}, {})  # type: ignore[arg-type]


CATALOG_ERRORS: list[Callable[[], Any]] = [
    lambda: CommandCatalog(
        [("reply", define_command({})), ("reply", define_command({}))]
    ),
    lambda: CommandCatalog([("bad id", define_command({}))]),
    lambda: CommandCatalog([("reply", {"fields": {}})]),  # type: ignore[list-item]
]


@pytest.mark.parametrize(
    "build", CATALOG_ERRORS, ids=["twice", "bad-id", "not-compiled"]
)
def test_a_catalog_refuses_bad_entries(build: Callable[[], Any]) -> None:
    with pytest.raises(CommandDefinitionError):
        build()
