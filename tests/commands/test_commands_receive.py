"""Receiving commands: every rejection code, in the order of docs/commands.md section 2."""

import copy
import pickle
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import pytest

from interaction_worker.commands import (
    REJECTION_CODES,
    CheckSpec,
    CommandDefinitionError,
    CommandProtocol,
    CommandRejected,
    CommandSpec,
    FieldSpec,
    Interaction,
    compile_commands,
    define_command,
)

SEED_REPLY: dict[str, Any] = {
    "category": "presentation",
    "description": "Show a confirmed explanation",
    "fields": {"text": {"required": True, "json_schema": {"type": "string"}}},
    "checks": [
        {
            "occur": lambda v: not isinstance(v["text"], str),
            "error": "text must be a string",
        }
    ],
}


def seed_protocol() -> CommandProtocol:
    return Interaction.define(
        command_field="type",
        commands={
            "reply": SEED_REPLY,
            "unavailable": {
                "category": "receipt",
                "description": "The material is unavailable",
                "fields": {},
            },
            "ask": {
                "category": "input",
                "fields": {"question": {"required": True}, "choices": {}},
                "owned_fields": ["choices"],
                "additional_properties": True,
                "checks": [
                    {
                        "occur": lambda v: v["question"] == "?",
                        "error": "ask a real question",
                        "path": "/question",
                    }
                ],
            },
        },
    )


def rejection(protocol: CommandProtocol, value: object) -> CommandRejected:
    with pytest.raises(CommandRejected) as raised:
        protocol.receive(value)
    return raised.value


def test_the_seed_command_is_received() -> None:
    received = seed_protocol().receive(
        {"type": "reply", "text": "A plain object can implement an interface."}
    )
    assert received == {
        "id": "reply",
        "result": {
            "type": "reply",
            "text": "A plain object can implement an interface.",
        },
    }
    assert seed_protocol().parse({"type": "unavailable"}) == {"type": "unavailable"}


def test_protocol_lists_its_ids_in_declaration_order() -> None:
    protocol = seed_protocol()
    assert protocol.ids == ("reply", "unavailable", "ask")
    assert protocol.command_field == "type"


NAN = float("nan")

# Each value fails at the step of its code and, where it can, also at a later step: the earlier wins.
ORDER = [
    pytest.param([], "INVALID_COMMAND", "", id="array"),
    pytest.param(
        {"type": "reply", "extra": NAN},
        "INVALID_COMMAND",
        "/extra",
        id="nan-beats-missing-and-unknown",
    ),
    pytest.param(
        {"text": 1, "extra": 1},
        "MISSING_COMMAND",
        "/type",
        id="missing-command-beats-fields",
    ),
    pytest.param(
        {"type": "nope", "extra": 1},
        "UNKNOWN_COMMAND",
        "/type",
        id="unknown-command-beats-fields",
    ),
    pytest.param({"type": 1}, "UNKNOWN_COMMAND", "/type", id="command-id-a-number"),
    pytest.param({"type": None}, "UNKNOWN_COMMAND", "/type", id="command-id-null"),
    pytest.param(
        {"type": "Reply"}, "UNKNOWN_COMMAND", "/type", id="command-id-case-matters"
    ),
    pytest.param(
        {"type": "reply", "extra": 1},
        "MISSING_FIELD",
        "/text",
        id="missing-field-beats-unknown",
    ),
    pytest.param(
        {"type": "reply", "text": 1, "extra": 1},
        "UNKNOWN_FIELD",
        "/extra",
        id="unknown-beats-check",
    ),
    pytest.param(
        {"type": "reply", "text": "t", "a/b~": 1},
        "UNKNOWN_FIELD",
        "/a~1b~0",
        id="unknown-field-pointer",
    ),
    pytest.param(
        {"type": "reply", "text": "t", "choices": []},
        "UNKNOWN_FIELD",
        "/choices",
        id="foreign-but-not-additional",
    ),
    pytest.param(
        {"type": "ask", "question": "?", "text": 1},
        "CHECK_FAILED",
        "/question",
        id="not-owned-is-additional",
    ),
    pytest.param(
        {"type": "unavailable", "choices": []},
        "UNKNOWN_FIELD",
        "/choices",
        id="owned-elsewhere",
    ),
    pytest.param({"type": "reply", "text": 1}, "CHECK_FAILED", "", id="check"),
]


