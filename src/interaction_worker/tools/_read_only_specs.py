"""The 14 read-only commands of the reference (section 7.3): schema, description and argv builder.

Each builder checks its arguments in the reference's order and returns the argv and the workspace
paths in it. Beyond the reference, `grep` recurses with `-r`, which never follows a symlink that
the workspace holds, where `-R` follows them all; and the commands that walk below a path (`grep -r`,
`find`, `du`, and `ls` listing a directory) say how to skip the protected entries they would meet
(docs/tools.md), in each program's own terms: an exact path for `find -path` and `du --exclude`, a
name for `ls --ignore` (one directory) and `grep --exclude-dir` / `--exclude`, which match names only
and so also skip other entries of the same name.
"""

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..contracts import is_safe_message
from ..errors import InvalidInput
from ..nodes import Descent, Hidden
from ._arguments import (
    MAX_PATHS,
    MISSING,
    delimiter,
    flag,
    integer,
    paths,
    relative_path,
    text,
)

UNEXPECTED = "Unexpected command argument"
# An argument name shown back in a message: short printable ASCII, no space, slash or quote.
_SHOWABLE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_FIELDS = re.compile(r"[0-9]+(?:-[0-9]*)?(?:,[0-9]+(?:-[0-9]*)?)*")
_GLOB_CHARACTERS = re.compile(r"[*?[\]\\]")


@dataclass(frozen=True)
class CommandLine:
    args: list[str]
    paths: list[str]  # the workspace paths among `args`
    descent: Descent | None = None  # how the program walks below them


def _literal(text: str) -> str:
    """`text` as a shell pattern (fnmatch) that matches only itself."""
    return _GLOB_CHARACTERS.sub(lambda match: "\\" + match.group(), text)


@dataclass(frozen=True)
class ReadOnlyCommandSpec:
    name: str
    description: str
    input_schema: Mapping[str, Any]
    build: Callable[[Mapping[str, Any]], CommandLine]


def _schema(properties: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
    }
    if required:
        schema["required"] = list(required)
    return schema


def _exact_keys(arguments: Mapping[str, Any], allowed: Sequence[str]) -> None:
    """Refuse the first argument that is not allowed, by name (beyond the reference, whose message
    names none) when the name is showable and the message still safe (`sk-…` reads as a key)."""
    for key in arguments:
        if key not in allowed:
            named = f"{UNEXPECTED}: {key}"
            showable = _SHOWABLE.fullmatch(key) and is_safe_message(named)
            raise InvalidInput(named if showable else UNEXPECTED)


def _arguments(
    arguments: Mapping[str, Any], allowed: Sequence[str]
) -> Callable[[str], Any]:
    _exact_keys(arguments, allowed)
    return lambda key: arguments.get(key, MISSING)


def _grep(arguments: Mapping[str, Any]) -> CommandLine:
    get = _arguments(
        arguments, ("pattern", "paths", "recursive", "ignoreCase", "fixedStrings")
    )
    args = ["-n"]
    if flag(get("recursive"), "recursive"):
        args.append("-r")
    if flag(get("ignoreCase"), "ignoreCase"):
        args.append("-i")
    if flag(get("fixedStrings"), "fixedStrings"):
        args.append("-F")
    pattern = text(get("pattern"), "pattern", required=True)
    assert pattern is not None
    files = paths(get("paths"))
    line = [*args, "--", pattern, *files]
    if "-r" not in args:
        return CommandLine(line, files)

    def skip(hidden: Sequence[Hidden]) -> list[str]:
        options = {
            f"--exclude-dir={_literal(h.name)}"
            if h.directory
            else f"--exclude={_literal(h.name)}": None
            for h in hidden
        }
        return [*args, *options, "--", pattern, *files]

    return CommandLine(line, files, Descent(tuple(files), None, skip))


def _ls(arguments: Mapping[str, Any]) -> CommandLine:
    get = _arguments(arguments, ("path", "all"))
    all_ = ["-a"] if flag(get("all"), "all") else []
    path = relative_path(get("path"), "path", ".")

    def skip(hidden: Sequence[Hidden]) -> list[str]:
        ignore = [f"--ignore={_literal(h.name)}" for h in hidden]
        return ["-1", *all_, *ignore, "--", path]

    return CommandLine(["-1", *all_, "--", path], [path], Descent((path,), 1, skip))


