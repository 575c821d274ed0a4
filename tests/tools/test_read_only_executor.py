"""SubprocessExecutor and the read-only commands on the machine's real programs: results (asserted by
structure, never machine wording), timeouts and cancellation that kill the whole process group,
bounded memory whatever a command prints, the minimal environment and missing programs."""

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from interaction_worker import Sandbox, ToolRegistry, event_loop
from interaction_worker.errors import ConfigurationError, InvalidInput, PermissionDenied
from interaction_worker.event_loop import LoopName
from interaction_worker.nodes import CommandResult
from interaction_worker.tools import SubprocessExecutor, read_only_command_tools

NOTES = "b 10\na 2\nb 10\nB 10\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "notes.txt").write_text(NOTES, encoding="utf-8")
    (root / "data.csv").write_text("id,name\n1,ada\n2,bob\n", encoding="utf-8")
    (root / "src" / "a.py").write_text("needle one\n", encoding="utf-8")
    (root / "src" / "b.py").write_text("nothing\n", encoding="utf-8")
    (root / "docs" / "readme.md").write_text("title\nneedle two\n", encoding="utf-8")
    return root.resolve()


async def call(
    workspace: Path,
    name: str,
    arguments: dict[str, Any],
    executor: SubprocessExecutor | None = None,
    **limits: int,
) -> Any:
    sandbox = Sandbox(
        tools=["*"],
        execute=True,
        workspace=workspace,
        executor=executor or SubprocessExecutor(timeout=10),
    )
    registry = ToolRegistry(read_only_command_tools(**limits))
    return await registry.call(
        {"id": "c", "name": name, "arguments": arguments}, sandbox
    )


def lines(text: str) -> list[str]:
    return sorted(text.splitlines())


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent that is not ours."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def eventually(predicate: Callable[[], bool], within: float = 10.0) -> None:
    """Poll the OS: nothing signals this process when another one dies or writes a file."""
    for _ in range(int(within / 0.02)):
        if predicate():
            return
        await anyio.sleep(0.02)
    raise AssertionError("the condition did not hold in time")


async def wait_gone(*pids: int) -> None:
    await eventually(lambda: not any(alive(pid) for pid in pids))


# --- the 14 on real programs --------------------------------------------------------------------------


async def test_reading_tools_give_the_file_contents(workspace: Path) -> None:
    cat = await call(workspace, "cat", {"path": "notes.txt"})
    assert (cat.status, cat.content) == ("success", NOTES)
    head = await call(workspace, "head", {"path": "notes.txt", "lines": 2})
    assert head.content == "b 10\na 2\n"
    tail = await call(workspace, "tail", {"path": "notes.txt", "lines": 1})
    assert tail.content == "B 10\n"
    cut = await call(
        workspace, "cut", {"path": "data.csv", "fields": "2", "delimiter": ","}
    )
    assert cut.content == "name\nada\nbob\n"


async def test_grep_and_find_lines_sorted(workspace: Path) -> None:
    grep = await call(
        workspace, "grep", {"pattern": "needle", "paths": ["."], "recursive": True}
    )
    assert grep.status == "success"
    assert lines(grep.content) == [
        "./docs/readme.md:2:needle two",
        "./src/a.py:1:needle one",
    ]
    one = await call(workspace, "grep", {"pattern": "B", "paths": ["notes.txt"]})
    assert one.content == "4:B 10\n"
    folded = await call(
        workspace,
        "grep",
        {"pattern": "b", "paths": ["notes.txt"], "ignoreCase": True},
    )
    assert folded.content == "1:b 10\n3:b 10\n4:B 10\n"
    files = await call(workspace, "find", {"type": "file", "name": "*.py"})
    assert lines(files.content) == ["./src/a.py", "./src/b.py"]
    dirs = await call(workspace, "find", {"type": "directory", "maxDepth": 1})
    assert lines(dirs.content) == [".", "./docs", "./src"]
    shallow = await call(workspace, "find", {"path": "src", "maxDepth": 0})
    assert shallow.content == "src\n"