@pytest.mark.parametrize(("value", "code", "path"), ORDER)
def test_each_step_rejects_with_its_code_and_path(
    value: object, code: str, path: str
) -> None:
    rejected = rejection(seed_protocol(), value)
    assert (rejected.code, rejected.path) == (code, path)
    assert code in REJECTION_CODES


def test_a_field_owned_by_another_command_is_foreign_under_additional_properties() -> (
    None
):
    protocol = Interaction.define(
        command_field="type",
        commands={
            "reply": {
                "category": "presentation",
                "fields": {"text": {}},
                "owned_fields": ["text"],
            },
            "ask": {
                "category": "input",
                "fields": {"question": {}},
                "additional_properties": True,
                "checks": [{"occur": lambda v: True, "error": "always"}],
            },
        },
    )
    rejected = rejection(
        protocol, {"type": "ask", "question": "q", "text": "t", "extra": 1}
    )
    assert (rejected.code, rejected.path) == ("FOREIGN_FIELD", "/text")
    assert '"reply"' in rejected.message
    assert rejection(protocol, {"type": "ask", "extra": 1}).code == "CHECK_FAILED"


NOT_JSON = [
    pytest.param("reply", "", id="string"),
    pytest.param(None, "", id="null"),
    pytest.param(3, "", id="number"),
    pytest.param(("type", "reply"), "", id="tuple"),
    pytest.param(OrderedDict(type="reply", text="t"), "", id="dict-subclass"),
    pytest.param(MappingProxyType({"type": "reply", "text": "t"}), "", id="mapping"),
    pytest.param({"type": "reply", "text": float("inf")}, "/text", id="infinity"),
    pytest.param({"type": "reply", "text": ("t",)}, "/text", id="nested-tuple"),
    pytest.param({"type": "reply", "text": {1: "t"}}, "/text", id="non-string-key"),
    pytest.param({"type": "reply", "text": b"t"}, "/text", id="bytes"),
    pytest.param(
        {"type": "reply", "text": {"a": [0, {"b": NAN}]}}, "/text/a/1/b", id="deep-nan"
    ),
    pytest.param({"type": "reply", "text": "\ud800"}, "/text", id="lone-surrogate"),
    pytest.param(
        {"type": "reply", "text": {"\udc00": 1}}, "/text", id="lone-surrogate-key"
    ),
    pytest.param({"type": "reply", "text": object()}, "/text", id="object"),
]


@pytest.mark.parametrize(("value", "path"), NOT_JSON)
def test_a_value_that_is_not_a_json_object_is_invalid(value: object, path: str) -> None:
    rejected = rejection(seed_protocol(), value)
    assert (rejected.code, rejected.path) == ("INVALID_COMMAND", path)


def nested(depth: int) -> Any:
    value: Any = "t"
    for _ in range(depth):
        value = [value]
    return value


def test_nesting_stops_at_one_hundred_levels() -> None:
    protocol = Interaction.define(
        command_field="type",
        commands={"reply": {"category": "presentation", "fields": {"text": {}}}},
    )
    assert protocol.parse({"type": "reply", "text": nested(99)})["text"] == nested(99)
    assert (
        rejection(protocol, {"type": "reply", "text": nested(100)}).code
        == "INVALID_COMMAND"
    )
    looped: dict[str, Any] = {"type": "reply"}
    looped["text"] = looped
    assert rejection(protocol, looped).code == "INVALID_COMMAND"


def test_messages_never_echo_more_than_64_characters_of_a_value() -> None:
    protocol = seed_protocol()
    long_id = rejection(protocol, {"type": "x" * 1000})
    assert "x" * 64 in long_id.message
    assert "x" * 65 not in long_id.message
    long_key = rejection(protocol, {"type": "reply", "text": "t", "k" * 1000: 1})
    assert "k" * 65 not in long_key.message
    assert long_key.path == "/" + "k" * 1000


