"""The protected paths: the registry compares by device and inode, and the sandbox's own
`read_text`, `write_text` and `run` refuse them however they are spelled."""

import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from interaction_worker import ConfigurationError, Sandbox
from interaction_worker.errors import PermissionDenied
from interaction_worker.nodes import CommandResult, Descent, Hidden, ProtectedPaths
from interaction_worker.nodes.descent import WalkTimeout, hidden_below

SECRET = "s3cr3t"
DENIED = "^Permission denied: protected path$"


class RecordingExecutor:
    def __init__(self, timeout: float = 5.0) -> None:
        self.timeout = timeout
        self.calls: list[list[str]] = []

    async def run(
        self, command: str, args: Sequence[str], workspace: Path
    ) -> CommandResult:
        self.calls.append([command, *args])
        return CommandResult("", "", 0)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """`ws` with the data directory `.interaction` inside it, reached through a symlink `data` and a
    hard link `docs/copy.txt`; `notes.txt` is an ordinary file."""
    workspace = tmp_path / "ws"
    data = workspace / ".interaction"
    data.mkdir(parents=True)
    (data / "token").write_text(SECRET, encoding="utf-8")
    (workspace / "docs").mkdir()
    os.link(data / "token", workspace / "docs" / "copy.txt")
    (workspace / "data").symlink_to(".interaction")
    (workspace / "notes.txt").write_text("notes", encoding="utf-8")
    return workspace


def box(workspace: Path, executor: RecordingExecutor | None = None) -> Sandbox:
    sandbox = Sandbox(
        read=True,
        write=True,
        execute=True,
        workspace=workspace,
        executor=executor or RecordingExecutor(),
    )
    sandbox.protected.add(workspace / ".interaction")
    return sandbox


SPELLINGS = [
    pytest.param(".interaction/token", id="relative"),
    pytest.param("{workspace}/.interaction/token", id="absolute"),
    pytest.param("docs/../.interaction/token", id="dotdot"),
    pytest.param("../ws/.interaction/token", id="dotdot-through-the-parent"),
    pytest.param("data/token", id="symlink"),
    pytest.param("docs/copy.txt", id="hard-link"),
    pytest.param(".interaction/new.txt", id="not-there-yet"),
    pytest.param(".interaction", id="the-directory"),
]


@pytest.mark.parametrize("spelling", SPELLINGS)
async def test_the_sandbox_refuses_every_spelling_to_read_write_and_run(
    workspace: Path, spelling: str
) -> None:
    path = spelling.format(workspace=workspace)
    executor = RecordingExecutor()
    sandbox = box(workspace, executor)
    with pytest.raises(PermissionDenied, match=DENIED):
        await sandbox.read_text(path)
    with pytest.raises(PermissionDenied, match=DENIED):
        await sandbox.write_text(path, "overwritten")
    with pytest.raises(PermissionDenied, match=DENIED):
        await sandbox.run("cat", ["--", path], paths=[path])
    assert executor.calls == []
    assert (workspace / ".interaction" / "token").read_text() == SECRET
    assert not (workspace / ".interaction" / "new.txt").exists()


async def test_everything_else_is_read_and_written_as_before(workspace: Path) -> None:
    sandbox = box(workspace)
    assert await sandbox.read_text("notes.txt") == "notes"
    await sandbox.write_text("docs/new.txt", "new")
    await sandbox.write_text("notes.txt", "shorter")
    assert (workspace / "notes.txt").read_text() == "shorter"
    assert await sandbox.read_text("docs/new.txt") == "new"
    await sandbox.run("cat", ["--", "notes.txt"], paths=["notes.txt", "."])


def test_a_protected_file_is_known_by_its_inode_wherever_it_is(tmp_path: Path) -> None:
    key = tmp_path / "keys" / "tls.key"
    key.parent.mkdir()
    key.write_text(SECRET, encoding="utf-8")
    os.link(key, tmp_path / "elsewhere.pem")
    (tmp_path / "alias").symlink_to(key.parent)
    registry = ProtectedPaths([tmp_path / "alias" / "tls.key"])
    snapshot = registry.snapshot()
    assert snapshot.refuses(key)
    assert snapshot.refuses(tmp_path / "elsewhere.pem")
    assert not snapshot.refuses(
        key.parent
    )  # a protected file protects nothing beside it
    registry.add(tmp_path / "alias" / "tls.key")
    assert len(registry.paths) == 1


