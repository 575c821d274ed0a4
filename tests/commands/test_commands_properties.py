"""Generated protocols and commands: a valid command stays valid through `receive` and a JSON round trip,
and one mutation of it gives the code of the step it breaks; the schema agrees on presence."""

import json
import string
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from interaction_worker.commands import CommandProtocol, CommandRejected, Interaction

NAMES = st.text(
    alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=8
)
# Nine characters: longer than any generated name, so never declared anywhere.
UNDECLARED = "undeclare"

SCHEMAS: dict[str, tuple[dict[str, Any], st.SearchStrategy[Any]]] = {
    "any": (
        {},
        st.recursive(
            st.booleans()
            | st.integers()
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=5), inner, max_size=3)
            ),
            max_leaves=6,
        ),
    ),
    "string": ({"type": "string"}, st.text(max_size=10)),
    "integer": ({"type": "integer"}, st.integers()),
}
KINDS = st.sampled_from(sorted(SCHEMAS))


@dataclass
class Field:
    required: bool
    kind: str


@dataclass
class Command:
    fields: dict[str, Field]
    owned: list[str]
    additional: bool
    nullable: bool


@dataclass
class Generated:
    command_field: str
    commands: dict[str, Command]

    def protocol(self) -> CommandProtocol:
        declared: dict[str, Any] = {}
        for command_id, command in self.commands.items():
            declared[command_id] = {
                "category": "action",
                "fields": {
                    name: {
                        "required": field.required,
                        "json_schema": SCHEMAS[field.kind][0],
                    }
                    for name, field in command.fields.items()
                },
                "owned_fields": command.owned,
                "additional_properties": command.additional,
                "optional_presence": "nullable" if command.nullable else "own",
            }
        return Interaction.define(command_field=self.command_field, commands=declared)


@st.composite
def protocols(draw: st.DrawFn) -> Generated:
    names = draw(st.lists(NAMES, min_size=3, max_size=10, unique=True))
    command_field, pool = names[0], names[1:]
    ids = draw(st.lists(NAMES, min_size=1, max_size=4, unique=True))
    declared = {
        command_id: draw(st.lists(st.sampled_from(pool), max_size=4, unique=True))
        for command_id in ids
    }
    commands: dict[str, Command] = {}
    for command_id, field_names in declared.items():
        # Only a field no other command declares may be owned.
        alone = [
            name
            for name in field_names
            if all(name not in declared[other] for other in ids if other != command_id)
        ]
        commands[command_id] = Command(
            fields={
                name: Field(draw(st.booleans()), draw(KINDS)) for name in field_names
            },
            owned=draw(st.lists(st.sampled_from(alone), unique=True)) if alone else [],
            additional=draw(st.booleans()),
            nullable=draw(st.booleans()),
        )
    return Generated(command_field, commands)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Generated, str, dict[str, Any], dict[str, Any]]:
    """A protocol, a command id, a valid command for it, and the result `receive` should give."""
    generated = draw(protocols())
    command_id = draw(st.sampled_from(sorted(generated.commands)))
    command = generated.commands[command_id]
    value: dict[str, Any] = {generated.command_field: command_id}
    expected = dict(value)
    for name, field in command.fields.items():
        choices = (
            ["present", "absent", "null"] if command.nullable else ["present", "absent"]
        )
        presence = "present" if field.required else draw(st.sampled_from(choices))
        if presence == "present":
            value[name] = expected[name] = draw(SCHEMAS[field.kind][1])
        elif presence == "null":
            value[name] = None
    return generated, command_id, value, expected


def code_of(protocol: CommandProtocol, value: object) -> str | None:
    try:
        protocol.receive(value)
    except CommandRejected as rejected:
        return rejected.code
    return None


@settings(max_examples=80, deadline=None)
@given(cases())
def test_a_valid_command_stays_valid_and_each_mutation_gets_its_code(
    case: tuple[Generated, str, dict[str, Any], dict[str, Any]],
) -> None:
    generated, command_id, value, expected = case
    protocol = generated.protocol()
    command = generated.commands[command_id]
    schema = Draft202012Validator(protocol.model_json_schema)

    assert protocol.receive(value) == {"id": command_id, "result": expected}
    assert protocol.receive(json.loads(json.dumps(value))) == {
        "id": command_id,
        "result": expected,
    }
    assert json.loads(json.dumps(protocol.parse(value))) == expected
    # Under nullable the schema asks for every field (null for an absent one); receive also takes absence.
    complete = not command.nullable or set(command.fields) <= set(value)
    assert schema.is_valid(value) == complete
    assert (
        Draft202012Validator(protocol.model_json_schema_wrapped()).is_valid(
            {"command": value}
        )
        == complete
    )

    for name, field in command.fields.items():
        if field.required:
            dropped = {key: item for key, item in value.items() if key != name}
            assert code_of(protocol, dropped) == "MISSING_FIELD"
            assert not schema.is_valid(dropped)

    unknown = {**value, UNDECLARED: 1}
    if command.additional:
        assert code_of(protocol, unknown) is None
        assert schema.is_valid(unknown) == complete
    else:
        assert code_of(protocol, unknown) == "UNKNOWN_FIELD"
        assert not schema.is_valid(unknown)

    for other_id, other in generated.commands.items():
        if other_id != command_id:
            for name in other.owned:
                foreign = {**value, name: "x"}
                assert code_of(protocol, foreign) == (
                    "FOREIGN_FIELD" if command.additional else "UNKNOWN_FIELD"
                )

    renamed = {**value, generated.command_field: UNDECLARED}
    assert code_of(protocol, renamed) == "UNKNOWN_COMMAND"
    assert not schema.is_valid(renamed)
    unselected = {
        key: item for key, item in value.items() if key != generated.command_field
    }
    assert code_of(protocol, unselected) == "MISSING_COMMAND"
    assert not schema.is_valid(unselected)
    for not_an_object in ([value], json.dumps(value), None):
        assert code_of(protocol, not_an_object) == "INVALID_COMMAND"
