"""Path attacks on the read-only commands are refused before anything runs; names that look like
options reach the program as `./-name`, and the real programs read them as files."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from interaction_worker import Sandbox, ToolRegistry
from interaction_worker.errors import InvalidInput, PermissionDenied
from interaction_worker.nodes import CommandResult
from interaction_worker.tools import SubprocessExecutor, read_only_command_tools

POSIX = "must be a workspace-relative POSIX path"
SINGLE = "must be a nonempty single-line string"


class RecordingExecutor:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    async def run(
        self, command: str, args: Sequence[str], workspace: Path
    ) -> CommandResult:
        self.calls.append((command, list(args)))
        return CommandResult("", "", 0)


def sandbox(workspace: Path, executor: Any) -> Sandbox:
    return Sandbox(tools=["*"], execute=True, workspace=workspace, executor=executor)


async def call(box: Sandbox, name: str, arguments: dict[str, Any]) -> Any:
    registry = ToolRegistry(read_only_command_tools())
    return await registry.call({"id": "c", "name": name, "arguments": arguments}, box)


# Each attack, as the path of every tool that takes one (and as one of grep's paths).
ATTACKS = [
    pytest.param("/etc/passwd", POSIX, id="absolute"),
    pytest.param("/", POSIX, id="root"),
    pytest.param("\\etc", POSIX, id="backslash-rooted"),
    pytest.param("\\\\server\\share", POSIX, id="unc"),
    pytest.param("C:\\Windows", POSIX, id="drive-backslash"),
    pytest.param("C:/Windows", POSIX, id="drive-slash"),
    pytest.param("a\\..\\..\\b", POSIX, id="backslash-inside"),
    pytest.param("..", POSIX, id="dotdot"),
    pytest.param("../x", POSIX, id="dotdot-first"),
    pytest.param("a/../../x", POSIX, id="dotdot-middle"),
    pytest.param("a/..", POSIX, id="dotdot-last"),
    pytest.param("./..", POSIX, id="dot-then-dotdot"),
    pytest.param("a//b", POSIX, id="empty-segment"),
    pytest.param("dir/", POSIX, id="trailing-slash"),
    pytest.param("a\0b", SINGLE, id="nul"),
    pytest.param("a\nb", SINGLE, id="newline"),
    pytest.param("a\rb", SINGLE, id="carriage-return"),
    pytest.param("", SINGLE, id="empty"),
    pytest.param("  ", SINGLE, id="blank"),
]
PATH_TOOLS = [
    ("ls", {}),
    ("cat", {}),
    ("find", {}),
    ("head", {}),
    ("tail", {}),
    ("wc", {}),
    ("sort", {}),
    ("uniq", {}),
    ("cut", {"fields": "1"}),
    ("stat", {}),
    ("file", {}),
    ("du", {}),
]


@pytest.mark.parametrize(("path", "rule"), ATTACKS)
async def test_path_attacks_are_refused_by_every_tool_before_anything_runs(
    tmp_path: Path, path: str, rule: str
) -> None:
    executor = RecordingExecutor()
    box = sandbox(tmp_path, executor)
    for name, extra in PATH_TOOLS:
        with pytest.raises(InvalidInput) as refused:
            await call(box, name, {**extra, "path": path})
        assert refused.value.message == f"path {rule}", name
    with pytest.raises(InvalidInput) as refused:
        await call(box, "grep", {"pattern": "x", "paths": ["ok", path]})
    assert refused.value.message == f"paths[1] {rule}"
    assert executor.calls == []


@pytest.fixture
def escape(tmp_path: Path) -> Path:
    """A workspace holding `out` (a symlink to a directory outside), `out.txt` (to a file outside),
    `in` (a symlink that stays inside) and `ok.txt`."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n", encoding="utf-8")
    workspace = tmp_path / "workspace"
    (workspace / "docs").mkdir(parents=True)
    (workspace / "ok.txt").write_text("ok\n", encoding="utf-8")
    (workspace / "out").symlink_to(outside)
    (workspace / "out.txt").symlink_to(outside / "secret.txt")
    (workspace / "in").symlink_to(workspace / "docs")
    return workspace


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        pytest.param("cat", {"path": "out.txt"}, id="file-link"),
        pytest.param("cat", {"path": "out/secret.txt"}, id="through-a-dir-link"),
        pytest.param("ls", {"path": "out"}, id="ls-dir-link"),
        pytest.param("find", {"path": "out"}, id="find-dir-link"),
        pytest.param("du", {"path": "out"}, id="du-dir-link"),
        pytest.param("stat", {"path": "out.txt"}, id="stat-link"),
        pytest.param("head", {"path": "in/../out.txt"}, id="dotdot-never-reaches"),
        pytest.param(
            "grep", {"pattern": "s", "paths": ["ok.txt", "out.txt"]}, id="grep-one-of"
        ),
    ],
)
async def test_a_symlink_out_of_the_workspace_is_permission_denied_before_anything_runs(
    escape: Path, name: str, arguments: dict[str, Any]
) -> None:
    executor = RecordingExecutor()
    with pytest.raises((PermissionDenied, InvalidInput)) as refused:
        await call(sandbox(escape, executor), name, arguments)
    if name != "head":  # `..` is refused by the path rule already
        assert refused.type is PermissionDenied
        assert refused.value.message == "Permission denied: workspace path"
    assert executor.calls == []


