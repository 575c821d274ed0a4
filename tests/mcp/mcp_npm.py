"""The MCP reference servers from npm, pinned by `npm/package.json` and `npm/package-lock.json`.

The Makefile's test set-up installs them with `npm ci` into `npm/node_modules`, again whenever the
lock file is newer than its stamp. A test run without that set-up installs them the same way the
first time they are needed; the tests that need them are skipped only when npm or its registry
cannot be reached, and fail when the installation fails otherwise.
"""

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process
from mcp_harness import START, stop_process

NPM = Path(__file__).parent / "npm"
# Written after a successful `npm ci`, as the Makefile does: its age tells whether the lock changed.
STAMP = NPM / "node_modules" / ".installed"
INSTALL_TIMEOUT = 600.0


def installed(command: str) -> Path:
    """The path of the installed npm command `command`, installing the pinned packages if needed.

    Skips the test when npm or its registry cannot be reached; fails it when `npm ci` fails anyway.
    """
    sources = [NPM / "package.json", NPM / "package-lock.json"]
    newest = max(path.stat().st_mtime for path in sources)
    if not STAMP.exists() or STAMP.stat().st_mtime < newest:
        _install()
    path = NPM / "node_modules" / ".bin" / command
    assert path.exists(), f"{command} is not among the installed npm packages"
    return path


def _install() -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the npm MCP servers cannot be installed")
    done = _run([npm, "ci", "--no-audit", "--no-fund"], INSTALL_TIMEOUT)
    if done.returncode == 0:
        STAMP.touch()
        return
    ping = _run([npm, "ping"], 60.0)
    if ping.returncode != 0:
        pytest.skip(
            "the npm registry cannot be reached: the npm MCP servers cannot be installed"
        )
    pytest.fail(f"npm ci failed in {NPM}:\n{done.stdout}{done.stderr}")


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv, cwd=NPM, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as expired:
        return subprocess.CompletedProcess(
            argv, 1, str(expired.stdout or ""), "timed out"
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Everything:
    """The reference server-everything in its streamable-HTTP mode, a subprocess; `kill()` it,
    `start()` it again on the same port. It takes its port from `PORT` and listens on every
    interface (it has no setting for the address)."""

    def __init__(self) -> None:
        self.command = installed("mcp-server-everything")
        self.port = free_port()
        self.process: Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def start(self) -> None:
        self.process = await anyio.open_process(
            [str(self.command), "streamableHttp"],
            env={**os.environ, "PORT": str(self.port)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # a line per request
            stderr=None,
        )
        with anyio.fail_after(START):
            while True:
                if self.process.returncode is not None:
                    raise RuntimeError(
                        f"server-everything exited: {self.process.returncode}"
                    )
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", self.port)
                except OSError:
                    await anyio.sleep(0.05)
                    continue
                await stream.aclose()
                return

    async def kill(self, how: signal.Signals = signal.SIGKILL) -> None:
        """Stop the server with `how` and wait for its end."""
        process, self.process = self.process, None
        if process is not None:
            await stop_process(process, how)
