"""The 14 read-only commands' arguments (reference sections 7.1-7.3): the argv of every tool with every
flag, every validation message in the reference's order, the definitions and the options."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from interaction_worker import ExternalResult, Sandbox, ToolRegistry
from interaction_worker.errors import ConfigurationError, InvalidInput, PermissionDenied
from interaction_worker.nodes import CommandResult, is_rerunnable, tool_definition
from interaction_worker.tools import READ_ONLY_COMMANDS, read_only_command_tools

UNEXPECTED = "Unexpected command argument"


class RecordingExecutor:
    """Records each run and answers `out\\n`, exit 0."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    async def run(
        self, command: str, args: Sequence[str], workspace: Path
    ) -> CommandResult:
        self.calls.append((command, list(args)))
        return CommandResult("out\n", "", 0)


async def call(
    tmp_path: Path,
    name: str,
    arguments: dict[str, Any],
    executor: RecordingExecutor | None = None,
) -> tuple[ExternalResult, RecordingExecutor]:
    executor = executor or RecordingExecutor()
    sandbox = Sandbox(tools=["*"], execute=True, workspace=tmp_path, executor=executor)
    registry = ToolRegistry(read_only_command_tools())
    result = await registry.call(
        {"id": "c-1", "name": name, "arguments": arguments}, sandbox
    )
    return result, executor


def tool(name: str) -> Any:
    return next(t for t in read_only_command_tools() if t.name == name)


# --- argv -----------------------------------------------------------------------------------------

ARGV: list[tuple[str, dict[str, Any], list[str]]] = [
    ("grep", {"pattern": "x", "paths": ["a.txt"]}, ["-n", "--", "x", "a.txt"]),
    (
        "grep",
        {"pattern": "x", "paths": ["a"], "recursive": True},
        ["-n", "-r", "--", "x", "a"],
    ),
    (
        "grep",
        {"pattern": "x", "paths": ["a"], "ignoreCase": True},
        ["-n", "-i", "--", "x", "a"],
    ),
    (
        "grep",
        {"pattern": "x", "paths": ["a"], "fixedStrings": True},
        ["-n", "-F", "--", "x", "a"],
    ),
    (
        "grep",
        {
            "fixedStrings": True,
            "ignoreCase": True,
            "recursive": True,
            "pattern": " a b ",
            "paths": ["a", "b/c", "-rf"],
        },
        ["-n", "-r", "-i", "-F", "--", " a b ", "a", "b/c", "./-rf"],
    ),
    (
        "grep",
        {"pattern": "--help", "paths": ["."], "recursive": False, "ignoreCase": False},
        ["-n", "--", "--help", "."],
    ),
    ("ls", {}, ["-1", "--", "."]),
    ("ls", {"all": True}, ["-1", "-a", "--", "."]),
    ("ls", {"path": "docs", "all": False}, ["-1", "--", "docs"]),
    ("ls", {"path": "-rf"}, ["-1", "--", "./-rf"]),
    ("cat", {"path": "a.txt"}, ["--", "a.txt"]),
    ("cat", {"path": "--help"}, ["--", "./--help"]),
    ("find", {}, [".", "-maxdepth", "8", "-print"]),
    ("find", {"path": "src"}, ["src", "-maxdepth", "8", "-print"]),
    ("find", {"type": "file"}, [".", "-maxdepth", "8", "-type", "f", "-print"]),
    ("find", {"type": "directory"}, [".", "-maxdepth", "8", "-type", "d", "-print"]),
    ("find", {"maxDepth": 0}, [".", "-maxdepth", "0", "-print"]),
    ("find", {"maxDepth": 2.0}, [".", "-maxdepth", "2", "-print"]),
    ("find", {"name": "*.py"}, [".", "-maxdepth", "8", "-name", "*.py", "-print"]),
    (
        "find",
        {"name": "a/b*", "maxDepth": 32, "type": "file", "path": "-rf"},
        ["./-rf", "-maxdepth", "32", "-type", "f", "-name", "a/b*", "-print"],
    ),
    ("head", {"path": "a.txt"}, ["-n", "20", "--", "a.txt"]),
    ("head", {"path": "a.txt", "lines": 1}, ["-n", "1", "--", "a.txt"]),
    ("tail", {"path": "a.txt"}, ["-n", "20", "--", "a.txt"]),
    ("tail", {"path": "a.txt", "lines": 1000}, ["-n", "1000", "--", "a.txt"]),
    ("wc", {"path": "a.txt"}, ["-l", "--", "a.txt"]),
    ("wc", {"path": "a.txt", "metric": None}, ["-l", "--", "a.txt"]),
    ("wc", {"path": "a.txt", "metric": "lines"}, ["-l", "--", "a.txt"]),
    ("wc", {"path": "a.txt", "metric": "words"}, ["-w", "--", "a.txt"]),
    ("wc", {"path": "a.txt", "metric": "bytes"}, ["-c", "--", "a.txt"]),
    ("sort", {"path": "a.txt"}, ["--", "a.txt"]),
    ("sort", {"path": "a.txt", "reverse": True}, ["-r", "--", "a.txt"]),
    ("sort", {"path": "a.txt", "numeric": True}, ["-n", "--", "a.txt"]),
    ("sort", {"path": "a.txt", "unique": True}, ["-u", "--", "a.txt"]),
    (
        "sort",
        {"unique": True, "numeric": True, "reverse": True, "path": "a.txt"},
        ["-r", "-n", "-u", "--", "a.txt"],
    ),
    ("uniq", {"path": "a.txt"}, ["--", "a.txt"]),
    ("uniq", {"path": "a.txt", "count": True}, ["-c", "--", "a.txt"]),
    ("uniq", {"path": "a.txt", "ignoreCase": True}, ["-i", "--", "a.txt"]),
    (
        "uniq",
        {"path": "a.txt", "ignoreCase": True, "count": True},
        ["-c", "-i", "--", "a.txt"],
    ),
    ("cut", {"path": "a.csv", "fields": "1"}, ["-f", "1", "--", "a.csv"]),
    (
        "cut",
        {"path": "a.csv", "fields": "1,3-", "delimiter": ","},
        ["-d", ",", "-f", "1,3-", "--", "a.csv"],
    ),
    (
        "cut",
        {"path": "a.tsv", "fields": "2-4,7", "delimiter": "\t"},
        ["-d", "\t", "-f", "2-4,7", "--", "a.tsv"],
    ),
    (
        "cut",
        {"path": "a", "fields": "1", "delimiter": "😀"},
        ["-d", "😀", "-f", "1", "--", "a"],
    ),
    (
        "cut",
        {"path": "a", "fields": "1", "delimiter": "-"},
        ["-d", "-", "-f", "1", "--", "a"],
    ),
    ("stat", {"path": "a.txt"}, ["--", "a.txt"]),
    ("stat", {"path": "."}, ["--", "."]),
    ("file", {"path": "a.bin"}, ["--", "a.bin"]),
    ("du", {"path": "."}, ["-k", "-d", "1", "--", "."]),
    ("du", {"path": "src", "maxDepth": 0}, ["-k", "-d", "0", "--", "src"]),
    ("du", {"path": "-rf", "maxDepth": 32}, ["-k", "-d", "32", "--", "./-rf"]),
    ("pwd", {}, []),
]


