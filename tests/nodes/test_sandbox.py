"""Sandbox: default-deny permissions, policy validation, workspace file access and command runs (reference section 9)."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from interaction_worker import ConfigurationError, Sandbox
from interaction_worker.errors import InvalidInput, PermissionDenied
from interaction_worker.nodes import CommandResult, PermissionKind


class RecordingExecutor:
    """A CommandExecutor that records every call and answers with a fixed result."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], Path]] = []

    async def run(
        self, command: str, args: Sequence[str], workspace: Path
    ) -> CommandResult:
        self.calls.append((command, list(args), workspace))
        return CommandResult(stdout="out\n", stderr="", exit_code=0)


def real_path(path: Path) -> Path:
    return path.resolve()


# --- permissions --------------------------------------------------------------------------------


def test_an_empty_policy_denies_everything() -> None:
    sandbox = Sandbox()
    for kind in ("tools", "mcp", "skills", "network"):
        assert sandbox.allows(kind, "anything") is False
        assert sandbox.allows(kind, "*") is False
    assert (sandbox.read, sandbox.write, sandbox.execute) == (False, False, False)


@pytest.mark.parametrize(
    ("policy", "kind", "name", "allowed"),
    [
        pytest.param({"tools": ["lookup"]}, "tools", "lookup", True, id="exact-name"),
        pytest.param(
            {"tools": ["lookup"]}, "tools", "Lookup", False, id="case-sensitive"
        ),
        pytest.param(
            {"tools": ["lookup"]}, "tools", "look", False, id="no-prefix-match"
        ),
        pytest.param(
            {"tools": ["lookup"]}, "tools", "lookup2", False, id="no-extension-match"
        ),
        pytest.param(
            {"tools": ["look*"]}, "tools", "lookup", False, id="star-is-not-a-glob"
        ),
        pytest.param({"tools": ["*"]}, "tools", "anything", True, id="star-grants-all"),
        pytest.param(
            {"tools": ["*"]}, "mcp", "files", False, id="star-stays-in-its-kind"
        ),
        pytest.param(
            {"tools": ["files"]}, "mcp", "files", False, id="kinds-are-separate"
        ),
        pytest.param({"mcp": ["files", "docs"]}, "mcp", "docs", True, id="mcp-list"),
        pytest.param({"skills": ["plan"]}, "skills", "plan", True, id="skills-list"),
        pytest.param(
            {"network": ["https://api.search.brave.com"]},
            "network",
            "https://api.search.brave.com",
            True,
            id="network-origin",
        ),
        pytest.param(
            {"network": ["https://api.search.brave.com"]},
            "network",
            "https://api.search.brave.com/",
            False,
            id="network-exact-string",
        ),
        pytest.param({"tools": []}, "tools", "lookup", False, id="empty-list"),
    ],
)
def test_allows(
    policy: dict[str, Any], kind: PermissionKind, name: str, allowed: bool
) -> None:
    assert Sandbox(**policy).allows(kind, name) is allowed


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        pytest.param({}, (False, False, False), id="absent-denies"),
        pytest.param({"read": True}, (True, False, False), id="read"),
        pytest.param({"write": True}, (False, True, False), id="write"),
        pytest.param({"execute": True}, (False, False, True), id="execute"),
        pytest.param(
            {"read": False, "write": False, "execute": False},
            (False, False, False),
            id="explicit-false",
        ),
        pytest.param(
            {"read": True, "write": True, "execute": True},
            (True, True, True),
            id="all",
        ),
    ],
)
def test_flags(flags: dict[str, Any], expected: tuple[bool, bool, bool]) -> None:
    sandbox = Sandbox(**flags)
    assert (sandbox.read, sandbox.write, sandbox.execute) == expected


def test_check_passes_when_granted() -> None:
    Sandbox(tools=["lookup"]).check("tools", "lookup")
    Sandbox(mcp=["*"]).check("mcp", "files")


@pytest.mark.parametrize(
    ("policy", "kind", "name", "message"),
    [
        pytest.param(
            {}, "tools", "lookup", "Permission denied: tools:lookup", id="empty-policy"
        ),
        pytest.param(
            {"tools": ["other"]},
            "tools",
            "lookup",
            "Permission denied: tools:lookup",
            id="other-tool",
        ),
        pytest.param(
            {"tools": ["*"]},
            "mcp",
            "files",
            "Permission denied: mcp:files",
            id="other-kind",
        ),
        pytest.param(
            {},
            "network",
            "https://api.search.brave.com",
            "Permission denied: network:https://api.search.brave.com",
            id="network",
        ),
    ],
)
def test_check_raises_permission_denied(
    policy: dict[str, Any], kind: PermissionKind, name: str, message: str
) -> None:
    with pytest.raises(PermissionDenied) as caught:
        Sandbox(**policy).check(kind, name)
    assert caught.value.message == message
    assert str(caught.value) == message
    assert caught.value.code == "PERMISSION_DENIED"
    assert caught.value.status == 403


