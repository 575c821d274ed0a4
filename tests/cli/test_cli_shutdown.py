"""Stopping `interaction-worker run` with calls in flight (docs/configuration.md sections 1 and 3).

SIGTERM or SIGINT: the worker stops taking messages, lets running calls finish within
`shutdown_grace`, cancels the rest with WORKER_SHUTDOWN, stops its embedded nats-server and exits 0.
The served worker is `examples.custom_tool:worker`, whose `sleep` tool logs when it starts, so a
signal is sent only once every call is running.
"""

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from test_cli import own_config

from interaction_worker.embedded import read_embedded_credentials

REPO = Path(__file__).resolve().parents[2]
READY_BOUND = 60.0
STOP_BOUND = 15.0  # the default shutdown_grace
APP = "examples.custom_tool:worker"


def process_with(pid: int, marker: str) -> bool:
    """Whether `pid` is a live process whose command line mentions `marker` (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return marker.encode() in cmdline


def server_processes(data_dir: Path) -> list[int]:
    """Live processes whose command line names the data directory (`pgrep -f DATA_DIR`)."""
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    return [
        pid for pid in pids if pid != os.getpid() and process_with(pid, str(data_dir))
    ]


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    data_dir: Path
    stderr_file: Path
    server_pid: int

    def stderr(self) -> str:
        return self.stderr_file.read_text(encoding="utf-8", errors="replace")

    async def wait_stderr(self, text: str, count: int, bound: float = 10.0) -> None:
        deadline = time.monotonic() + bound
        while self.stderr().count(text) < count:
            if time.monotonic() > deadline:
                pytest.fail(f"{count} x {text!r} not on stderr: {self.stderr()}")
            await asyncio.sleep(0.02)

    async def wait_exit(self, bound: float) -> int:
        deadline = time.monotonic() + bound
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                pytest.fail(f"run did not exit within {bound:g} s: {self.stderr()}")
            await asyncio.sleep(0.02)
        return self.proc.returncode

    def stop(self) -> None:
        """Teardown: SIGTERM, then SIGKILL; an orphaned nats-server child is killed too."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_BOUND)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if process_with(self.server_pid, str(self.data_dir)):
            os.kill(self.server_pid, signal.SIGKILL)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def launch(cwd: Path, *args: str, new_session: bool = False) -> Served:
    """Start `run examples.custom_tool:worker --data-dir … ARGS` in `cwd` (ARGS: `--port 0`).

    `new_session`: as a shell starts a foreground job, in a process group of its own that the
    terminal's Ctrl-C signals as a whole (`os.killpg`), without signalling the tests.
    """
    data_dir = cwd / "data"
    stderr_file = cwd / "run.stderr"
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERACTION_")}
    # Never a worker.yaml found upwards: the test's own.
    env["INTERACTION_CONFIG"] = str(own_config(cwd))
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
    )
    script = Path(sys.executable).parent / "interaction-worker"
    command = (
        [str(script)]
        if script.is_file()
        else [sys.executable, "-m", "interaction_worker.cli"]
    )
    with stderr_file.open("wb") as stderr:
        proc = subprocess.Popen(
            [
                *command,
                "run",
                APP,
                "--data-dir",
                str(data_dir),
                *(args or ("--port", "0")),
            ],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=new_session,
        )
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    return Served(proc, data_dir, stderr_file, server_pid=-1)


def wait_server_pid(served: Served) -> int:
    """The embedded nats-server's pid, from the ports file it writes once it listens."""
    deadline = time.monotonic() + READY_BOUND
    while not (ports := list(served.data_dir.glob("nats-server_*.ports"))):
        if served.proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the embedded server did not start: {served.stderr()}")
        time.sleep(0.005)
    served.server_pid = int(ports[0].stem.rsplit("_", 1)[1])
    return served.server_pid


