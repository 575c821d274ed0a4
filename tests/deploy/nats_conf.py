"""A reader of the NATS configuration format, as much of it as deploy/nats uses: maps (`{}`), arrays
(`[]`), `key: value`, `key = value` or `key value`, quoted and bare strings, `#` and `//` comments,
and newlines, commas or semicolons between items. Values stay strings (`$VAR` references too): the
tests compare subjects and names, and nats-server's own `-t` checks the rest."""

import re
from typing import Any

_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\r]+)
  | (?P<comment>(?:\#|//)[^\n]*)
  | (?P<newline>[\n,;])
  | (?P<open>[{\[])
  | (?P<close>[}\]])
  | (?P<assign>[:=])
  | "(?P<double>(?:[^"\\]|\\.)*)"
  | '(?P<single>[^']*)'
  | (?P<bare>[^\s,;:=\[\]{}"'\#]+(?::[^\s,;\[\]{}"'\#]+)*)
    """,
    re.VERBOSE,
)


def parse(text: str) -> dict[str, Any]:
    """The document as nested dicts, lists and strings."""
    tokens = _tokens(text)
    document, end = _map(tokens, 0, closing=None)
    assert end == len(tokens), f"unexpected {tokens[end]!r}"
    return document


def _tokens(text: str) -> list[tuple[str, str]]:
    found = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        assert match is not None, f"cannot read {text[position : position + 40]!r}"
        position = match.end()
        kind = match.lastgroup
        assert kind is not None
        if kind in ("space", "comment"):
            continue
        if kind in ("double", "single"):
            found.append(("string", match[kind]))
        else:
            found.append((kind, match[0]))
    return found


def _skip(tokens: list[tuple[str, str]], i: int) -> int:
    while i < len(tokens) and tokens[i][0] == "newline":
        i += 1
    return i


def _map(
    tokens: list[tuple[str, str]], i: int, closing: str | None
) -> tuple[dict[str, Any], int]:
    entries: dict[str, Any] = {}
    while True:
        i = _skip(tokens, i)
        if i == len(tokens) or (closing and tokens[i] == ("close", closing)):
            return entries, i
        kind, key = tokens[i]
        assert kind in ("bare", "string"), f"a key, not {key!r}"
        i += 1
        if i < len(tokens) and tokens[i][0] == "assign":
            i += 1
        entries[key], i = _value(tokens, i)


def _value(tokens: list[tuple[str, str]], i: int) -> tuple[Any, int]:
    kind, text = tokens[i]
    if (kind, text) == ("open", "{"):
        value, i = _map(tokens, i + 1, closing="}")
        return value, i + 1
    if (kind, text) == ("open", "["):
        items: list[Any] = []
        i += 1
        while True:
            i = _skip(tokens, i)
            if tokens[i] == ("close", "]"):
                return items, i + 1
            item, i = _value(tokens, i)
            items.append(item)
    assert kind in ("bare", "string"), f"a value, not {text!r}"
    return text, i + 1
