"""The reference's shared validation primitives (`nonempty`, `object`, `jsonValue`) and the id rule."""

import math
from typing import Any

from ._text import JS_WHITESPACE, has_lone_surrogate

MAX_ID_LENGTH = 256
MAX_JSON_DEPTH = 100
_SCALARS = (bool, int)
_CONTAINERS = (dict, list)


class ContractError(ValueError):
    """A value breaks a contract rule; `message` names the rule and the field, never the value.

    Contracts do not know whether the value was a client's input or a tool's output: the node that
    validates decides which wire error it becomes (INVALID_INPUT or INVALID_RESULT).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def nonempty(value: object, name: str) -> str:
    if isinstance(value, str) and value.strip(
        JS_WHITESPACE
    ):  # js_trim, inlined: hot path
        return value
    raise ContractError(f"{name} must be a nonempty string")


def identifier(value: object, name: str) -> str:
    """A nonempty string of 1 to 256 code points (wire.md section 1), checked right after `nonempty`."""
    text = nonempty(value, name)
    if len(text) > MAX_ID_LENGTH:
        raise ContractError(f"{name} must be 1 to {MAX_ID_LENGTH} characters")
    return text


def json_object(value: object, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ContractError(f"{name} must be an object")
    return value


def json_value(value: object, name: str) -> None:
    """The reference's JSON-ness rule, with Python's equivalents of JavaScript's non-JSON values.

    Non-finite floats, callables and other scalars are "not JSON-serializable"; containers other than
    dict and list (tuples, sets, models, dicts with non-string keys) are "not JSON objects and arrays";
    an object that is its own ancestor is a cycle, while the same object reached twice (a DAG) passes.
    Beyond the reference: strings with lone surrogates (not encodable as UTF-8) and nesting deeper than
    100 levels, which the bus's strict parser would refuse, are rejected too.
    """
    _check(value, name, set(), 1)


def _check(value: object, name: str, ancestors: set[int], depth: int) -> None:
    # Tuples, not `bool | int`: a union is built on every evaluation, and this runs per JSON value.
    if value is None or isinstance(value, _SCALARS):
        return
    if isinstance(value, str):
        if not value.isascii() and has_lone_surrogate(value):
            raise ContractError(f"{name} must be JSON-serializable")
        return
    if isinstance(value, float):
        if math.isfinite(value):
            return
        raise ContractError(f"{name} must be JSON-serializable")
    if isinstance(value, _CONTAINERS):
        marker = id(value)
        if marker in ancestors:
            raise ContractError(f"{name} must not contain a cycle")
        if depth > MAX_JSON_DEPTH:
            raise ContractError(
                f"{name} must not be nested deeper than {MAX_JSON_DEPTH} levels"
            )
        ancestors.add(marker)
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ContractError(
                        f"{name} must contain only JSON objects and arrays"
                    )
                if has_lone_surrogate(key):  # keys are JSON strings too
                    raise ContractError(f"{name} must be JSON-serializable")
                _check(item, f"{name}.{key}", ancestors, depth + 1)
        else:
            for index, item in enumerate(value):
                _check(item, f"{name}.{index}", ancestors, depth + 1)
        ancestors.discard(marker)
        return
    if callable(value) or isinstance(value, complex):
        raise ContractError(f"{name} must be JSON-serializable")
    raise ContractError(f"{name} must contain only JSON objects and arrays")