def test_the_policy_lists_are_copied() -> None:
    tools = ["lookup"]
    sandbox = Sandbox(tools=tools)
    tools.append("other")
    tools.remove("lookup")
    assert sandbox.allows("tools", "lookup") is True
    assert sandbox.allows("tools", "other") is False


def test_lists_accept_any_sequence_of_strings() -> None:
    sandbox = Sandbox(tools=("a", "b"), network=["https://x.test"])
    assert sandbox.allows("tools", "b") is True
    assert sandbox.allows("network", "https://x.test") is True


# --- policy validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        pytest.param({"read": 1}, "Invalid sandbox read permission", id="read-int"),
        pytest.param(
            {"read": "yes"}, "Invalid sandbox read permission", id="read-string"
        ),
        pytest.param({"write": 0}, "Invalid sandbox write permission", id="write-int"),
        pytest.param(
            {"execute": "true"},
            "Invalid sandbox execute permission",
            id="execute-string",
        ),
        pytest.param(
            {"tools": "lookup"}, "Invalid sandbox tools permissions", id="tools-string"
        ),
        pytest.param(
            {"mcp": "files"}, "Invalid sandbox mcp permissions", id="mcp-string"
        ),
        pytest.param(
            {"tools": {"lookup": True}},
            "Invalid sandbox tools permissions",
            id="tools-dict",
        ),
        pytest.param({"tools": 5}, "Invalid sandbox tools permissions", id="tools-int"),
        pytest.param(
            {"tools": ["lookup", 1]},
            "Invalid sandbox tools permissions",
            id="non-string-entry",
        ),
        pytest.param(
            {"skills": [None]}, "Invalid sandbox skills permissions", id="none-entry"
        ),
        pytest.param(
            {"tools": [""]}, "Invalid sandbox tools permissions", id="empty-entry"
        ),
        pytest.param(
            {"network": ["  "]}, "Invalid sandbox network permissions", id="blank-entry"
        ),
        pytest.param(
            {"tools": ["\u00a0\u2028\ufeff"]},
            "Invalid sandbox tools permissions",
            id="unicode-blank-entry",
        ),
    ],
)
def test_invalid_policy_is_a_configuration_error(
    policy: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Sandbox(**policy)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "entry",
    [
        # JavaScript's trim() does not remove these, so the reference treats them as non-blank names.
        pytest.param("\x1c", id="file-separator"),
        pytest.param("\x85", id="next-line"),
    ],
)
def test_blank_means_blank_for_javascript_trim(entry: str) -> None:
    assert Sandbox(tools=[entry]).allows("tools", entry) is True


def test_the_flag_is_checked_before_the_lists() -> None:
    with pytest.raises(ConfigurationError) as caught:
        Sandbox(tools="lookup", read=1)  # type: ignore[arg-type]
    assert str(caught.value) == "Invalid sandbox read permission"