@pytest.mark.parametrize(
    ("name", "arguments", "argv"),
    [pytest.param(*case, id=f"{case[0]}-{index}") for index, case in enumerate(ARGV)],
)
async def test_each_tool_runs_its_program_with_the_reference_argv(
    tmp_path: Path, name: str, arguments: dict[str, Any], argv: list[str]
) -> None:
    result, executor = await call(tmp_path, name, arguments)
    assert executor.calls == [(name, argv)]
    assert result.status == "success"
    assert result.structured_content == {
        "command": name,
        "args": argv,
        "stdout": "out\n",
        "stderr": "",
        "exitCode": 0,
        "truncated": False,
    }


def test_every_tool_and_flag_has_an_argv_case() -> None:
    covered = {(name, key) for name, arguments, _ in ARGV for key in arguments}
    for spec in read_only_command_tools():
        for key in spec.input_schema["properties"]:
            assert (spec.name, key) in covered
    assert {name for name, _, _ in ARGV} == set(READ_ONLY_COMMANDS)


# --- validation -------------------------------------------------------------------------------------

SINGLE = "{} must be a nonempty single-line string"
POSIX = "{} must be a workspace-relative POSIX path"

INVALID: list[tuple[str, dict[str, Any], str]] = [
    # Unknown keys first, in every tool, the first of them named when the name can be shown.
    *[
        (name, {"path": "a", "extra": 1}, f"{UNEXPECTED}: extra")
        for name in READ_ONLY_COMMANDS
        if name not in ("grep", "pwd")
    ],
    ("grep", {"pattern": "", "paths": [], "extra": 1}, f"{UNEXPECTED}: extra"),
    ("grep", {"pattern": "TODO", "path": "."}, f"{UNEXPECTED}: path"),
    ("pwd", {"path": "."}, f"{UNEXPECTED}: path"),
    ("cat", {"Path": "a"}, f"{UNEXPECTED}: Path"),
    ("cat", {"path": "a", "b.c_d-9": 1, "z": 2}, f"{UNEXPECTED}: b.c_d-9"),
    ("cat", {"path": "a", "x" * 64: 1}, f"{UNEXPECTED}: {'x' * 64}"),
    # A name that could read as a path, a secret or another line is not shown.
    ("cat", {"path": "a", "x" * 65: 1}, UNEXPECTED),
    ("cat", {"path": "a", "": 1}, UNEXPECTED),
    ("cat", {"path": "a", "two words": 1}, UNEXPECTED),
    ("cat", {"path": "a", "/etc/passwd": 1}, UNEXPECTED),
    ("cat", {"path": "a", "a\nb": 1}, UNEXPECTED),
    ("cat", {"path": "a", "sk-live1": 1}, UNEXPECTED),
    ("cat", {"path": "a", "pàth": 1}, UNEXPECTED),
    ("pwd", {"../x": 1, "y": 2}, UNEXPECTED),
    # grep: flags, then the pattern, then the paths.
    (
        "grep",
        {"pattern": "", "paths": [], "recursive": "yes"},
        "recursive must be boolean",
    ),
    (
        "grep",
        {"pattern": "", "paths": [], "ignoreCase": None},
        "ignoreCase must be boolean",
    ),
    (
        "grep",
        {"pattern": "", "paths": [], "fixedStrings": 1},
        "fixedStrings must be boolean",
    ),
    ("grep", {"paths": []}, SINGLE.format("pattern")),
    ("grep", {"pattern": "", "paths": []}, SINGLE.format("pattern")),
    ("grep", {"pattern": " \t", "paths": ["a"]}, SINGLE.format("pattern")),
    ("grep", {"pattern": "a\nb", "paths": ["a"]}, SINGLE.format("pattern")),
    ("grep", {"pattern": "a\rb", "paths": ["a"]}, SINGLE.format("pattern")),
    ("grep", {"pattern": "a\0b", "paths": ["a"]}, SINGLE.format("pattern")),
    ("grep", {"pattern": "x" * 1025, "paths": ["a"]}, SINGLE.format("pattern")),
    ("grep", {"pattern": "😀" * 513, "paths": ["a"]}, SINGLE.format("pattern")),
    ("grep", {"pattern": 5, "paths": ["a"]}, SINGLE.format("pattern")),
    ("grep", {"pattern": "x"}, "paths must contain 1 to 16 paths"),
    ("grep", {"pattern": "x", "paths": []}, "paths must contain 1 to 16 paths"),
    ("grep", {"pattern": "x", "paths": ["a"] * 17}, "paths must contain 1 to 16 paths"),
    ("grep", {"pattern": "x", "paths": "a.txt"}, "paths must contain 1 to 16 paths"),
    ("grep", {"pattern": "x", "paths": None}, "paths must contain 1 to 16 paths"),
    ("grep", {"pattern": "x", "paths": [1]}, SINGLE.format("paths[0]")),
    ("grep", {"pattern": "x", "paths": ["a", "/etc"]}, POSIX.format("paths[1]")),
    ("grep", {"pattern": "x", "paths": ["a", "b", "../c"]}, POSIX.format("paths[2]")),
    # ls: the flag, then the path.
    ("ls", {"all": "yes", "path": "/"}, "all must be boolean"),
    ("ls", {"path": None}, SINGLE.format("path")),
    ("ls", {"path": ""}, SINGLE.format("path")),
    ("ls", {"path": "/"}, POSIX.format("path")),
    # A required path that is absent is no path at all; null is a value.
    ("cat", {}, POSIX.format("path")),
    ("cat", {"path": None}, SINGLE.format("path")),
    ("cat", {"path": ["a"]}, SINGLE.format("path")),
    # find: type, path, maxDepth, name.
    ("find", {"type": "link", "path": "/"}, "type must be file or directory"),
    ("find", {"type": None}, "type must be file or directory"),
    ("find", {"type": "File"}, "type must be file or directory"),
    ("find", {"path": "/", "maxDepth": 99}, POSIX.format("path")),
    ("find", {"maxDepth": 33, "name": ""}, "maxDepth must be an integer from 0 to 32"),
    ("find", {"maxDepth": -1}, "maxDepth must be an integer from 0 to 32"),
    ("find", {"maxDepth": 1.5}, "maxDepth must be an integer from 0 to 32"),
    ("find", {"maxDepth": "2"}, "maxDepth must be an integer from 0 to 32"),
    ("find", {"maxDepth": True}, "maxDepth must be an integer from 0 to 32"),
    ("find", {"maxDepth": None}, "maxDepth must be an integer from 0 to 32"),
    ("find", {"name": ""}, SINGLE.format("name")),
    ("find", {"name": None}, SINGLE.format("name")),
    ("find", {"name": "a\nb"}, SINGLE.format("name")),
    # head and tail: lines, then the path.
    ("head", {"lines": 0, "path": "/"}, "lines must be an integer from 1 to 1000"),
    ("head", {"lines": 1001, "path": "a"}, "lines must be an integer from 1 to 1000"),
    ("tail", {"lines": None, "path": "a"}, "lines must be an integer from 1 to 1000"),
    ("tail", {"lines": 2.5, "path": "a"}, "lines must be an integer from 1 to 1000"),
    ("tail", {"lines": 5}, POSIX.format("path")),
    # wc: the metric, then the path.
    ("wc", {"metric": "chars", "path": "/"}, "metric must be lines, words, or bytes"),
    ("wc", {"metric": 1, "path": "a"}, "metric must be lines, words, or bytes"),
    ("wc", {"metric": ["lines"], "path": "a"}, "metric must be lines, words, or bytes"),
    ("wc", {"metric": "words"}, POSIX.format("path")),
    # sort and uniq: the flags, then the path.
    ("sort", {"reverse": "true", "path": "/"}, "reverse must be boolean"),
    ("sort", {"numeric": 0, "path": "a"}, "numeric must be boolean"),
    ("sort", {"unique": None, "path": "a"}, "unique must be boolean"),
    ("uniq", {"count": "yes", "path": "/"}, "count must be boolean"),
    ("uniq", {"ignoreCase": 1, "path": "a"}, "ignoreCase must be boolean"),
    # cut: fields (text, then the rule), the delimiter, the path.
    ("cut", {"path": "/", "delimiter": "ab"}, SINGLE.format("fields")),
    ("cut", {"fields": "", "path": "a"}, SINGLE.format("fields")),
    (
        "cut",
        {"fields": "-3", "delimiter": "ab"},
        "fields must be comma-separated field numbers or ranges",
    ),
    (
        "cut",
        {"fields": "1,,2", "path": "a"},
        "fields must be comma-separated field numbers or ranges",
    ),
    (
        "cut",
        {"fields": "a", "path": "a"},
        "fields must be comma-separated field numbers or ranges",
    ),
    (
        "cut",
        {"fields": "1 ", "path": "a"},
        "fields must be comma-separated field numbers or ranges",
    ),
    (
        "cut",
        {"fields": "١", "path": "a"},
        "fields must be comma-separated field numbers or ranges",
    ),
    (
        "cut",
        {"fields": "1", "delimiter": "ab", "path": "/"},
        "delimiter must be one character",
    ),
    (
        "cut",
        {"fields": "1", "delimiter": "", "path": "a"},
        "delimiter must be one character",
    ),
    (
        "cut",
        {"fields": "1", "delimiter": "\n", "path": "a"},
        "delimiter must be one character",
    ),
    (
        "cut",
        {"fields": "1", "delimiter": "\0", "path": "a"},
        "delimiter must be one character",
    ),
    (
        "cut",
        {"fields": "1", "delimiter": None, "path": "a"},
        "delimiter must be one character",
    ),
    (
        "cut",
        {"fields": "1", "delimiter": 44, "path": "a"},
        "delimiter must be one character",
    ),
    ("cut", {"fields": "1", "delimiter": ","}, POSIX.format("path")),
    # du: maxDepth, then the path.
    ("du", {"maxDepth": 33, "path": "/"}, "maxDepth must be an integer from 0 to 32"),
    ("du", {"maxDepth": 1}, POSIX.format("path")),
    ("stat", {}, POSIX.format("path")),
    ("file", {"path": 1}, SINGLE.format("path")),
]


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        pytest.param(*case, id=f"{case[0]}-{index}")
        for index, case in enumerate(INVALID)
    ],
)
async def test_invalid_arguments_are_refused_before_anything_runs(
    tmp_path: Path, name: str, arguments: dict[str, Any], message: str
) -> None:
    executor = RecordingExecutor()
    with pytest.raises(InvalidInput) as refused:
        await call(tmp_path, name, arguments, executor)
    assert refused.value.message == message
    assert executor.calls == []
    with pytest.raises(InvalidInput) as by_validate:
        tool(name).validate(arguments)
    assert by_validate.value.message == message


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        pytest.param("cut", {"path": "a", "fields": "3-"}, id="open-range"),
        pytest.param("cut", {"path": "a", "fields": "1-2,4-5,7"}, id="ranges"),
        pytest.param("grep", {"pattern": "x" * 1024, "paths": ["a"]}, id="1024-units"),
        pytest.param("grep", {"pattern": "😀" * 512, "paths": ["a"]}, id="512-astral"),
        pytest.param("grep", {"pattern": "x", "paths": ["a"] * 16}, id="16-paths"),
        pytest.param("head", {"path": "a", "lines": 1000.0}, id="integral-float"),
    ],
)
async def test_values_at_the_edges_of_the_rules_are_accepted(
    tmp_path: Path, name: str, arguments: dict[str, Any]
) -> None:
    result, executor = await call(tmp_path, name, arguments)
    assert result.status == "success"
    assert len(executor.calls) == 1


