"""Step 1 of `receive`: the command is a JSON object, copied so that nothing downstream touches the input.

Only the exact types `json.loads` produces pass (`dict` with `str` keys, `list`, `str`, `int`, finite
`float`, `bool`, `None`): a subclass may override equality or `str()`, and a tuple or a set has no JSON
form. Strings with lone surrogates cannot be encoded as UTF-8, and nesting stops at 100 levels, as the
wire's strict parser does, which also ends a self-containing value instead of recursing forever.
"""

import math
import re
from typing import Any

from ._text import json_type, pointer
from .errors import CommandRejected

MAX_DEPTH = 100

_SURROGATE = re.compile("[\ud800-\udfff]")


def copy_json_object(value: object) -> dict[str, Any]:
    """A deep copy of `value`, or `CommandRejected` (`INVALID_COMMAND`) naming where it is not JSON."""
    if type(value) is not dict:
        raise CommandRejected(
            f"a command must be a JSON object, not {json_type(value)}",
            "",
            code="INVALID_COMMAND",
        )
    copied: dict[str, Any] = _copy(value, 1, [])
    return copied


def _copy(value: object, depth: int, at: list[str | int]) -> Any:
    kind = type(value)
    if kind is str:
        assert isinstance(value, str)
        if _SURROGATE.search(value):
            _refuse("strings must not contain lone surrogates", at)
        return value
    if kind is int or kind is bool or value is None:
        return value
    if kind is float:
        assert isinstance(value, float)
        if not math.isfinite(value):
            _refuse("numbers must be finite", at)
        return value
    if kind is dict or kind is list:
        if depth > MAX_DEPTH:
            _refuse(f"values must not nest more than {MAX_DEPTH} levels", at)
        if isinstance(value, list):
            return [
                _copy(item, depth + 1, [*at, index]) for index, item in enumerate(value)
            ]
        assert isinstance(value, dict)
        copied: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                _refuse(f"object keys must be strings, not {json_type(key)}", at)
            if _SURROGATE.search(key):
                _refuse("object keys must not contain lone surrogates", at)
            copied[key] = _copy(item, depth + 1, [*at, key])
        return copied
    _refuse(f"values must be JSON, not {json_type(value)}", at)


def _refuse(problem: str, at: list[str | int]) -> Any:
    raise CommandRejected(problem, pointer(*at), code="INVALID_COMMAND")