# --- read_text ----------------------------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("héllo\n", encoding="utf-8")
    (root / "sub").mkdir()
    (root / "sub" / "deep.txt").write_text("deep", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")
    return root


async def test_read_text_requires_read(workspace: Path) -> None:
    sandbox = Sandbox(workspace=workspace, write=True, execute=True, tools=["*"])
    with pytest.raises(PermissionDenied) as caught:
        await sandbox.read_text("notes.txt")
    assert caught.value.message == "Permission denied: filesystem:read"


async def test_read_text_permission_comes_before_the_path(workspace: Path) -> None:
    with pytest.raises(PermissionDenied) as caught:
        await Sandbox(workspace=workspace).read_text("../secret.txt")
    assert caught.value.message == "Permission denied: filesystem:read"


@pytest.mark.parametrize(
    ("path", "text"),
    [
        pytest.param("notes.txt", "héllo\n", id="file"),
        pytest.param("./notes.txt", "héllo\n", id="dot-prefix"),
        pytest.param("sub/deep.txt", "deep", id="nested"),
        pytest.param("sub/../notes.txt", "héllo\n", id="dotdot-staying-inside"),
    ],
)
async def test_read_text_reads_a_workspace_file(
    workspace: Path, path: str, text: str
) -> None:
    assert await Sandbox(workspace=workspace, read=True).read_text(path) == text


async def test_read_text_with_a_relative_workspace(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workspace.parent)
    sandbox = Sandbox(workspace="ws", read=True)
    assert await sandbox.read_text("notes.txt") == "héllo\n"


async def test_read_text_through_a_symlink_inside(workspace: Path) -> None:
    (workspace / "link.txt").symlink_to(workspace / "sub" / "deep.txt")
    (workspace / "dirlink").symlink_to("sub", target_is_directory=True)
    sandbox = Sandbox(workspace=workspace, read=True)
    assert await sandbox.read_text("link.txt") == "deep"
    assert await sandbox.read_text("dirlink/deep.txt") == "deep"


@pytest.mark.parametrize(
    "make_path",
    [
        pytest.param(lambda ws: "../secret.txt", id="dotdot"),
        pytest.param(lambda ws: "sub/../../secret.txt", id="nested-dotdot"),
        pytest.param(lambda ws: str(ws.parent / "secret.txt"), id="absolute-outside"),
        pytest.param(lambda ws: "/etc/passwd", id="absolute-system"),
        pytest.param(lambda ws: "nul\0byte", id="nul-byte"),
    ],
)
async def test_read_text_refuses_paths_outside(workspace: Path, make_path: Any) -> None:
    with pytest.raises(PermissionDenied) as caught:
        await Sandbox(workspace=workspace, read=True).read_text(make_path(workspace))
    assert caught.value.message == "Permission denied: workspace path"


async def test_read_text_refuses_a_symlink_leading_outside(workspace: Path) -> None:
    (workspace / "escape.txt").symlink_to(workspace.parent / "secret.txt")
    (workspace / "escape-dir").symlink_to(workspace.parent, target_is_directory=True)
    sandbox = Sandbox(workspace=workspace, read=True)
    for path in ("escape.txt", "escape-dir/secret.txt"):
        with pytest.raises(PermissionDenied) as caught:
            await sandbox.read_text(path)
        assert caught.value.message == "Permission denied: workspace path"


async def test_read_text_absolute_path_inside_is_allowed(workspace: Path) -> None:
    sandbox = Sandbox(workspace=workspace, read=True)
    assert await sandbox.read_text(str(workspace / "notes.txt")) == "héllo\n"


async def test_read_text_without_a_workspace_is_denied() -> None:
    with pytest.raises(PermissionDenied) as caught:
        await Sandbox(read=True).read_text("notes.txt")
    assert caught.value.message == "Permission denied: workspace path"


# --- write_text ---------------------------------------------------------------------------------


async def test_write_text_requires_write(workspace: Path) -> None:
    sandbox = Sandbox(workspace=workspace, read=True, execute=True)
    with pytest.raises(PermissionDenied) as caught:
        await sandbox.write_text("new.txt", "x")
    assert caught.value.message == "Permission denied: filesystem:write"
    assert not (workspace / "new.txt").exists()


async def test_write_text_writes_inside(workspace: Path) -> None:
    sandbox = Sandbox(workspace=workspace, read=True, write=True)
    await sandbox.write_text("sub/new.txt", "written ✓")
    assert (workspace / "sub" / "new.txt").read_text(encoding="utf-8") == "written ✓"
    assert await sandbox.read_text("sub/new.txt") == "written ✓"


async def test_write_text_through_a_symlink_inside(workspace: Path) -> None:
    (workspace / "link.txt").symlink_to(workspace / "notes.txt")
    await Sandbox(workspace=workspace, write=True).write_text("link.txt", "changed")
    assert (workspace / "notes.txt").read_text(encoding="utf-8") == "changed"


@pytest.mark.parametrize(
    "target",
    [
        pytest.param(lambda ws: ws / "missing.txt", id="dangling-inside"),
        pytest.param(lambda ws: ws.parent / "missing.txt", id="dangling-outside"),
    ],
)
async def test_write_text_refuses_a_dangling_symlink(
    workspace: Path, target: Any
) -> None:
    (workspace / "dangling.txt").symlink_to(target(workspace))
    with pytest.raises(PermissionDenied) as caught:
        await Sandbox(workspace=workspace, write=True).write_text("dangling.txt", "x")
    assert caught.value.message == "Permission denied: symlink"
    assert not target(workspace).exists()


async def test_write_text_refuses_paths_outside(workspace: Path) -> None:
    (workspace / "escape.txt").symlink_to(workspace.parent / "secret.txt")
    sandbox = Sandbox(workspace=workspace, write=True)
    for path in ("../secret.txt", str(workspace.parent / "secret.txt"), "escape.txt"):
        with pytest.raises(PermissionDenied) as caught:
            await sandbox.write_text(path, "overwritten")
        assert caught.value.message == "Permission denied: workspace path"
    assert (workspace.parent / "secret.txt").read_text(encoding="utf-8") == "secret"


# --- run ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("execute", "with_executor"),
    [
        pytest.param(False, False, id="neither"),
        pytest.param(True, False, id="no-executor"),
        pytest.param(False, True, id="execute-not-granted"),
    ],
)
async def test_run_requires_execute_and_an_executor(
    workspace: Path, execute: bool, with_executor: bool
) -> None:
    executor = RecordingExecutor()
    sandbox = Sandbox(
        workspace=workspace,
        read=True,
        write=True,
        execute=execute,
        executor=executor if with_executor else None,
    )
    with pytest.raises(PermissionDenied) as caught:
        await sandbox.run("ls", ["-1"])
    assert (
        caught.value.message
        == "Permission denied: execution requires an enabled SandboxExecutor"
    )
    assert executor.calls == []


