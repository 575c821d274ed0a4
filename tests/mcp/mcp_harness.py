"""Helpers of the MCP tests: the probe server (`mcp_probe_server.py`) over stdio or streamable HTTP as a
subprocess, the marker files it leaves, and bounded waits.

Every wait that includes a server start is bounded at `START` seconds: a cold stdio server takes
seconds on a loaded CI machine.
"""

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
from anyio.abc import Process

from interaction_worker.mcp import McpServerConnection, http_transport, stdio_transport

HERE = Path(__file__).parent
PROBE = HERE / "mcp_probe_server.py"
START = 30.0
BACKOFF = (0.1, 0.5)  # restart backoff in tests: short


def probe_env(markers: Path, name: str) -> dict[str, str]:
    return {"PROBE_MARKER_DIR": str(markers), "PROBE_NAME": name}


def stdio_probe(
    markers: Path,
    name: str = "probe",
    *,
    timeout: float = 30.0,
    required: bool = True,
) -> McpServerConnection:
    """A connection to the probe served over stdio by a child process (not started yet)."""
    markers.mkdir(parents=True, exist_ok=True)
    transport = stdio_transport(
        sys.executable, [str(PROBE)], env=probe_env(markers, name), cwd=HERE
    )
    return McpServerConnection(
        name,
        transport,
        timeout=timeout,
        required=required,
        backoff=BACKOFF,
        connect_timeout=START,
    )


def pages_connection(
    urls: dict[str, str], scenario: str, name: str | None = None
) -> McpServerConnection:
    """A connection to a paginating scenario served in this process (`mcp_pages_server.serving`)."""
    return McpServerConnection(
        name or scenario,
        http_transport(urls[scenario], timeout=10.0),
        timeout=10.0,
        backoff=BACKOFF,
        connect_timeout=START,
    )


class HttpProbe:
    """The probe served over streamable HTTP by a subprocess; `kill()` it, `start()` it again on
    the same port. With `sessions`, it speaks the 2025 protocol, with sessions (`mcp_sessions`)."""

    def __init__(
        self, markers: Path, name: str = "web", *, sessions: bool = False
    ) -> None:
        markers.mkdir(parents=True, exist_ok=True)
        self.markers = markers
        self.name = name
        self.sessions = sessions
        self.port = 0
        self.process: Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def start(self) -> None:
        port_file = self.markers / f"port-{self.name}"
        port_file.unlink(missing_ok=True)
        mode = ["sessions"] if self.sessions else []
        self.process = await anyio.open_process(
            [sys.executable, str(PROBE), "http", str(self.port), *mode],
            env={**os.environ, **probe_env(self.markers, self.name)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=None,
        )
        await wait_for(port_file.exists, "the HTTP probe to listen")
        self.port = int(port_file.read_text())

    async def kill(self, how: signal.Signals = signal.SIGKILL) -> None:
        """Stop the server with `how` (SIGTERM: uvicorn's graceful shutdown) and wait for its end."""
        process, self.process = self.process, None
        if process is not None:
            await stop_process(process, how)

    def connection(
        self, *, timeout: float = 30.0, required: bool = True
    ) -> McpServerConnection:
        return McpServerConnection(
            self.name,
            http_transport(self.url, timeout=timeout),
            timeout=timeout,
            required=required,
            backoff=BACKOFF,
            connect_timeout=START,
        )


async def wait_for(
    condition: Callable[[], bool], what: str, within: float = START
) -> None:
    """Poll `condition` (a file another process writes) until it holds, at most `within` seconds."""
    with anyio.fail_after(within):
        while not condition():  # noqa: ASYNC110 - another process writes it: no event to wait on
            await anyio.sleep(0.02)


def probe_pids(markers: Path, name: str) -> list[int]:
    """The pids of every probe process named `name` that started (each leaves `pid-<name>-<pid>`)."""
    prefix = f"pid-{name}-"
    return [int(path.name.removeprefix(prefix)) for path in markers.glob(f"{prefix}*")]


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, dead but not yet reaped, counts as running too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def stop_process(process: Process, how: signal.Signals) -> None:
    """Send `how` and wait for the end; SIGKILL after 10 s."""
    if process.returncode is None:
        process.send_signal(how)
    try:
        with anyio.fail_after(10):
            await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