async def test_counting_sorting_and_uniq(workspace: Path) -> None:
    counts = {}
    for metric in ("lines", "words", "bytes"):
        wc = await call(workspace, "wc", {"path": "notes.txt", "metric": metric})
        counts[metric] = int(wc.content.split()[0])
    assert counts == {"lines": 4, "words": 8, "bytes": len(NOTES)}
    numeric = await call(workspace, "sort", {"path": "notes.txt", "unique": True})
    assert numeric.content.splitlines() == sorted(set(NOTES.splitlines()))
    reverse = await call(workspace, "sort", {"path": "notes.txt", "reverse": True})
    assert reverse.content.splitlines() == sorted(NOTES.splitlines(), reverse=True)
    uniq = await call(workspace, "uniq", {"path": "notes.txt", "count": True})
    assert [line.split() for line in uniq.content.splitlines()] == [
        ["1", "b", "10"],
        ["1", "a", "2"],
        ["1", "b", "10"],
        ["1", "B", "10"],
    ]


async def test_metadata_tools_succeed_and_name_their_path(workspace: Path) -> None:
    stat = await call(workspace, "stat", {"path": "notes.txt"})
    assert stat.status == "success" and "notes.txt" in stat.content
    du = await call(workspace, "du", {"path": "."})
    assert du.status == "success"
    sizes = {
        path: size
        for size, path in (line.split("\t") for line in du.content.splitlines())
    }
    assert set(sizes) == {".", "./src", "./docs"}
    assert all(size.isdigit() for size in sizes.values())
    pwd = await call(workspace, "pwd", {})
    assert pwd.content == f"{workspace}\n"
    ls = await call(workspace, "ls", {"all": True})
    assert lines(ls.content) == sorted(
        [".", "..", "data.csv", "docs", "notes.txt", "src"]
    )
    plain = await call(workspace, "ls", {"path": "src"})
    assert plain.content == "a.py\nb.py\n"


async def test_file_identifies_or_is_unavailable(workspace: Path) -> None:
    result = await call(workspace, "file", {"path": "notes.txt"})
    if shutil.which("file", path="/usr/bin:/bin"):
        assert result.status == "success"
        assert result.content.startswith("notes.txt:")
    else:
        assert result.error is not None
        assert result.error.code == "COMMAND_UNAVAILABLE"


async def test_a_nonzero_exit_is_a_failed_result(workspace: Path) -> None:
    missing = await call(workspace, "cat", {"path": "missing.txt"})
    assert missing.status == "failed"
    assert missing.error is not None
    assert missing.error.code == "COMMAND_EXIT_NONZERO"
    assert missing.structured_content["exitCode"] == 1
    assert missing.structured_content["stderr"] != ""
    no_match = await call(workspace, "grep", {"pattern": "zzz", "paths": ["notes.txt"]})
    assert (no_match.status, no_match.content) == ("failed", "")
    assert no_match.error is not None
    assert no_match.error.message == "Command exited with code 1"


async def test_a_program_missing_from_the_path_is_command_unavailable(
    workspace: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    result = await call(
        workspace, "cat", {"path": "notes.txt"}, SubprocessExecutor(path=str(empty))
    )
    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.code, result.error.message) == (
        "COMMAND_UNAVAILABLE",
        "Command is not available on this machine: cat",
    )
    direct = await SubprocessExecutor().run("no-such-program-x9", [], workspace)
    assert (direct.unavailable, direct.exit_code) == (True, None)


# --- output bounds at the executor ------------------------------------------------------------------


async def test_stdout_is_read_up_to_its_limit_then_the_process_is_stopped(
    workspace: Path,
) -> None:
    executor = SubprocessExecutor(max_output_bytes=1000, commands=None)
    result = await executor.run("yes", [], workspace)  # never stops by itself
    assert len(result.stdout) == 1001
    assert (result.truncated, result.exit_code, result.timed_out) == (True, None, False)