async def test_a_symlink_that_stays_inside_is_followed(escape: Path) -> None:
    (escape / "docs" / "a.txt").write_text("inside\n", encoding="utf-8")
    result = await call(
        sandbox(escape, SubprocessExecutor()), "cat", {"path": "in/a.txt"}
    )
    assert (result.status, result.content) == ("success", "inside\n")


async def test_recursive_grep_does_not_follow_a_symlink_out_of_the_workspace(
    escape: Path,
) -> None:
    result = await call(
        sandbox(escape, SubprocessExecutor()),
        "grep",
        {"pattern": "secret", "paths": ["."], "recursive": True},
    )
    # Nothing inside says "secret": grep -r skips the links it meets while recursing.
    assert result.status == "failed"
    assert result.structured_content["exitCode"] == 1
    assert result.content == ""


@pytest.mark.parametrize("name", ["-rf", "--help", "-n", "--version"])
async def test_option_looking_names_reach_the_program_as_files(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / name).write_text(f"the file {name}\n", encoding="utf-8")
    box = sandbox(tmp_path, SubprocessExecutor())
    checks: list[tuple[str, dict[str, Any]]] = [
        ("cat", {"path": name}),
        ("head", {"path": name, "lines": 1}),
        ("grep", {"pattern": "the", "paths": [name]}),
        ("find", {"path": name}),
    ]
    for tool, arguments in checks:
        result = await call(box, tool, arguments)
        assert result.status == "success", (tool, result)
        assert f"./{name}" in result.structured_content["args"]
        if tool in ("cat", "head", "grep"):
            assert result.content.endswith(f"the file {name}\n")
    listing = await call(box, "find", {"path": name})
    assert listing.content == f"./{name}\n"


async def test_a_pattern_or_name_with_shell_syntax_is_never_run_by_a_shell(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text(
        "$(touch pwned) `touch pwned`; x\n", encoding="utf-8"
    )
    box = sandbox(tmp_path, SubprocessExecutor())
    grep = await call(
        box,
        "grep",
        {"pattern": "$(touch pwned)", "paths": ["a.txt"], "fixedStrings": True},
    )
    assert grep.content == "1:$(touch pwned) `touch pwned`; x\n"
    find = await call(box, "find", {"name": "*; touch pwned"})
    assert find.status == "success"
    cat = await call(box, "cat", {"path": "a.txt; touch pwned"})
    assert cat.status == "failed"
    assert not (tmp_path / "pwned").exists()


async def test_sandbox_run_checks_execute_then_the_paths_then_runs(
    escape: Path,
) -> None:
    executor = RecordingExecutor()
    denied = Sandbox(execute=False, workspace=escape, executor=executor)
    with pytest.raises(PermissionDenied, match="requires an enabled SandboxExecutor"):
        await denied.run("cat", ["--", "out.txt"], paths=["out.txt"])
    box = Sandbox(execute=True, workspace=escape, executor=executor)
    with pytest.raises(PermissionDenied, match="^Permission denied: workspace path$"):
        await box.run("cat", ["--", "ok.txt", "out.txt"], paths=["ok.txt", "out.txt"])
    assert executor.calls == []
    await box.run("cat", ["--", "ok.txt", "./-x"], paths=["ok.txt", "./-x"])
    assert executor.calls == [("cat", ["--", "ok.txt", "./-x"])]