def test_a_protected_directory_created_later_is_protected_then(tmp_path: Path) -> None:
    registry = ProtectedPaths([tmp_path / "data"])
    assert registry.snapshot().refuses(tmp_path / "data" / "token")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "token").write_text(SECRET, encoding="utf-8")
    os.link(tmp_path / "data" / "token", tmp_path / "copy")
    assert registry.snapshot().refuses(tmp_path / "copy")
    assert not registry.snapshot().refuses(tmp_path / "other")


async def test_a_file_with_several_links_to_nothing_protected_is_read(
    workspace: Path,
) -> None:
    """Hard links are looked for among the protected directories of the file's own device: /proc
    (thousands of entries, no hard links) is never walked for a workspace file."""
    os.link(workspace / "notes.txt", workspace / "docs" / "notes-again.txt")
    sandbox = box(workspace)
    sandbox.protected.add("/proc")
    assert await sandbox.read_text("docs/notes-again.txt") == "notes"
    snapshot = sandbox.protected.snapshot()
    assert not snapshot.refuses(workspace / "notes.txt")
    assert snapshot.refuses(workspace / "docs" / "copy.txt")


def test_the_walk_finds_what_a_command_would_meet(workspace: Path) -> None:
    snapshot = box(workspace).protected.snapshot()
    deadline = time.monotonic() + 10
    found = hidden_below(workspace, ".", None, snapshot, deadline)
    assert found == [
        Hidden("./.interaction", ".interaction", True),
        Hidden("./docs/copy.txt", "copy.txt", False),
    ]
    assert hidden_below(workspace, ".", 1, snapshot, deadline) == found[:1]
    assert hidden_below(workspace, ".", 0, snapshot, deadline) == []
    assert hidden_below(workspace / "docs", "docs", 1, snapshot, deadline) == [
        Hidden("docs/copy.txt", "copy.txt", False)
    ]
    with pytest.raises(WalkTimeout):
        many = workspace / "many"
        many.mkdir()
        for index in range(300):
            (many / str(index)).touch()
        hidden_below(workspace, ".", None, snapshot, time.monotonic() - 1)


async def test_skip_protected_checks_execute_then_the_roots(workspace: Path) -> None:
    def skip(hidden: Sequence[Hidden]) -> list[str]:
        return [h.path for h in hidden]

    denied = Sandbox(execute=False, workspace=workspace, executor=RecordingExecutor())
    with pytest.raises(PermissionDenied, match="requires an enabled SandboxExecutor"):
        await denied.skip_protected(Descent(("data",), None, skip), ["x"])
    sandbox = box(workspace)
    with pytest.raises(PermissionDenied, match=DENIED):
        await sandbox.skip_protected(Descent(("data",), None, skip), ["x"])
    assert await sandbox.skip_protected(Descent(("notes.txt",), None, skip), ["x"]) == [
        "x"
    ]
    assert await sandbox.skip_protected(Descent((".",), None, skip), ["x"]) == [
        "./.interaction",
        "./docs/copy.txt",
    ]
    slow = box(workspace, RecordingExecutor(timeout=-1.0))
    many = workspace / "many"
    many.mkdir()
    for index in range(300):
        (many / str(index)).touch()
    with pytest.raises(TimeoutError):
        await slow.skip_protected(Descent((".",), None, skip), ["x"])


def test_a_workspace_inside_a_protected_directory_is_a_configuration_error(
    workspace: Path,
) -> None:
    for inside in (
        workspace / ".interaction",
        workspace / "data",  # a symlink to it
        workspace / ".interaction" / "ws",
    ):
        sandbox = Sandbox(workspace=inside)
        sandbox.protected.add(workspace / ".interaction")
        with pytest.raises(ConfigurationError, match="^workspace must not be inside"):
            sandbox.check_workspace()
    box(workspace).check_workspace()  # the data directory inside the workspace is fine
    Sandbox().check_workspace()


@pytest.fixture
def mounted(workspace: Path) -> Iterator[Path]:
    """`mounted`: a bind mount of the data directory inside the workspace."""
    mount_point = workspace / "mounted"
    mount_point.mkdir()
    data = workspace / ".interaction"
    if subprocess.run(["mount", "--bind", data, mount_point]).returncode != 0:
        pytest.skip("bind mounts need root")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", mount_point], check=True)


async def test_a_bind_mount_of_a_protected_directory_is_protected(
    workspace: Path, mounted: Path
) -> None:
    sandbox = box(workspace)
    with pytest.raises(PermissionDenied, match=DENIED):
        await sandbox.read_text("mounted/token")
    with pytest.raises(PermissionDenied, match=DENIED):
        await sandbox.run("ls", ["mounted"], paths=["mounted"])
    found = hidden_below(
        workspace, ".", None, sandbox.protected.snapshot(), time.monotonic() + 10
    )
    assert "./mounted" in [hidden.path for hidden in found]