async def test_run_permission_comes_before_command_validation(workspace: Path) -> None:
    with pytest.raises(PermissionDenied):
        await Sandbox(workspace=workspace).run("ls\0", ["\0"])


@pytest.mark.parametrize(
    ("command", "args"),
    [
        pytest.param("ls", ["-1", "a\0b"], id="nul-in-args"),
        pytest.param("ls\0rm", [], id="nul-in-command"),
        pytest.param("", [], id="empty-command"),
        pytest.param(" \t", [], id="blank-command"),
        pytest.param("\ufeff\u00a0", [], id="javascript-blank-command"),
        pytest.param(5, [], id="non-string-command"),
        pytest.param("ls", ["-1", 2], id="non-string-arg"),
        pytest.param("ls", "-1", id="args-is-a-string"),
        pytest.param("ls", None, id="args-is-none"),
    ],
)
async def test_run_refuses_an_invalid_command(
    workspace: Path, command: Any, args: Any
) -> None:
    executor = RecordingExecutor()
    sandbox = Sandbox(workspace=workspace, execute=True, executor=executor)
    with pytest.raises(InvalidInput) as caught:
        await sandbox.run(command, args)
    assert caught.value.message == "Invalid sandbox command"
    assert caught.value.code == "INVALID_INPUT"
    assert executor.calls == []


async def test_run_passes_the_resolved_workspace(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    executor = RecordingExecutor()
    sandbox = Sandbox(workspace=tmp_path / "alias", execute=True, executor=executor)
    args = ["-1", "--", "dir name"]
    result = await sandbox.run("ls", args)
    args.append("mutated")
    assert result == CommandResult(stdout="out\n", stderr="", exit_code=0)
    assert executor.calls == [("ls", ["-1", "--", "dir name"], real.resolve())]


async def test_run_accepts_a_tuple_of_args(workspace: Path) -> None:
    executor = RecordingExecutor()
    sandbox = Sandbox(workspace=workspace, execute=True, executor=executor)
    await sandbox.run("pwd", ())
    await sandbox.run("wc", ("-l", "--", "notes.txt"))
    assert executor.calls == [
        ("pwd", [], real_path(workspace)),
        ("wc", ["-l", "--", "notes.txt"], real_path(workspace)),
    ]


async def test_run_executor_exceptions_propagate(workspace: Path) -> None:
    class Failing(RecordingExecutor):
        async def run(
            self, command: str, args: Sequence[str], workspace: Path
        ) -> CommandResult:
            raise RuntimeError("executor broke")

    sandbox = Sandbox(workspace=workspace, execute=True, executor=Failing())
    with pytest.raises(RuntimeError, match="^executor broke$"):
        await sandbox.run("ls", [])


async def test_read_text_keeps_line_endings_as_they_are(tmp_path: Path) -> None:
    (tmp_path / "crlf.txt").write_bytes(b"a\r\nb\rc")
    sandbox = Sandbox(read=True, workspace=tmp_path)
    assert await sandbox.read_text("crlf.txt") == "a\r\nb\rc"


async def test_a_symlink_loop_is_refused_as_a_workspace_path(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    sandbox = Sandbox(read=True, workspace=tmp_path)
    with pytest.raises(PermissionDenied, match="Permission denied: workspace path"):
        await sandbox.read_text("loop")
