"""The model schema, the wrapped form, `command_schema` and the manifest (docs/commands.md section 3)."""

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from interaction_worker.commands import (
    CommandCatalog,
    CommandProtocol,
    CommandRejected,
    Interaction,
    command_schema,
    compile_commands,
    define_command,
)


def protocol(presence: str = "own") -> CommandProtocol:
    return Interaction.define(
        command_field="type",
        commands={
            "reply": {
                "category": "presentation",
                "description": "Show a confirmed explanation",
                "fields": {
                    "text": {
                        "required": True,
                        "json_schema": {"type": "string"},
                        "description": "What to show",
                    },
                    "tone": {"json_schema": {"enum": ["dry", "warm"]}},
                },
                "optional_presence": presence,
            },
            "unavailable": {
                "category": "receipt",
                "fields": {},
                "additional_properties": True,
            },
        },
    )


def test_the_model_schema_is_exactly_as_documented() -> None:
    assert protocol().model_json_schema == {
        "anyOf": [
            {
                "type": "object",
                "title": "reply",
                "description": "Show a confirmed explanation",
                "properties": {
                    "type": {"const": "reply"},
                    "text": {"type": "string", "description": "What to show"},
                    "tone": {"enum": ["dry", "warm"]},
                },
                "required": ["type", "text"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "title": "unavailable",
                "properties": {"type": {"const": "unavailable"}},
                "required": ["type"],
                "additionalProperties": True,
            },
        ]
    }


def test_under_nullable_every_field_is_required_and_optional_ones_accept_null() -> None:
    reply = protocol("nullable").model_json_schema["anyOf"][0]
    assert reply["required"] == ["type", "text", "tone"]
    assert reply["properties"]["text"] == {
        "type": "string",
        "description": "What to show",
    }
    assert reply["properties"]["tone"] == {
        "anyOf": [{"enum": ["dry", "warm"]}, {"type": "null"}]
    }


def test_the_wrapped_form_puts_the_schema_under_command() -> None:
    assert protocol().model_json_schema_wrapped() == {
        "type": "object",
        "properties": {"command": protocol().model_json_schema},
        "required": ["command"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize("presence", ["own", "nullable"])
def test_every_schema_is_valid_draft_2020_12(presence: str) -> None:
    made = protocol(presence)
    Draft202012Validator.check_schema(made.model_json_schema)
    Draft202012Validator.check_schema(made.model_json_schema_wrapped())
    for command_id, compiled in made.catalog:
        Draft202012Validator.check_schema(command_schema(command_id, compiled))


def test_the_schema_is_a_copy() -> None:
    made = protocol()
    made.model_json_schema["anyOf"].clear()
    made.model_json_schema["anyOf"][0]["properties"]["text"]["type"] = "number"
    assert made.model_json_schema == protocol().model_json_schema


ACCEPTED = [
    {"type": "reply", "text": "t"},
    {"type": "reply", "text": "t", "tone": "dry"},
    {"type": "unavailable"},
    {"type": "unavailable", "anything": [1, 2]},
]
# What both the protocol and the schema refuse: missing required fields, unknown fields and ids.
REFUSED = [
    {"type": "reply"},
    {"type": "reply", "text": "t", "extra": 1},
    {"text": "t"},
    {"type": "nope"},
    {"type": "Reply", "text": "t"},
    {"type": "reply", "tone": "dry"},
]


@pytest.mark.parametrize("value", ACCEPTED)
def test_an_accepted_command_meets_the_schema(value: dict[str, Any]) -> None:
    made = protocol()
    made.receive(value)
    Draft202012Validator(made.model_json_schema).validate(value)
    Draft202012Validator(made.model_json_schema_wrapped()).validate({"command": value})


@pytest.mark.parametrize("value", REFUSED)
def test_the_schema_refuses_what_the_protocol_refuses_by_presence(
    value: dict[str, Any],
) -> None:
    made = protocol()
    with pytest.raises(CommandRejected):
        made.receive(value)
    assert not Draft202012Validator(made.model_json_schema).is_valid(value)
    assert not Draft202012Validator(made.model_json_schema_wrapped()).is_valid(
        {"command": value}
    )


def test_under_nullable_the_schema_takes_null_for_an_optional_field() -> None:
    made = protocol("nullable")
    value = {"type": "reply", "text": "t", "tone": None}
    assert made.parse(value) == {"type": "reply", "text": "t"}
    Draft202012Validator(made.model_json_schema).validate(value)
    assert not Draft202012Validator(made.model_json_schema).is_valid(
        {"type": "reply", "text": "t"}
    )


def test_field_json_schema_is_described_not_enforced() -> None:
    made = protocol()
    assert made.parse({"type": "reply", "text": 1}) == {"type": "reply", "text": 1}
    assert not Draft202012Validator(made.model_json_schema).is_valid(
        {"type": "reply", "text": 1}
    )


def test_command_schema_of_a_compiled_set() -> None:
    compiled = compile_commands({"reply": {"fields": {"text": {"required": True}}}})
    catalog = CommandCatalog(compiled.items())
    schema = command_schema("reply", catalog.require("reply"))
    assert schema == {
        "type": "object",
        "title": "reply",
        "properties": {"text": {}},
        "required": ["text"],
        "additionalProperties": False,
    }
    Draft202012Validator.check_schema(schema)


def test_command_schema_of_a_discriminated_command() -> None:
    reply = define_command(
        {"fields": {"text": {}}, "discriminator": {"field": "kind", "value": "reply"}},
        id="reply",
    )
    schema = command_schema("reply", reply)
    assert schema["properties"] == {"kind": {"const": "reply"}, "text": {}}
    assert schema["required"] == ["kind"]
    Draft202012Validator(schema).validate(reply.parse({"kind": "reply"}))
    assert not Draft202012Validator(schema).is_valid({"kind": "ask"})


def test_the_manifest_lists_commands_in_order() -> None:
    assert protocol().manifest() == [
        {
            "id": "reply",
            "category": "presentation",
            "description": "Show a confirmed explanation",
            "fields": {
                "text": {"required": True, "json_schema": {"type": "string"}},
                "tone": {"required": False, "json_schema": {"enum": ["dry", "warm"]}},
            },
        },
        {"id": "unavailable", "category": "receipt", "fields": {}},
    ]


def test_the_manifest_omits_an_undeclared_category_and_is_a_copy() -> None:
    catalog = CommandCatalog(
        compile_commands(
            {"reply": {"fields": {"text": {"json_schema": {"type": "string"}}}}}
        )
    )
    manifest = catalog.manifest()
    assert manifest == [
        {
            "id": "reply",
            "fields": {"text": {"required": False, "json_schema": {"type": "string"}}},
        }
    ]
    manifest[0]["fields"]["text"]["json_schema"]["type"] = "number"
    assert catalog.manifest() == [
        {
            "id": "reply",
            "fields": {"text": {"required": False, "json_schema": {"type": "string"}}},
        }
    ]


def test_a_catalog_requires_a_declared_id() -> None:
    compiled = compile_commands({"reply": {"fields": {}}, "ask": {"fields": {}}})
    catalog = CommandCatalog(compiled.items())
    assert catalog.require("ask") is compiled["ask"]
    assert catalog.ids == ("reply", "ask")
    assert "reply" in catalog and len(catalog) == 2
    with pytest.raises(CommandRejected) as raised:
        catalog.require("delete")
    assert raised.value.code == "UNKNOWN_COMMAND"
    assert '"delete"' in raised.value.message


def test_the_declared_json_schema_is_copied_when_compiled() -> None:
    text_schema: dict[str, Any] = {"type": "string"}
    made = Interaction.define(
        command_field="type",
        commands={
            "reply": {
                "category": "presentation",
                "fields": {"text": {"json_schema": text_schema}},
            }
        },
    )
    text_schema["type"] = "number"
    assert made.model_json_schema["anyOf"][0]["properties"]["text"] == {
        "type": "string"
    }
