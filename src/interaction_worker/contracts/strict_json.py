"""The strict JSON parser for bus bodies (wire.md section 1).

Python's `json` (and pydantic's JSON mode) accept NaN, Infinity, `1e400` as infinity, lone surrogate
escapes and duplicate keys; the wire refuses all of them, and nesting past 100 levels. The parse is done
once per message, so the rare checks are gated on cheap byte scans of the body.

The authority is `json`'s scanner with hooks that refuse each of these (`_parse_strictly`); its hooks
are Python calls, one per object and per number. A body is first read by pydantic-core's parser (Rust,
no hooks), which refuses invalid UTF-8, lone surrogates, integers over 4,300 digits and every syntax
error, and its value is kept only when it is vouched to be what the strict parse would return: nested
at most 100 levels, no float that is not finite (NaN, Infinity, or one that overflowed), and no key
repeated (`_keys` counts them against the colons). Anything else is parsed again strictly, so every refusal is the
strict parser's, with its message.
"""

import json
import json.scanner
import math
import re
from typing import Any

from pydantic_core import from_json

MAX_DEPTH = 100
MAX_INT_DIGITS = 4300

# A `\uD800`-`\uDFFF` escape; a match only means "look closer" (it may sit after an escaped backslash).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonRefused(ValueError):
    """The body is not one strict JSON object; `message` says why without quoting the body."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _refuse_constant(name: str) -> Any:
    raise JsonRefused(f"JSON must not contain {name}")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonRefused("JSON numbers must be finite")
    return value


def _parse_int(text: str) -> int:
    if len(text) - text.startswith("-") > MAX_INT_DIGITS:
        raise JsonRefused(f"JSON integers must have at most {MAX_INT_DIGITS} digits")
    return int(text)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise JsonRefused("JSON objects must not repeat a key")
    return result


_DECODER = json.JSONDecoder(
    parse_float=_parse_float,
    parse_int=_parse_int,
    parse_constant=_refuse_constant,
    object_pairs_hook=_no_duplicates,
)
# typeshed types make_scanner as taking itself; it takes the decoder whose hooks it calls.
_SCAN = json.scanner.make_scanner(_DECODER)  # type: ignore[arg-type]
_WHITESPACE = " \t\n\r"


def parse_json_object(body: bytes) -> dict[str, Any]:
    """Parse a bus body that must be one UTF-8 JSON object; raise `JsonRefused` otherwise."""
    value = parse_json(body)
    if not isinstance(value, dict):
        raise JsonRefused("the body must be a JSON object")
    return value


def parse_json(body: bytes) -> Any:
    try:
        value = from_json(body)
        keys = _keys(value, 1)
    except ValueError:
        pass  # refused, or not vouched for: the strict parse decides, its refusal chained to nothing
    else:
        if keys == body.count(b":") or _keyed_at_their_colons(body, keys):
            return value
    # Fewer brackets than the limit cannot nest deeper than it: the exact walk is only for the rare rest.
    deep = len(body) > MAX_DEPTH and body.count(b"[") + body.count(b"{") > MAX_DEPTH
    return _parse_strictly(body, deep)


class _Unvouched(ValueError):
    """The quick parse's value holds a float that is not finite, or nests deeper than the limit:
    the strict parse refuses it."""


def _keys(value: Any, level: int) -> int:
    """The keys of the objects in `value`, as pydantic-core parsed its body; `_Unvouched` at a
    float that is not finite (one that overflowed, `1e400`, or NaN) and at a container nested
    deeper than `MAX_DEPTH` levels (`value`, a container, is at `level`: its body's is 1).

    `value` lost a key for each key its body repeated (the last one wins), and each key of the body
    is followed by its colon: a body with as many colons as `value` has keys repeated none. The
    nesting is found on the way, so a body's brackets are counted only when it is parsed strictly."""
    kind = type(value)
    if kind is dict:
        count = len(value)
        items = value.values()
    elif kind is list:
        count = 0
        items = value
    elif kind is float and value - value:  # inf - inf and nan are nan: true
        raise _Unvouched
    else:
        return 0
    for item in items:
        kind = type(item)
        if kind is dict or kind is list:
            if level == MAX_DEPTH:
                raise _Unvouched
            if item:
                count += _keys(item, level + 1)
        elif kind is float and item - item:
            raise _Unvouched
    return count


def _keyed_at_their_colons(body: bytes, keys: int) -> bool:
    """Whether no key is repeated in a body whose strings hold colons: when each of its keys is
    written right before its colon (no whitespace before any colon), each writes one `":`, and as
    many of them as there are keys leaves none for a repeated one."""
    text = body.decode()  # str's searches cost a fraction of bytes' here
    return (
        keys == text.count('":')
        and " :" not in text
        and "\t:" not in text
        and "\n:" not in text
        and "\r:" not in text
    )


def _parse_strictly(body: bytes, deep: bool) -> Any:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise JsonRefused("the body must be UTF-8") from None
    if deep:
        _check_depth(text)
    start = _skip_whitespace(text, 0) if text[:1] in _WHITESPACE else 0
    try:
        # The scanner itself, as raw_decode calls it: one Python frame less per body.
        value, end = _SCAN(text, start)
    except JsonRefused:
        raise
    except (ValueError, RecursionError, StopIteration):
        raise JsonRefused("the body is not valid JSON") from None
    if end != len(text) and _skip_whitespace(text, end) != len(text):
        raise JsonRefused("the body is not valid JSON")
    if b"\\u" in body and _SURROGATE_ESCAPE.search(body) and _has_lone_surrogate(value):
        raise JsonRefused("JSON strings must not contain lone surrogates")
    return value


def _skip_whitespace(text: str, index: int) -> int:
    # RFC 8259 whitespace only; str.strip() would also accept form feeds and Unicode spaces.
    while index < len(text) and text[index] in _WHITESPACE:
        index += 1
    return index


def _check_depth(text: str) -> None:
    depth = 0
    in_string = False
    escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise JsonRefused(f"JSON must not nest deeper than {MAX_DEPTH} levels")
        elif ch in "]}":
            depth -= 1


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _LONE_SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
