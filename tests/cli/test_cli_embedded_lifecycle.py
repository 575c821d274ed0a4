"""The embedded nats-server lives and dies with `interaction-worker run` (docs/configuration.md 3).

A killed `run` takes its server along; one `run` at a time serves a data directory, whose lock
names the process holding it; a start that fails after the server is up stops it quietly.
Each `run` here is a subprocess of the virtualenv's console script, as a user starts it.
"""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_cli import own_config, without_info

REPO = Path(__file__).resolve().parents[2]
READY_BOUND = 60.0
EXIT_BOUND = 60.0
# SIGTERM from the kernel, then the server's own clean exit.
ORPHAN_BOUND = 3.0


def cli_command() -> list[str]:
    script = Path(sys.executable).parent / "interaction-worker"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "interaction_worker.cli"]


def process_with(pid: int, marker: str) -> bool:
    """Whether `pid` is a live process whose command line mentions `marker`: not a reused pid,
    nor a zombie (an orphan's exit may never be reaped where pid 1 does not reap)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return marker.encode() in cmdline


def servers_of(data_dir: Path) -> list[int]:
    """Live nats-servers of the data directory, found by their configuration file, which no
    `run` command line names (`pgrep -f DATA_DIR/nats-server.conf`)."""
    conf = str(data_dir / "nats-server.conf")
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    return [pid for pid in pids if pid != os.getpid() and process_with(pid, conf)]


@dataclass
class Run:
    proc: subprocess.Popen[bytes]
    data_dir: Path
    stderr_file: Path

    def stderr(self) -> str:
        return self.stderr_file.read_text(encoding="utf-8", errors="replace")

    def wait_ready(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # EOF if it exits first
        if not line.startswith(b"ready "):
            self.proc.wait(timeout=EXIT_BOUND)
            pytest.fail(f"run was not ready ({line!r}): {self.stderr()}")
        return line.decode().removeprefix("ready ").strip()

    def server_pid(self) -> int:
        ports = list(self.data_dir.glob("nats-server_*.ports"))
        assert len(ports) == 1, ports
        return int(ports[0].stem.rsplit("_", 1)[1])

    def wait(self) -> int:
        try:
            return self.proc.wait(timeout=EXIT_BOUND)
        except subprocess.TimeoutExpired:
            pytest.fail(f"run did not exit within {EXIT_BOUND:g} s: {self.stderr()}")

    def close(self) -> None:
        """Teardown: the process, then any server it left behind (what a failure would leave)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in servers_of(self.data_dir):
            os.kill(pid, signal.SIGKILL)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[list[Run]]:
    started: list[Run] = []
    yield started
    for run in started:
        run.close()


def launch(runs: list[Run], cwd: Path, data_dir: Path, *args: str) -> Run:
    """Start `run --port 0 --data-dir DATA_DIR ARGS` in `cwd`, its stdout a pipe."""
    stderr_file = cwd / f"run-{len(runs)}.stderr"
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERACTION_")}
    # Never a worker.yaml found upwards: the test's own.
    env["INTERACTION_CONFIG"] = str(own_config(cwd))
    with stderr_file.open("wb") as stderr:
        proc = subprocess.Popen(
            [*cli_command(), "run", "--port", "0", "--data-dir", str(data_dir), *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    run = Run(proc, data_dir, stderr_file)
    runs.append(run)
    return run


def lock_pids(data_dir: Path) -> list[int]:
    return [int(word) for word in (data_dir / "lock").read_text().split()]


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_a_killed_run_takes_its_server_along(
    tmp_path: Path, runs: list[Run], loop: str
) -> None:
    """SIGKILL leaves `run` no chance to stop its server: the kernel's parent-death signal does.
    It follows the thread that started the server, which must be the one that lives as long as
    the process on either loop."""
    data_dir = tmp_path / "data"
    run = launch(runs, tmp_path, data_dir, "--loop", loop)
    run.wait_ready()
    server = run.server_pid()
    assert lock_pids(data_dir) == [run.proc.pid, server]
    run.proc.kill()
    run.proc.wait()
    deadline = time.monotonic() + ORPHAN_BOUND
    while process_with(server, str(data_dir)):
        if time.monotonic() > deadline:
            pytest.fail(
                f"the nats-server of a killed run still runs after {ORPHAN_BOUND:g} s"
            )
        time.sleep(0.01)
    assert servers_of(data_dir) == []


def test_one_run_per_data_directory(tmp_path: Path, runs: list[Run]) -> None:
    """A lock left by a process that is gone is taken over; a lock held by a live `run` refuses
    a second one in one line naming it, and the first serves on undisturbed."""
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    stale = dead_pid()
    (data_dir / "lock").write_text(f"{stale}\n")

    first = launch(runs, tmp_path, data_dir)
    url = first.wait_ready()
    assert lock_pids(data_dir) == [first.proc.pid, first.server_pid()]

    second = launch(runs, tmp_path, data_dir)
    code = second.wait()
    assert second.proc.stdout is not None
    assert second.proc.stdout.read() == b""
    assert code == 1, second.stderr()
    assert without_info(second.stderr()) == [
        f"interaction-worker: the data directory is in use by process {first.proc.pid};"
        " stop it or choose another data directory"
    ]
    assert (data_dir / "url").read_text().strip() == url
    assert servers_of(data_dir) == [first.server_pid()]

    first.proc.send_signal(signal.SIGTERM)
    assert first.wait() == 0, first.stderr()
    assert servers_of(data_dir) == []


def test_a_required_mcp_server_that_cannot_start_fails_in_one_line(
    tmp_path: Path, runs: list[Run]
) -> None:
    """The worker connects to NATS before its MCP servers; when a required one cannot start, the
    connection closed on the way out is no news: one error line, no reconnect warning."""
    missing = tmp_path / "no-such-mcp-server"
    (tmp_path / "worker.yaml").write_text(
        "mcp:\n"
        "  servers:\n"
        "    files:\n"
        "      transport: stdio\n"
        f"      command: {str(missing)!r}\n"
        "      required: true\n"
    )
    data_dir = tmp_path / "data"
    run = launch(runs, tmp_path, data_dir)
    code = run.wait()
    stderr = run.stderr()
    assert code == 1, stderr
    assert without_info(stderr) == [
        "interaction-worker: cannot connect to MCP server files:"
        " the command cannot be started"
    ]
    assert servers_of(data_dir) == []
    assert not (data_dir / "url").exists()