def start(cwd: Path, *, new_session: bool = False) -> Served:
    """`launch`, then wait for the ready line."""
    served = launch(cwd, new_session=new_session)
    try:
        assert served.proc.stdout is not None
        deadline = time.monotonic() + READY_BOUND
        line = b""
        while not line.endswith(b"\n"):
            if served.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"run did not become ready: {served.stderr()}")
            line += served.proc.stdout.read() or b""
            time.sleep(0.02)
        assert line.startswith(b"ready nats://127.0.0.1:"), line
        wait_server_pid(served)
    except BaseException:
        served.stop()
        raise
    return served


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    run = start(tmp_path)
    try:
        yield run
    finally:
        run.stop()


@pytest.fixture
def short_grace(tmp_path: Path) -> Iterator[Served]:
    (tmp_path / "worker.yaml").write_text("shutdown_grace: 500ms\n")
    run = start(tmp_path)
    try:
        yield run
    finally:
        run.stop()


async def connect(served: Served) -> Client:
    credentials = read_embedded_credentials(served.data_dir)
    assert credentials is not None
    url, token = credentials
    return await nats.connect(url, user="worker", password=token, allow_reconnect=False)


async def call(client: Client, seconds: float, call_id: str) -> dict[str, Any]:
    body = {"call": {"id": call_id, "name": "sleep", "arguments": {"seconds": seconds}}}
    reply = await client.request(
        "interaction.tool.call", json.dumps(body).encode(), timeout=20
    )
    assert not (reply.headers or {}).get("Nats-Service-Error"), reply.data
    result: dict[str, Any] = json.loads(reply.data)
    return result


def assert_server_gone(served: Served) -> None:
    assert not process_with(served.server_pid, str(served.data_dir))
    assert server_processes(served.data_dir) == []
    assert not (served.data_dir / "url").exists()


@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"]
)
async def test_calls_in_flight_finish_and_the_process_exits_0(
    served: Served, signum: signal.Signals
) -> None:
    client = await connect(served)
    try:
        ids = [f"slow-{n}-{uuid.uuid4().hex[:6]}" for n in range(3)]
        calls = [asyncio.create_task(call(client, 1.5, i)) for i in ids]
        await served.wait_stderr("INFO interaction_worker: sleep 'slow-", 3)
        signalled = time.monotonic()
        served.proc.send_signal(signum)
        results = await asyncio.wait_for(asyncio.gather(*calls), 20)
        code = await served.wait_exit(STOP_BOUND)
        stopped = time.monotonic() - signalled
    finally:
        await client.close()
    assert [r["callId"] for r in results] == ids
    assert [r["status"] for r in results] == ["success"] * 3
    assert code == 0, served.stderr()
    assert stopped < STOP_BOUND
    assert "Traceback" not in served.stderr()
    # The signal is answered at once, saying what the worker waits for and for how long.
    assert (
        "INFO interaction_worker: shutting down: waiting up to 15s for 3 calls in flight "
        "(a second Ctrl-C or SIGTERM cancels them now)"
    ) in served.stderr()
    assert_server_gone(served)


@pytest.mark.slow  # a run of its own, and a tool call in flight: a few seconds
async def test_a_second_signal_cancels_the_calls_in_flight_at_once(
    served: Served,
) -> None:
    client = await connect(served)
    try:
        task = asyncio.create_task(call(client, 10, "too-slow"))
        await served.wait_stderr("sleep 'too-slow'", 1)
        served.proc.send_signal(signal.SIGINT)
        await served.wait_stderr("waiting up to 15s for 1 call in flight", 1)
        signalled = time.monotonic()
        served.proc.send_signal(signal.SIGINT)
        result = await asyncio.wait_for(task, 10)
        code = await served.wait_exit(10)
        stopped = time.monotonic() - signalled
    finally:
        await client.close()
    assert (result["callId"], result["status"]) == ("too-slow", "cancelled")
    assert result["error"]["code"] == "WORKER_SHUTDOWN"
    assert code == 0, served.stderr()
    assert stopped < 5  # not the 15 s grace, nor the 10 s tool
    assert "Traceback" not in served.stderr()
    assert_server_gone(served)


