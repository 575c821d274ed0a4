"""The JSON Schema (2020-12) given to the model (docs/commands.md section 3).

It describes what `receive` accepts as far as presence goes: the selector as a `const`, the required
fields, `additionalProperties`. Each field's `json_schema` is copied in but not enforced by `receive`.
"""

import copy
from collections.abc import Iterable
from typing import Any

from .validation import CompiledCommand


def command_schema(command_id: str, compiled: CompiledCommand) -> dict[str, Any]:
    """One command's schema, titled `command_id`; its discriminator (if any) becomes a `const` property."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    if compiled.discriminator is not None:
        properties[compiled.discriminator.field] = {
            "const": compiled.discriminator.value
        }
        required.append(compiled.discriminator.field)
    nullable = compiled.optional_presence == "nullable"
    for name, field in compiled.fields.items():
        schema: dict[str, Any] = copy.deepcopy(dict(field.json_schema))
        if nullable and not field.required:
            schema = {"anyOf": [schema, {"type": "null"}]}
        if field.description is not None:
            schema["description"] = field.description
        properties[name] = schema
        if field.required or nullable:
            required.append(name)
    result: dict[str, Any] = {"type": "object", "title": command_id}
    if compiled.description is not None:
        result["description"] = compiled.description
    result["properties"] = properties
    result["required"] = required
    result["additionalProperties"] = compiled.additional_properties
    return result


def any_of(commands: Iterable[tuple[str, CompiledCommand]]) -> dict[str, Any]:
    """The schema of a set of commands: one branch per command, in order."""
    return {
        "anyOf": [
            command_schema(command_id, compiled) for command_id, compiled in commands
        ]
    }


def wrapped(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` under an object root, for structured-output modes that refuse a root `anyOf`."""
    return {
        "type": "object",
        "properties": {"command": schema},
        "required": ["command"],
        "additionalProperties": False,
    }
