"""Safe text for rejection messages: what a model sent is quoted short, on one line."""

import json
import re

MAX_ECHO = 64

# Everything `str.splitlines` breaks on, so a message stays one line however it is printed.
_LINE_BREAKS = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def one_line(text: str, limit: int) -> str:
    """`text` with line breaks as spaces, cut to `limit` characters (the last one an ellipsis)."""
    flat = _LINE_BREAKS.sub(" ", text)
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return flat


def quote(text: str) -> str:
    """At most 64 characters of `text` as a JSON string literal, escapes and all."""
    cut = text[:MAX_ECHO] + ("…" if len(text) > MAX_ECHO else "")
    # A lone surrogate cannot be encoded; the escaped form can.
    literal = json.dumps(cut, ensure_ascii=bool(_SURROGATE.search(cut)))
    return _LINE_BREAKS.sub(lambda match: f"\\u{ord(match.group()):04x}", literal)


def pointer(*tokens: str | int) -> str:
    """The JSON Pointer (RFC 6901) of `tokens`, `""` for none."""
    return "".join(
        "/" + str(token).replace("~", "~0").replace("/", "~1") for token in tokens
    )


def json_type(value: object) -> str:
    """The JSON name of a value's type, for messages that must not echo the value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "a Python " + type(value).__name__