async def test_a_multibyte_character_at_the_limit_is_cut_whole(workspace: Path) -> None:
    (workspace / "u.txt").write_bytes(("abcd" + "é" * 10).encode())
    result = await call(
        workspace,
        "cat",
        {"path": "u.txt"},
        SubprocessExecutor(max_output_bytes=5),
        max_output_bytes=5,
    )
    assert result.status == "success"
    assert result.content == "abcd"
    assert result.structured_content["exitCode"] is None
    assert result.structured_content["truncated"] is True


async def test_output_cut_by_the_executor_never_ends_in_a_replacement_character(
    workspace: Path,
) -> None:
    (workspace / "u.txt").write_bytes(("abcd" + "é" * 10).encode())
    executor = SubprocessExecutor(max_output_bytes=4, max_error_bytes=4, commands=None)
    out = await executor.run("cat", ["u.txt"], workspace)  # keeps b"abcd\xc3"
    assert (out.stdout, out.truncated) == ("abcd", True)
    err = await executor.run("sh", ["-c", "cat u.txt >&2"], workspace)
    assert (err.stderr, err.exit_code) == ("abcd", 0)


async def test_bytes_that_are_not_utf8_become_replacement_characters(
    workspace: Path,
) -> None:
    (workspace / "bin.dat").write_bytes(b"a\xffb\n")
    result = await call(workspace, "cat", {"path": "bin.dat"})
    assert result.content == "a\ufffdb\n"