def _find(arguments: Mapping[str, Any]) -> CommandLine:
    get = _arguments(arguments, ("path", "name", "type", "maxDepth"))
    kind = get("type")
    if kind is not MISSING and kind not in ("file", "directory"):
        raise InvalidInput("type must be file or directory")
    # No `--` here: find takes its paths first, and the `./` prefix keeps a `-` name a path.
    path = relative_path(get("path"), "path", ".")
    depth = integer(get("maxDepth"), "maxDepth", 8, 0, 32)
    start = [path, "-maxdepth", str(depth)]
    tests: list[str] = []
    if kind is not MISSING:
        tests += ["-type", "f" if kind == "file" else "d"]
    name = text(get("name"), "name")
    if name is not None:
        tests += ["-name", name]

    def skip(hidden: Sequence[Hidden]) -> list[str]:
        # ( -path A -o -path B ) -prune -o TESTS -print: the entries are neither printed nor entered.
        either: list[str] = []
        for h in hidden:
            either += [*(["-o"] if either else []), "-path", _literal(h.path)]
        return [*start, "(", *either, ")", "-prune", "-o", *tests, "-print"]

    descent = Descent((path,), depth, skip)
    return CommandLine([*start, *tests, "-print"], [path], descent)


def _lines() -> Callable[[Mapping[str, Any]], CommandLine]:
    def build(arguments: Mapping[str, Any]) -> CommandLine:
        get = _arguments(arguments, ("path", "lines"))
        lines = integer(get("lines"), "lines", 20, 1, 1_000)
        path = relative_path(get("path"), "path")
        return CommandLine(["-n", str(lines), "--", path], [path])

    return build


def _wc(arguments: Mapping[str, Any]) -> CommandLine:
    get = _arguments(arguments, ("path", "metric"))
    metric = get("metric")
    if metric is MISSING or metric is None:  # `?? "lines"`: null too
        metric = "lines"
    options = {"lines": "-l", "words": "-w", "bytes": "-c"}
    if not isinstance(metric, str) or metric not in options:
        raise InvalidInput("metric must be lines, words, or bytes")
    path = relative_path(get("path"), "path")
    return CommandLine([options[metric], "--", path], [path])


def _flags(allowed: Mapping[str, str]) -> Callable[[Mapping[str, Any]], CommandLine]:
    """A tool of one path and boolean flags, each adding its option in the order given."""

    def build(arguments: Mapping[str, Any]) -> CommandLine:
        get = _arguments(arguments, ("path", *allowed))
        args = [option for key, option in allowed.items() if flag(get(key), key)]
        path = relative_path(get("path"), "path")
        return CommandLine([*args, "--", path], [path])

    return build


def _cut(arguments: Mapping[str, Any]) -> CommandLine:
    get = _arguments(arguments, ("path", "delimiter", "fields"))
    fields = text(get("fields"), "fields", required=True)
    assert fields is not None
    if not _FIELDS.fullmatch(fields):
        raise InvalidInput("fields must be comma-separated field numbers or ranges")
    separator = delimiter(get("delimiter"))
    path = relative_path(get("path"), "path")
    options = [] if separator is None else ["-d", separator]
    return CommandLine([*options, "-f", fields, "--", path], [path])


def _du(arguments: Mapping[str, Any]) -> CommandLine:
    get = _arguments(arguments, ("path", "maxDepth"))
    depth = integer(get("maxDepth"), "maxDepth", 1, 0, 32)
    path = relative_path(get("path"), "path")
    options = ["-k", "-d", str(depth)]

    def skip(hidden: Sequence[Hidden]) -> list[str]:
        # du reads the whole tree whatever its -d: excluded entries are neither shown nor counted.
        return [
            *options,
            *(f"--exclude={_literal(h.path)}" for h in hidden),
            "--",
            path,
        ]

    return CommandLine([*options, "--", path], [path], Descent((path,), None, skip))


def _pwd(arguments: Mapping[str, Any]) -> CommandLine:
    _exact_keys(arguments, ())
    return CommandLine([], [])


_PATH_ONLY = _flags({})


def _string(description: str, **rules: Any) -> dict[str, Any]:
    return {"type": "string", **rules, "description": description}


def _boolean(description: str) -> dict[str, Any]:
    return {"type": "boolean", "default": False, "description": description}


def _integer(low: int, high: int, default: int, description: str) -> dict[str, Any]:
    return {
        "type": "integer",
        "minimum": low,
        "maximum": high,
        "default": default,
        "description": description,
    }