# --- definitions and options ------------------------------------------------------------------------


def test_the_14_tools_come_in_the_reference_order_with_its_definitions() -> None:
    tools = read_only_command_tools()
    assert [t.name for t in tools] == list(READ_ONLY_COMMANDS) == [
        "grep", "ls", "cat", "find", "head", "tail", "wc",
        "sort", "uniq", "cut", "stat", "file", "du", "pwd",
    ]  # fmt: skip
    for t in tools:
        definition = tool_definition(t).to_wire()
        assert definition["effects"] == ["read", "execute"]
        assert definition["requiresApproval"] is False
        assert definition["inputSchema"]["type"] == "object"
        assert definition["inputSchema"]["additionalProperties"] is False
        assert t.idempotent is True and is_rerunnable(t)


def test_schemas_match_the_reference() -> None:
    string, boolean = {"type": "string"}, {"type": "boolean"}
    depth = {"type": "integer", "minimum": 0, "maximum": 32}
    lines = {"type": "integer", "minimum": 1, "maximum": 1000}
    expected = {
        "grep": (
            {"pattern": string, "paths": {"type": "array", "items": string},
             "recursive": boolean, "ignoreCase": boolean, "fixedStrings": boolean},
            ["pattern", "paths"],
        ),
        "ls": ({"path": string, "all": boolean}, None),
        "cat": ({"path": string}, ["path"]),
        "find": (
            {"path": string, "name": string,
             "type": {"type": "string", "enum": ["file", "directory"]}, "maxDepth": depth},
            None,
        ),
        "head": ({"path": string, "lines": lines}, ["path"]),
        "tail": ({"path": string, "lines": lines}, ["path"]),
        "wc": ({"path": string, "metric": {"type": "string", "enum": ["lines", "words", "bytes"]}}, ["path"]),
        "sort": ({"path": string, "reverse": boolean, "numeric": boolean, "unique": boolean}, ["path"]),
        "uniq": ({"path": string, "count": boolean, "ignoreCase": boolean}, ["path"]),
        "cut": ({"path": string, "delimiter": string, "fields": string}, ["path", "fields"]),
        "stat": ({"path": string}, ["path"]),
        "file": ({"path": string}, ["path"]),
        "du": ({"path": string, "maxDepth": depth}, ["path"]),
        "pwd": ({}, None),
    }  # fmt: skip
    # Beyond the reference, what only documents an argument (docs/reference.md).
    added = ("description", "default", "minItems", "maxItems")
    for t in read_only_command_tools():
        properties, required = expected[t.name]
        schema = dict(t.input_schema)
        assert {
            key: {k: v for k, v in rules.items() if k not in added}
            for key, rules in schema.pop("properties").items()
        } == properties
        assert schema.pop("required", None) == required
        assert schema == {"type": "object", "additionalProperties": False}