def test_messages_are_one_line_and_name_no_secret() -> None:
    protocol = seed_protocol()
    rejected = rejection(
        protocol, {"type": "reply", "text": "t", "line\nbreak\u2028": "s3cr3t"}
    )
    assert rejected.message.splitlines() == [rejected.message]
    assert "s3cr3t" not in rejected.message
    rejected = rejection(protocol, {"type": "reply\r\nX-Injected: 1"})
    assert rejected.message.splitlines() == [rejected.message]
    missing = rejection(protocol, {"type": "reply", "extra": "s3cr3t"})
    assert "s3cr3t" not in missing.message
    assert "text" in missing.message


def test_a_rejection_message_is_cut_to_512_characters_on_one_line() -> None:
    def refine(value: dict[str, Any]) -> dict[str, Any]:
        raise CommandRejected("first line\n" + "x" * 2000)

    command = define_command({"refine": refine})
    with pytest.raises(CommandRejected) as raised:
        command.parse({})
    assert len(raised.value.message) == 512
    assert "\n" not in raised.value.message
    assert str(raised.value) == raised.value.message


def test_the_input_is_never_mutated_and_the_result_shares_nothing_with_it() -> None:
    def refine(value: dict[str, Any]) -> dict[str, Any]:
        value["tags"].append("refined")
        return value

    def mutate(value: dict[str, Any]) -> bool:
        value["tags"].append("checked")
        return False

    protocol = Interaction.define(
        command_field="type",
        commands={
            "note": {
                "category": "presentation",
                "fields": {"tags": {"required": True}, "tone": {}},
                "optional_presence": "nullable",
                "checks": [{"occur": mutate, "error": "never"}],
                "refine": refine,
            }
        },
    )
    value = {"type": "note", "tags": ["a", {"b": [1]}], "tone": None}
    before = copy.deepcopy(value)
    result = protocol.parse(value)
    assert value == before
    assert result == {"type": "note", "tags": ["a", {"b": [1]}, "checked", "refined"]}
    result["tags"][1]["b"].append(2)
    assert value == before


def nullable_protocol(presence: str) -> CommandProtocol:
    return Interaction.define(
        command_field="type",
        commands={
            "note": {
                "category": "presentation",
                "fields": {"text": {"required": True}, "tone": {}},
                "optional_presence": presence,
                "checks": [
                    {
                        "occur": lambda v: "tone" in v and v["tone"] is None,
                        "error": "tone is null",
                    }
                ],
            }
        },
    )


def test_under_nullable_null_is_absent() -> None:
    protocol = nullable_protocol("nullable")
    assert protocol.parse({"type": "note", "text": "t", "tone": None}) == {
        "type": "note",
        "text": "t",
    }
    assert protocol.parse({"type": "note", "text": "t"}) == {
        "type": "note",
        "text": "t",
    }
    assert protocol.parse({"type": "note", "text": "t", "tone": "dry"})["tone"] == "dry"
    missing = rejection(protocol, {"type": "note", "text": None, "tone": None})
    assert (missing.code, missing.path) == ("MISSING_FIELD", "/text")


def test_under_own_null_is_a_present_value() -> None:
    protocol = nullable_protocol("own")
    assert protocol.parse({"type": "note", "text": None}) == {
        "type": "note",
        "text": None,
    }
    assert (
        rejection(protocol, {"type": "note", "text": "t", "tone": None}).message
        == "tone is null"
    )


def checked(*checks: dict[str, Any], refine: Any = None) -> CommandProtocol:
    return Interaction.define(
        command_field="type",
        commands={
            "reply": {
                "category": "presentation",
                "fields": {"text": {}},
                "checks": list(checks),
                "refine": refine,
            }
        },
    )