def _path(description: str, default: str | None = None) -> dict[str, Any]:
    rules = {} if default is None else {"default": default}
    return _string(f"{description}; relative to the workspace, without `..`", **rules)


_TEXT_FILE = _path("The text file to read")
_PATHS = {
    "type": "array",
    "items": {"type": "string"},
    "minItems": 1,
    "maxItems": MAX_PATHS,
    "description": f"1 to {MAX_PATHS} files or directories to search; relative to the "
    "workspace, without `..`",
}
_LINES = _integer(1, 1_000, 20, "How many lines, 1 to 1000")


def _spec(
    name: str,
    description: str,
    build: Callable[[Mapping[str, Any]], CommandLine],
    required: Sequence[str] = (),
    /,
    **properties: Any,
) -> ReadOnlyCommandSpec:
    return ReadOnlyCommandSpec(name, description, _schema(properties, required), build)


# One row per tool: name, description, argv builder, required keys, then the schema's properties.
# The descriptions are the reference's; each property also says what it means, its default and its
# limits, for the agent and for `interaction-worker tools` (docs/tools.md).
# fmt: off
SPECS: tuple[ReadOnlyCommandSpec, ...] = (
    _spec("grep", "Search text in workspace files", _grep, ("pattern", "paths"),
          pattern=_string("What to search for, one line: a basic regular expression (as grep "
                          "reads it by default), or exact text with fixedStrings"),
          paths=_PATHS,
          recursive=_boolean("Search the directories among paths and everything below them "
                             "(symbolic links inside are not followed)"),
          ignoreCase=_boolean("Match upper and lower case alike"),
          fixedStrings=_boolean("Take pattern as exact text, not a regular expression")),
    _spec("ls", "List one workspace directory", _ls, (),
          path=_path("The directory to list", "."),
          all=_boolean("Also list entries whose names begin with a dot")),
    _spec("cat", "Read one workspace text file", _PATH_ONLY, ("path",), path=_TEXT_FILE),
    _spec("find", "Find workspace files or directories by name", _find, (),
          path=_path("The directory to search from", "."),
          name=_string("A shell pattern that the entry's name (not its path) must match, "
                       "such as `*.py`"),
          type=_string("Only files or only directories", enum=["file", "directory"]),
          maxDepth=_integer(0, 32, 8, "How many levels below path to descend, 0 to 32")),
    _spec("head", "Read the first lines of one workspace text file", _lines(), ("path",),
          path=_TEXT_FILE, lines=_LINES),
    _spec("tail", "Read the last lines of one workspace text file", _lines(), ("path",),
          path=_TEXT_FILE, lines=_LINES),
    _spec("wc", "Count lines, words, or bytes in one workspace file", _wc, ("path",),
          path=_path("The file to count in"),
          metric=_string("What to count", enum=["lines", "words", "bytes"], default="lines")),
    _spec("sort", "Sort lines from one workspace text file",
          _flags({"reverse": "-r", "numeric": "-n", "unique": "-u"}), ("path",),
          path=_path("The text file whose lines to sort"),
          reverse=_boolean("Sort in descending order"),
          numeric=_boolean("Compare lines by their leading number"),
          unique=_boolean("Keep one line of each run of equal lines")),
    _spec("uniq", "Filter adjacent duplicate lines from one workspace text file",
          _flags({"count": "-c", "ignoreCase": "-i"}), ("path",),
          path=_path("The text file to filter"),
          count=_boolean("Prefix each line with how many times it was repeated"),
          ignoreCase=_boolean("Compare lines ignoring upper and lower case")),
    _spec("cut", "Select delimited fields from one workspace text file", _cut,
          ("path", "fields"), path=_path("The text file to cut"),
          delimiter=_string("The one character that separates fields (default: tab)"),
          fields=_string("The fields to keep, counted from 1: numbers and ranges separated by "
                         "commas, such as `1,3-5` or `2-`")),
    _spec("stat", "Read metadata for one workspace path", _PATH_ONLY, ("path",),
          path=_path("The file or directory")),
    _spec("file", "Identify the type of one workspace file", _PATH_ONLY, ("path",),
          path=_path("The file to identify")),
    _spec("du", "Summarize disk usage below one workspace path", _du, ("path",),
          path=_path("The directory or file to measure"),
          maxDepth=_integer(0, 32, 1, "How many levels below path to report, 0 to 32")),
    _spec("pwd", "Return the executor workspace directory", _pwd),
)
# fmt: on