def test_every_argument_has_a_description() -> None:
    for t in read_only_command_tools():
        for key, rules in t.input_schema["properties"].items():
            description = rules.get("description")
            assert isinstance(description, str) and description.strip(), (t.name, key)


REQUIRED_ONLY: dict[str, dict[str, Any]] = {
    "grep": {"pattern": "x", "paths": ["a"]},
    "cut": {"path": "a", "fields": "1"},
    "ls": {},
    "find": {},
    "pwd": {},
}


@pytest.mark.parametrize("name", READ_ONLY_COMMANDS)
async def test_a_schema_default_is_what_an_absent_argument_means(
    tmp_path: Path, name: str
) -> None:
    arguments = REQUIRED_ONLY.get(name, {"path": "a"})
    _, absent = await call(tmp_path, name, arguments)
    for key, rules in tool(name).input_schema["properties"].items():
        if "default" in rules:
            given = {**arguments, key: rules["default"]}
            _, explicit = await call(tmp_path, name, given)
            assert explicit.calls == absent.calls, key


def test_descriptions_are_the_reference_ones() -> None:
    assert {t.name: t.description for t in read_only_command_tools()} == {
        "grep": "Search text in workspace files",
        "ls": "List one workspace directory",
        "cat": "Read one workspace text file",
        "find": "Find workspace files or directories by name",
        "head": "Read the first lines of one workspace text file",
        "tail": "Read the last lines of one workspace text file",
        "wc": "Count lines, words, or bytes in one workspace file",
        "sort": "Sort lines from one workspace text file",
        "uniq": "Filter adjacent duplicate lines from one workspace text file",
        "cut": "Select delimited fields from one workspace text file",
        "stat": "Read metadata for one workspace path",
        "file": "Identify the type of one workspace file",
        "du": "Summarize disk usage below one workspace path",
        "pwd": "Return the executor workspace directory",
    }


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_entries": 0}, "max_entries must be an integer from 1 to 10000"),
        ({"max_entries": 10_001}, "max_entries must be an integer from 1 to 10000"),
        ({"max_entries": True}, "max_entries must be an integer from 1 to 10000"),
        ({"max_entries": 1.0}, "max_entries must be an integer from 1 to 10000"),
        (
            {"max_output_bytes": 0},
            "max_output_bytes must be an integer from 1 to 1048576",
        ),
        (
            {"max_output_bytes": 1_048_577},
            "max_output_bytes must be an integer from 1 to 1048576",
        ),
        ({"max_error_bytes": -1}, "max_error_bytes must be an integer from 1 to 65536"),
        (
            {"max_error_bytes": 65_537},
            "max_error_bytes must be an integer from 1 to 65536",
        ),
    ],
)
def test_out_of_range_options_are_refused(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=f"^{message}$"):
        read_only_command_tools(**options)


