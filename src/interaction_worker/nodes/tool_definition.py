"""A tool's definition, checked once, when the tool is registered (docs/configuration.md 2).

The reference checks only a tool's name. A tool whose other attributes are wrong then fails later:
every `P.tool.list` answers INTERNAL, for every client, or an `async def validate` returns a
coroutine that is never awaited, so its arguments are never checked. Here every attribute the
registry reads is checked when the tool is registered, with a message naming the tool and the
attribute, and the definition is built then: listing reads what was checked, never the tool again.
"""

from collections.abc import Callable, Iterable, Mapping
from typing import Any, get_args

from ..contracts import ContractError, ToolDefinition, ToolEffect, json_value
from ..errors import RegistrationError
from ._callables import is_async, is_coroutine_function

EFFECTS: tuple[str, ...] = get_args(ToolEffect)
_MAX_DEPTH = 100  # the strict parser's nesting limit (docs/wire.md 1)
Refuse = Callable[[str], RegistrationError]
_MISSING = object()


class _NotJson(Exception):
    pass


def checked_definition(tool: object, name: str) -> ToolDefinition:
    """The wire definition of `tool` (registered as `name`), or RegistrationError naming what is wrong."""

    def refuse(problem: str) -> RegistrationError:
        return RegistrationError(f"Invalid tool {name}: {problem}")

    built: dict[str, Any] = {
        "name": name,
        "input_schema": _input_schema(tool, refuse),
    }
    description = getattr(tool, "description", None)
    if description is not None:
        if not isinstance(description, str):
            raise refuse("description must be a string")
        built["description"] = description
    effects = getattr(tool, "effects", None)
    if effects is not None:
        built["effects"] = _effects(effects, refuse)
    requires_approval = getattr(tool, "requires_approval", None)
    if requires_approval is not None:
        if not isinstance(requires_approval, bool):
            raise refuse("requires_approval must be true or false")
        built["requires_approval"] = requires_approval
    _methods(tool, refuse)
    return ToolDefinition.trusted(**built)


def _input_schema(tool: object, refuse: Refuse) -> dict[str, Any]:
    schema = getattr(tool, "input_schema", _MISSING)
    if schema is _MISSING:
        raise refuse("input_schema is required (a JSON Schema object)")
    if not isinstance(schema, Mapping):
        raise refuse("input_schema must be a JSON Schema object")
    try:
        # A copy, plain JSON: a schema changed after registration does not change what is listed.
        copy = _plain(schema, 1)
        json_value(copy, "input_schema")
    except (_NotJson, ContractError):
        raise refuse(
            "input_schema must be a JSON Schema object (string keys, JSON values)"
        ) from None
    assert isinstance(copy, dict)
    # A tool's arguments are always a JSON object (docs/wire.md 1): a schema of anything else
    # would describe calls that can never be made.
    if "type" in copy and copy["type"] != "object":
        raise refuse('input_schema must describe an object ("type": "object")')
    if "properties" in copy and not isinstance(copy["properties"], dict):
        raise refuse("input_schema.properties must be an object")
    required = copy.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise refuse("input_schema.required must be a list of strings")
    return copy


def _plain(value: object, depth: int) -> object:
    """`value` with its mappings as dicts and its tuples as lists; scalars are left to `json_value`."""
    if depth > _MAX_DEPTH:
        raise _NotJson  # deeper than the bus accepts, or a cycle
    if isinstance(value, Mapping):
        copy: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _NotJson
            copy[key] = _plain(item, depth + 1)
        return copy
    if isinstance(value, list | tuple):
        return [_plain(item, depth + 1) for item in value]
    return value


def _effects(effects: object, refuse: Refuse) -> list[str]:
    allowed = ", ".join(EFFECTS)
    if isinstance(effects, str | bytes | Mapping) or not isinstance(effects, Iterable):
        raise refuse(f"effects must be a list of {allowed}")
    listed = list(effects)
    if not all(isinstance(effect, str) and effect in EFFECTS for effect in listed):
        raise refuse(f"effects must be a list of {allowed}")
    if isinstance(effects, set | frozenset):  # no order of its own: the documented one
        listed.sort(key=EFFECTS.index)
    return listed


def _methods(tool: object, refuse: Refuse) -> None:
    validate = getattr(tool, "validate", None)
    if not callable(validate):
        raise refuse("validate must be a method")
    if is_async(validate):
        # Called without await (the protocol's validate is synchronous): an async one would return
        # a coroutine that never runs, and every call would pass unchecked.
        raise refuse("validate must be a plain method, not async")
    if not is_coroutine_function(getattr(tool, "execute", None)):
        raise refuse("execute must be an async method")
