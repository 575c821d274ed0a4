"""docs/tools.md against the built-in tools themselves, so that neither drifts: a section per tool, a
table row per argument with its schema's type, whether it is required and its default, and an example
`interaction-worker call` that the tool accepts."""

import json
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from interaction_worker.nodes import RegisteredTool
from interaction_worker.tools import (
    READ_ONLY_COMMANDS,
    ReadTextTool,
    WebSearchTool,
    read_only_command_tools,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "tools.md"
_HEADING = re.compile(r"^#+ (.*)$", re.MULTILINE)
_TOOL_HEADING = re.compile(r"`([A-Za-z0-9_-]+)`")
_ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+) \| (yes|no) \| (.+) \|$", re.MULTILINE)
_TYPES = {
    "string": "string",
    "boolean": "boolean",
    "integer": "integer",
    "array": "array of strings",
}


class NoSearch:
    """A provider for the tool's definition and validation; nothing here searches."""

    origin = "https://api.search.brave.com"

    async def search(self, query: str, limit: int) -> Sequence[Mapping[str, Any]]:
        raise AssertionError("the documentation test never searches")


def builtin_tools() -> dict[str, RegisteredTool]:
    tools: list[RegisteredTool] = [ReadTextTool(), WebSearchTool(NoSearch())]
    tools += read_only_command_tools()
    return {tool.name: tool for tool in tools}


def sections() -> dict[str, str]:
    """Each tool's section of docs/tools.md (a heading that is the tool's name), up to the next
    heading, by tool name."""
    text = DOC.read_text(encoding="utf-8")
    found = list(_HEADING.finditer(text))
    ends = [match.start() for match in found[1:]] + [len(text)]
    return {
        tool.group(1): text[match.end() : end]
        for match, end in zip(found, ends, strict=True)
        if (tool := _TOOL_HEADING.fullmatch(match.group(1)))
    }


def shown(value: object) -> str:
    """A default as the documentation writes it: strings bare, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def examples(section: str) -> Iterator[list[str]]:
    for line in section.splitlines():
        if line.startswith("interaction-worker call "):
            yield shlex.split(line)[2:]


def arguments_of(tokens: list[str]) -> dict[str, Any]:
    """`k=v` is a string and `k:=JSON` a JSON value, as `interaction-worker call` reads them."""
    arguments: dict[str, Any] = {}
    for token in tokens:
        key, separator, value = token.partition("=")
        assert separator, f"not an argument: {token}"
        if key.endswith(":"):
            arguments[key[:-1]] = json.loads(value)
        else:
            arguments[key] = value
    return arguments


def test_every_built_in_tool_has_a_section() -> None:
    documented = sections()
    assert set(READ_ONLY_COMMANDS) <= set(documented)
    assert set(builtin_tools()) <= set(documented)


@pytest.mark.parametrize("name", list(builtin_tools()))
def test_each_argument_is_documented_as_its_schema_says(name: str) -> None:
    schema = builtin_tools()[name].input_schema
    required = set(schema.get("required", ()))
    rows = {row[0]: row[1:] for row in _ROW.findall(sections()[name])}
    assert set(rows) == set(schema["properties"])
    for argument, rules in schema["properties"].items():
        kind, is_required, meaning = rows[argument]
        assert kind.strip() == _TYPES[rules["type"]], argument
        assert (is_required == "yes") == (argument in required), argument
        if "default" in rules:
            assert f"default `{shown(rules['default'])}`" in meaning.lower(), argument
        for value in rules.get("enum", ()):
            assert f"`{value}`" in meaning, (argument, value)


@pytest.mark.parametrize("name", list(builtin_tools()))
def test_each_tool_s_example_is_a_call_it_accepts(name: str) -> None:
    tool = builtin_tools()[name]
    calls = list(examples(sections()[name]))
    assert calls, f"no `interaction-worker call {name}` example"
    for tokens in calls:
        assert tokens[0] == name
        tool.validate(arguments_of(tokens[1:]))


def test_the_grep_example_searches_src_recursively_for_todo() -> None:
    (tokens,) = examples(sections()["grep"])
    assert arguments_of(tokens[1:]) == {
        "pattern": "TODO",
        "paths": ["src"],
        "recursive": True,
    }