def _memory(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/self/status")


def _reset_peak() -> bool:
    """Set the peak RSS (VmHWM) back to the current RSS; not allowed everywhere."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
async def test_a_command_printing_100_mb_leaves_memory_bounded(
    workspace: Path, stream: str
) -> None:
    executor = SubprocessExecutor(
        timeout=30, max_output_bytes=65536, max_error_bytes=8192, commands=None
    )
    redirect = "" if stream == "stdout" else " >&2"
    # With a reset peak, the growth over the current RSS; else over the peak so far (weaker).
    start = _memory("VmRSS") if _reset_peak() else _memory("VmHWM")
    result = await executor.run(
        "sh", ["-c", f"head -c 100000000 /dev/zero{redirect}; echo done"], workspace
    )
    assert _memory("VmHWM") - start < 40 * 1024 * 1024
    if stream == "stdout":
        assert (len(result.stdout), result.truncated) == (65537, True)
    else:  # stderr is read to the end and dropped past its limit
        assert (len(result.stderr), result.stdout, result.exit_code) == (
            8193,
            "done\n",
            0,
        )


def address_space_limit(text: str) -> str:
    (line,) = [
        line for line in text.splitlines() if line.startswith("Max address space")
    ]
    return line.split()[3]


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("prlimit", [True, False], ids=["prlimit", "preexec"])
def test_every_command_runs_under_a_memory_limit(
    workspace: Path, tmp_path: Path, loop: LoopName, prlimit: bool
) -> None:
    """Set by util-linux's prlimit where the executor's path has it, else between fork and exec."""
    path = "/usr/bin:/bin"
    if not prlimit:
        directory = tmp_path / "bin"
        directory.mkdir()
        cat = shutil.which("cat", path=path)
        assert cat is not None
        (directory / "cat").symlink_to(cat)
        path = str(directory)
    else:
        assert shutil.which("prlimit", path=path) is not None
    executor = SubprocessExecutor(commands=None, path=path)
    run = executor.run("cat", ["/proc/self/limits"], workspace)
    result = event_loop.run(run, loop)
    assert address_space_limit(result.stdout) == str(256 * 1024 * 1024)


async def test_the_memory_limit_is_set_in_code_or_lifted(workspace: Path) -> None:
    for max_memory, limit in [(2**30, str(2**30)), (None, "unlimited")]:
        executor = SubprocessExecutor(commands=None, max_memory=max_memory)
        result = await executor.run("cat", ["/proc/self/limits"], workspace)
        assert address_space_limit(result.stdout) == limit


async def test_a_command_needing_more_memory_than_allowed_fails_cleanly(
    workspace: Path,
) -> None:
    """A sparse file of one line of a gibibyte, which sort (or uniq) reads whole into memory."""
    with (workspace / "sparse.bin").open("wb") as sparse:
        sparse.truncate(2**30)
    executor = SubprocessExecutor(timeout=20, max_memory=64 * 1024 * 1024)
    started = time.monotonic()
    result = await call(workspace, "sort", {"path": "sparse.bin"}, executor)
    assert time.monotonic() - started < 10  # not the timeout: the program gave up
    assert result.status == "failed"
    assert result.error.code == "COMMAND_EXIT_NONZERO"
    assert result.structured_content["stderr"] == "sort: memory exhausted\n"
    assert result.content == ""


# --- time limits and cancellation kill the process group -------------------------------------------


async def test_a_command_past_its_timeout_is_killed_with_its_children(
    workspace: Path,
) -> None:
    executor = SubprocessExecutor(timeout=0.5, commands=None)
    script = "sleep 60 & echo $!; echo $$; wait"
    result = await executor.run("sh", ["-c", script], workspace)
    assert (result.timed_out, result.exit_code) == (True, None)
    child, shell = (int(pid) for pid in result.stdout.split())
    await wait_gone(child, shell)


async def test_children_left_behind_by_a_finished_command_are_killed(
    workspace: Path,
) -> None:
    executor = SubprocessExecutor(timeout=10, commands=None)
    result = await executor.run(
        "sh", ["-c", "sleep 60 >/dev/null 2>&1 & echo $!"], workspace
    )
    assert (result.exit_code, result.timed_out) == (0, False)
    await wait_gone(int(result.stdout))


async def test_a_cancelled_run_kills_the_process_group(workspace: Path) -> None:
    executor = SubprocessExecutor(timeout=60, commands=None)
    pid_file = workspace / "pids"
    script = "sleep 60 & echo $! $$ > pids; wait"
    task = asyncio.ensure_future(executor.run("sh", ["-c", script], workspace))
    await eventually(
        lambda: pid_file.exists() and len(pid_file.read_text().split()) == 2
    )
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_gone(*(int(pid) for pid in pid_file.read_text().split()))


async def test_a_command_timeout_through_a_tool_is_status_timeout(
    workspace: Path,
) -> None:
    fifo = workspace / "fifo"
    os.mkfifo(fifo)  # cat blocks opening a FIFO nobody writes
    result = await call(
        workspace, "cat", {"path": "fifo"}, SubprocessExecutor(timeout=0.3)
    )
    assert result.status == "timeout"
    assert result.error is not None
    assert result.error.code == "COMMAND_TIMEOUT"


async def test_a_signal_the_executor_did_not_send_is_128_plus_its_number(
    workspace: Path,
) -> None:
    executor = SubprocessExecutor(commands=None)
    result = await executor.run("sh", ["-c", "kill -TERM $$"], workspace)
    assert result.exit_code == 143


# --- what the program sees ----------------------------------------------------------------------------


async def test_the_environment_is_only_path_and_a_temporary_directory(
    workspace: Path,
) -> None:
    result = await SubprocessExecutor(commands=None).run("env", [], workspace)
    path, scratch = lines(result.stdout)
    assert path == "PATH=/usr/bin:/bin"
    assert scratch.startswith(f"TMPDIR={tempfile.gettempdir()}/interaction-command-")
    assert not await anyio.Path(scratch.removeprefix("TMPDIR=")).exists()
    extra = SubprocessExecutor(commands=None, env={"LC_ALL": "C"})
    assert [
        line.split("=")[0]
        for line in lines((await extra.run("env", [], workspace)).stdout)
    ] == ["LC_ALL", "PATH", "TMPDIR"]


@pytest.mark.parametrize("killed", [False, True], ids=["ends", "killed"])
async def test_what_a_command_leaves_in_its_temporary_directory_is_removed(
    workspace: Path, killed: bool
) -> None:
    """A `sort` that spilled to disk and was killed at its timeout left its files behind."""
    executor = SubprocessExecutor(commands=None, timeout=0.3 if killed else 10)
    script = 'echo "$TMPDIR"; mkdir "$TMPDIR/d"; echo x > "$TMPDIR/d/sortA1b2"'
    result = await executor.run(
        "sh", ["-c", script + ("; sleep 60" if killed else "")], workspace
    )
    assert result.timed_out is killed
    scratch = result.stdout.splitlines()[0]
    assert scratch.startswith(tempfile.gettempdir())
    assert not await anyio.Path(scratch).exists()


async def test_stdin_is_closed_and_the_cwd_is_the_workspace(workspace: Path) -> None:
    executor = SubprocessExecutor(timeout=5, commands=None)
    cat = await executor.run("cat", [], workspace)
    assert (cat.stdout, cat.exit_code) == ("", 0)
    pwd = await executor.run("pwd", [], workspace)
    assert pwd.stdout == f"{workspace}\n"


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_program_is_run_under_its_bare_name(workspace: Path, loop: LoopName) -> None:
    async def missing() -> Any:
        return await call(workspace, "cat", {"path": "missing.txt"})

    result = event_loop.run(missing(), loop)
    stderr = result.structured_content["stderr"]
    assert stderr.startswith("cat: ")  # not `/usr/bin/cat: `
    assert "/bin" not in stderr


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_program_found_in_the_path_runs_under_the_name_asked_for(
    workspace: Path, tmp_path: Path, loop: LoopName
) -> None:
    tac = shutil.which("tac", path="/usr/bin:/bin")
    assert tac is not None
    directory = tmp_path / "bin"
    directory.mkdir()
    (directory / "cat").symlink_to(tac)
    executor = SubprocessExecutor(path=str(directory), commands=None)

    async def both() -> tuple[CommandResult, CommandResult]:
        found = await executor.run("cat", ["notes.txt"], workspace)
        return found, await executor.run("cat", ["missing.txt"], workspace)

    found, missing = event_loop.run(both(), loop)
    assert found.stdout == "".join(reversed(NOTES.splitlines(keepends=True)))
    assert missing.stderr.startswith("cat: ")


async def test_an_absolute_program_path_runs(workspace: Path) -> None:
    program = shutil.which("echo", path="/usr/bin:/bin")
    assert program is not None
    result = await SubprocessExecutor(commands=None).run(program, ["hi"], workspace)
    assert result.stdout == "hi\n"


async def test_the_executor_runs_only_the_commands_it_lists(workspace: Path) -> None:
    executor = SubprocessExecutor(commands=["cat"])
    with pytest.raises(
        PermissionDenied, match="^Command is not enabled in this executor$"
    ):
        await executor.run("ls", [], workspace)
    with pytest.raises(InvalidInput, match="executable names or absolute paths"):
        await SubprocessExecutor().run("./cat", [], workspace)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"timeout": -1}, "timeout must be a positive number"),
        ({"timeout": float("nan")}, "timeout must be a positive number"),
        ({"timeout": True}, "timeout must be a positive number"),
        (
            {"max_output_bytes": 0},
            "max_output_bytes must be an integer from 1 to 16777216",
        ),
        (
            {"max_error_bytes": 16_777_217},
            "max_error_bytes must be an integer from 1 to 16777216",
        ),
        (
            {"commands": ["bin/cat"]},
            "Commands must be executable names or absolute paths",
        ),
        ({"commands": [""]}, "Commands must be executable names or absolute paths"),
        ({"path": "bin:/usr/bin"}, "path must list absolute directories"),
        ({"path": "/usr/bin::/bin"}, "path must list absolute directories"),
        ({"path": ""}, "path must list absolute directories"),
        (
            {"max_memory": 67_108_863},
            "max_memory must be an integer from 67108864 to 1099511627776 bytes",
        ),
        ({"max_memory": 2.0**30}, "max_memory must be an integer"),
    ],
)
def test_invalid_executor_options_are_refused(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        SubprocessExecutor(**options)