def test_checks_run_in_order_and_the_first_that_occurs_wins() -> None:
    seen: list[str] = []

    def occurs(name: str, result: bool) -> Any:
        def occur(value: dict[str, Any]) -> bool:
            seen.append(name)
            return result

        return occur

    protocol = checked(
        {"occur": occurs("first", False), "error": "first"},
        {"occur": occurs("second", True), "error": "second", "path": "/text"},
        {"occur": occurs("third", True), "error": "third"},
    )
    rejected = rejection(protocol, {"type": "reply"})
    assert (rejected.code, rejected.message, rejected.path) == (
        "CHECK_FAILED",
        "second",
        "/text",
    )
    assert seen == ["first", "second"]


def test_when_decides_whether_a_check_runs() -> None:
    occurred: list[object] = []

    def occur(value: dict[str, Any]) -> bool:
        occurred.append(value.get("text"))
        return True

    protocol = checked(
        {
            "occur": occur,
            "error": "long text",
            "when": lambda v: len(v.get("text", "")) > 3,
        }
    )
    assert protocol.parse({"type": "reply", "text": "abc"}) == {
        "type": "reply",
        "text": "abc",
    }
    assert occurred == []
    assert rejection(protocol, {"type": "reply", "text": "abcd"}).message == "long text"
    assert occurred == ["abcd"]


def test_a_truthy_occur_result_rejects() -> None:
    assert (
        rejection(
            checked({"occur": lambda v: "yes", "error": "truthy"}), {"type": "reply"}
        ).message
        == "truthy"
    )
    assert checked({"occur": lambda v: [], "error": "falsy"}).parse(
        {"type": "reply"}
    ) == {"type": "reply"}


def test_an_exception_from_a_check_is_a_bug_and_propagates() -> None:
    boom = ZeroDivisionError("bug in the check")

    def occur(value: dict[str, Any]) -> bool:
        raise boom

    with pytest.raises(ZeroDivisionError) as raised:
        checked({"occur": occur, "error": "e"}).receive({"type": "reply"})
    assert raised.value is boom
    with pytest.raises(KeyError):
        checked(
            {"occur": lambda v: v["text"], "error": "e", "when": lambda v: v["missing"]}
        ).receive({"type": "reply"})


def test_command_rejected_from_a_check_or_refine_is_check_failed() -> None:
    def occur(value: dict[str, Any]) -> bool:
        raise CommandRejected("from occur", "/text", code="UNKNOWN_FIELD")

    rejected = rejection(checked({"occur": occur, "error": "e"}), {"type": "reply"})
    assert (rejected.code, rejected.message, rejected.path) == (
        "CHECK_FAILED",
        "from occur",
        "/text",
    )

    def refine(value: dict[str, Any]) -> dict[str, Any]:
        raise CommandRejected("from refine")

    rejected = rejection(checked(refine=refine), {"type": "reply"})
    assert (rejected.code, rejected.message, rejected.path) == (
        "CHECK_FAILED",
        "from refine",
        "",
    )


def test_refine_runs_after_the_checks_and_its_mapping_is_the_result() -> None:
    calls: list[dict[str, Any]] = []

    def refine(value: dict[str, Any]) -> MappingProxyType[str, Any]:
        calls.append(dict(value))
        return MappingProxyType({"type": "reply", "text": value["text"].strip()})

    protocol = checked(
        {"occur": lambda v: v["text"] == "", "error": "empty"}, refine=refine
    )
    result = protocol.parse({"type": "reply", "text": "  t  "})
    assert result == {"type": "reply", "text": "t"}
    assert type(result) is dict
    assert rejection(protocol, {"type": "reply", "text": ""}).message == "empty"
    assert calls == [{"type": "reply", "text": "  t  "}]


def test_refine_returning_no_mapping_is_a_bug() -> None:
    with pytest.raises(TypeError, match="refine of command 'reply'"):
        checked(refine=lambda v: ["not", "a", "mapping"]).receive({"type": "reply"})