def test_options_at_their_bounds_are_accepted() -> None:
    low = read_only_command_tools(max_entries=1, max_output_bytes=1, max_error_bytes=1)
    high = read_only_command_tools(
        max_entries=10_000, max_output_bytes=1_048_576, max_error_bytes=65_536
    )
    assert low[0].limits.max_entries == 1
    assert high[0].limits.max_output_bytes == 1_048_576
    assert read_only_command_tools()[0].limits.max_error_bytes == 8192


# --- permissions ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("execute", "with_executor"),
    [
        pytest.param(False, True, id="no-execute"),
        pytest.param(True, False, id="no-executor"),
    ],
)
async def test_running_needs_execute_and_an_executor(
    tmp_path: Path, execute: bool, with_executor: bool
) -> None:
    executor = RecordingExecutor()
    sandbox = Sandbox(
        tools=["cat"],
        execute=execute,
        workspace=tmp_path,
        executor=executor if with_executor else None,
    )
    registry = ToolRegistry(read_only_command_tools())
    with pytest.raises(
        PermissionDenied,
        match="^Permission denied: execution requires an enabled SandboxExecutor$",
    ):
        await registry.call(
            {"id": "c", "name": "cat", "arguments": {"path": "a"}}, sandbox
        )
    assert executor.calls == []


async def test_a_tool_the_sandbox_does_not_list_is_denied(tmp_path: Path) -> None:
    executor = RecordingExecutor()
    sandbox = Sandbox(
        tools=["grep"], execute=True, workspace=tmp_path, executor=executor
    )
    with pytest.raises(PermissionDenied, match="^Permission denied: tools:cat$"):
        await ToolRegistry(read_only_command_tools()).call(
            {"id": "c", "name": "cat", "arguments": {"path": "a"}}, sandbox
        )
    assert executor.calls == []