async def test_a_call_past_the_grace_is_cancelled_with_worker_shutdown(
    short_grace: Served,
) -> None:
    client = await connect(short_grace)
    try:
        task = asyncio.create_task(call(client, 10, "too-slow"))
        await short_grace.wait_stderr("sleep 'too-slow'", 1)
        signalled = time.monotonic()
        short_grace.proc.terminate()
        result = await asyncio.wait_for(task, 10)
        code = await short_grace.wait_exit(10)
        stopped = time.monotonic() - signalled
    finally:
        await client.close()
    assert result["callId"] == "too-slow"
    assert result["status"] == "cancelled"
    assert result["error"]["code"] == "WORKER_SHUTDOWN"
    assert code == 0, short_grace.stderr()
    assert stopped < 5  # the 500 ms grace, not the 10 s tool
    assert_server_gone(short_grace)


async def test_ctrl_c_stops_the_worker_first_and_its_server_after(
    tmp_path: Path,
) -> None:
    """Ctrl-C signals the whole foreground process group. The embedded server is not in it: it
    keeps serving while the worker drains (the call in flight gets its reply), and is stopped after,
    so the worker never sees its own server vanish (no reconnect warnings, no reconnect delay)."""
    grace = 1.0
    (tmp_path / "worker.yaml").write_text(f"shutdown_grace: {grace:g}s\n")
    served = start(tmp_path, new_session=True)
    try:
        client = await connect(served)
        try:
            task = asyncio.create_task(call(client, 0.5, "in-flight"))
            await served.wait_stderr("sleep 'in-flight'", 1)
            signalled = time.monotonic()
            os.killpg(served.proc.pid, signal.SIGINT)
            result = await asyncio.wait_for(task, 10)
            code = await served.wait_exit(10)
            stopped = time.monotonic() - signalled
        finally:
            await client.close()
    finally:
        served.stop()
    stderr = served.stderr()
    assert result["callId"] == "in-flight"
    assert result["status"] == "success"
    assert code == 0, stderr
    assert stopped < grace + 1
    for word in ("WARNING", "reconnect", "disconnected", "Traceback"):
        assert word not in stderr
    assert_server_gone(served)


def test_a_signal_during_start_up_stops_the_embedded_server_too(tmp_path: Path) -> None:
    """SIGTERM once the embedded nats-server runs, before `run` is ready: nothing is left behind."""
    served = launch(tmp_path)
    try:
        wait_server_pid(served)
        served.proc.terminate()
        try:
            code = served.proc.wait(timeout=STOP_BOUND)
        except subprocess.TimeoutExpired:
            pytest.fail(f"run did not exit within {STOP_BOUND:g} s: {served.stderr()}")
    finally:
        served.stop()
    assert code == 0, served.stderr()
    assert "Traceback" not in served.stderr()
    assert_server_gone(served)


def test_a_signal_while_connecting_stops_at_once(tmp_path: Path) -> None:
    """An unreachable --nats-url is retried for 10 s; SIGTERM ends the wait, with exit code 0."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as closed:
        closed.bind(("127.0.0.1", 0))
        nobody = closed.getsockname()[1]
    # With --debug, each failed attempt is logged: the sign that run is connecting.
    served = launch(tmp_path, "--nats-url", f"nats://127.0.0.1:{nobody}", "--debug")
    try:
        deadline = time.monotonic() + READY_BOUND
        while "NATS connection attempt failed" not in served.stderr():
            if served.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"run is not connecting: {served.stderr()}")
            time.sleep(0.02)
        signalled = time.monotonic()
        served.proc.terminate()
        try:
            code = served.proc.wait(timeout=STOP_BOUND)
        except subprocess.TimeoutExpired:
            pytest.fail(f"run did not exit within {STOP_BOUND:g} s: {served.stderr()}")
        stopped = time.monotonic() - signalled
        assert served.proc.stdout is not None
        out = served.proc.stdout.read()
    finally:
        served.stop()
    assert code == 0, served.stderr()
    assert stopped < 3  # not the 10 s connect timeout
    assert not out  # never ready
    assert "Traceback" not in served.stderr()
    assert "Task was destroyed" not in served.stderr()