def test_the_dataclass_form_behaves_like_the_mapping_form() -> None:
    spec = CommandSpec(
        category="presentation",
        description="Show a confirmed explanation",
        fields={"text": FieldSpec(required=True, json_schema={"type": "string"})},
        checks=[
            CheckSpec(
                occur=lambda v: not isinstance(v["text"], str),
                error="text must be a string",
            )
        ],
    )
    from_dataclass = Interaction.define(command_field="type", commands={"reply": spec})
    from_mapping = Interaction.define(
        command_field="type", commands={"reply": SEED_REPLY}
    )
    assert from_dataclass.model_json_schema == from_mapping.model_json_schema
    assert from_dataclass.manifest() == from_mapping.manifest()
    for value in [
        {"type": "reply", "text": "t"},
        {"type": "reply", "text": 1},
        {"type": "reply"},
    ]:
        outcomes: list[object] = []
        for protocol in (from_dataclass, from_mapping):
            try:
                outcomes.append(protocol.receive(value))
            except CommandRejected as rejected:
                outcomes.append((rejected.code, rejected.message, rejected.path))
        assert outcomes[0] == outcomes[1]


def test_define_command_without_a_discriminator_takes_any_object() -> None:
    reply = define_command(
        {
            "fields": {"text": {"required": True}},
            "checks": [
                {
                    "occur": lambda v: not isinstance(v["text"], str),
                    "error": "text required",
                }
            ],
        }
    )
    assert reply.id == "command"
    assert reply.parse({"text": "interface notes"}) == {"text": "interface notes"}
    with pytest.raises(CommandRejected) as raised:
        reply.parse({"text": 1})
    assert raised.value.message == "text required"
    with pytest.raises(CommandRejected) as raised:
        reply.parse("text")
    assert raised.value.code == "INVALID_COMMAND"


@pytest.mark.parametrize(
    ("value", "code"),
    [
        pytest.param({"text": "t"}, "MISSING_COMMAND", id="missing"),
        pytest.param({"kind": "ask", "text": "t"}, "UNKNOWN_COMMAND", id="other-value"),
        pytest.param({"kind": 1}, "UNKNOWN_COMMAND", id="not-a-string"),
        pytest.param({"kind": "reply"}, "MISSING_FIELD", id="selected-then-fields"),
        pytest.param(
            {"kind": "reply", "text": "t", "x": 1}, "UNKNOWN_FIELD", id="unknown"
        ),
    ],
)
def test_a_discriminator_selects_at_step_two(value: dict[str, Any], code: str) -> None:
    reply = define_command(
        {
            "fields": {"text": {"required": True}},
            "discriminator": {"field": "kind", "value": "reply"},
        },
        id="reply",
    )
    with pytest.raises(CommandRejected) as raised:
        reply.parse(value)
    assert raised.value.code == code


def test_a_discriminator_field_counts_as_declared() -> None:
    reply = define_command(
        {"fields": {"text": {}}, "discriminator": {"field": "kind", "value": "reply"}}
    )
    assert reply.parse({"kind": "reply", "text": "t"}) == {"kind": "reply", "text": "t"}


def test_compile_commands_shares_owned_fields_across_the_set() -> None:
    compiled = compile_commands(
        {
            "reply": {"fields": {"text": {}}, "owned_fields": ["text"]},
            "ask": {"fields": {"question": {}}, "additional_properties": True},
        }
    )
    assert list(compiled) == ["reply", "ask"]
    with pytest.raises(CommandRejected) as raised:
        compiled["ask"].parse({"question": "q", "text": "t"})
    assert (raised.value.code, raised.value.path) == ("FOREIGN_FIELD", "/text")
    assert compiled["ask"].parse({"question": "q", "other": 1}) == {
        "question": "q",
        "other": 1,
    }


def test_the_exceptions_survive_pickling() -> None:
    rejected = CommandRejected("no field", "/x", code="UNKNOWN_FIELD")
    copied = pickle.loads(pickle.dumps(rejected))
    assert (copied.code, copied.message, copied.path) == (
        "UNKNOWN_FIELD",
        "no field",
        "/x",
    )
    error = CommandDefinitionError("reply", "category", "is required")
    copied_error = pickle.loads(pickle.dumps(error))
    assert (copied_error.command, copied_error.key, str(copied_error)) == (
        "reply",
        "category",
        str(error),
    )
