"""The embedded nats-server that `interaction-worker run` starts when no NATS URL is configured.

The server listens on loopback only (its WebSocket listener for browsers too, unless given a
certificate) and knows two users (accounts.py): `worker`, whose password is the token in
`<data_dir>/token`, and the read-only `ui`, whose password is in `<data_dir>/ui-token`. The secrets
reach the server through a mode-0600 configuration file, never its command line, which every local
user can read in `/proc/<pid>/cmdline`.

The server belongs to the process that started it. It runs in its own session, so the terminal's
Ctrl-C reaches only the worker, which stops the server after draining its connection; on Linux it
gets SIGTERM when its parent dies, even by SIGKILL. One server at a time uses a data directory:
`<data_dir>/lock` is locked (`flock`) by the worker and by the server, which inherits the lock, and
names their pids for whoever finds it locked.
"""

import asyncio
import contextlib
import os
import re
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

from .accounts import (
    BrowserAccess,
    accounts_config,
    adopt_global_store,
    worker_credentials,
)
from .data_dir import (
    check_own,
    data_dir_errors,
    load_or_create_token,
    lock,
    token_path,
    ui_token_path,
    write_lock,
    write_private,
)
from .errors import EmbeddedServerError, PortInUse
from .process import (
    HOST,
    die_with_parent,
    find_nats_server,
    port_is_free,
    quote,
    read_ports,
)
from .websocket import WebSocketListener, websocket_config

DEFAULT_PORT = 4222
_STOP_TIMEOUT = 10.0
_POLL_INTERVAL = 0.05
# "[1234] 2026/01/02 03:04:05.678901 [FTL] " in front of every log line.
_LOG_PREFIX_RE = re.compile(r"^\[\d+\] \S+ \S+ \[\w+\] ")


class EmbeddedNatsServer:
    """A private nats-server with JetStream, on 127.0.0.1, for the worker and, read-only, browsers.

    Args:
        data_dir: holds the tokens, configuration, log, JetStream store and the URL file.
        port: `None` for 4222 when free else any free port, `0` for any free port, or exactly this one.
        binary: the nats-server executable; found with `find_nats_server()` when omitted.
        ready_timeout: seconds to wait for the server to accept clients with JetStream enabled.
        websocket: the WebSocket listener for browsers; None for none.
        browsers: what the `ui` user may read.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        binary: str | None = None,
        ready_timeout: float = 15.0,
        websocket: WebSocketListener | None = None,
        browsers: BrowserAccess | None = None,
    ) -> None:
        self._data_dir = data_dir.absolute()
        self._port = port
        self._binary = binary
        self._ready_timeout = ready_timeout
        self._websocket = websocket
        self._browsers = browsers or BrowserAccess()
        self._proc: asyncio.subprocess.Process | None = None
        self._url: str | None = None
        self._websocket_url: str | None = None
        self._token: str | None = None
        self._ui_token: str | None = None
        self._lock_fd: int | None = None

    @property
    def url(self) -> str:
        """The client URL, `nats://127.0.0.1:PORT`, without the token."""
        if self._url is None:
            raise EmbeddedServerError("the embedded nats-server has not been started")
        return self._url

    @property
    def token(self) -> str:
        """The `worker` user's password."""
        if self._token is None:
            raise EmbeddedServerError("the embedded nats-server has not been started")
        return self._token

    @property
    def credentials(self) -> dict[str, str]:
        """`nats.connect` options of the `worker` user."""
        return worker_credentials(self.token)

    @property
    def ui_token(self) -> str:
        """The read-only `ui` user's password."""
        if self._ui_token is None:
            raise EmbeddedServerError("the embedded nats-server has not been started")
        return self._ui_token

    @property
    def websocket_url(self) -> str | None:
        """`ws://HOST:PORT` (`wss://` with TLS) of the WebSocket listener; None without one."""
        return self._websocket_url

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise EmbeddedServerError("the embedded nats-server has not been started")
        return self._proc.pid

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start the server and wait until it accepts clients with JetStream enabled.

        Raises:
            DataDirInUse: another worker, or the server of one, uses the data directory.
            ForeignDataDir: the data directory holds files, none of them a worker's.
            EmbeddedServerError: the server cannot be found, started or reached.
        """
        if self._lock_fd is not None:
            raise EmbeddedServerError("the embedded nats-server is already running")
        binary = self._binary or find_nats_server()
        self._url = None
        with data_dir_errors():
            if not self._data_dir.exists():
                self._data_dir.mkdir(mode=0o700, parents=True)
                self._data_dir.chmod(0o700)  # mkdir's mode is filtered by the umask
            else:
                check_own(self._data_dir)
            self._lock_fd = lock(self._data_dir / "lock")
        try:
            await self._start(binary)
        except BaseException:
            # A failed start has stopped its server (or killed it, when cancelled).
            self._unlock()
            raise

    async def _start(self, binary: str) -> None:
        with data_dir_errors():
            self._token = load_or_create_token(token_path(self._data_dir))
            self._ui_token = load_or_create_token(ui_token_path(self._data_dir))
            adopt_global_store(self._store_dir)
        if self._port is None:
            listen_port = DEFAULT_PORT if port_is_free(DEFAULT_PORT) else -1
        elif self._port == 0:
            listen_port = -1
        elif port_is_free(self._port):
            listen_port = self._port
        else:
            raise PortInUse(self._port)
        try:
            self._url = await self._launch(binary, listen_port)
        except PortInUse:
            # Someone took the port between our probe and the server's bind.
            if self._port is not None:
                raise
            self._url = await self._launch(binary, -1)
        try:
            with data_dir_errors():
                write_private(self._data_dir / "url", self._url + "\n")
        except EmbeddedServerError:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL after 10 s. Does nothing when not running."""
        try:
            await self._stop()
        finally:
            self._unlock()

    async def _stop(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), _STOP_TIMEOUT)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        # The URL file means "a server is serving here"; clients must not dial a dead one.
        url_file = self._data_dir / "url"
        with contextlib.suppress(OSError):
            if url_file.read_text(encoding="utf-8").strip() == self._url:
                url_file.unlink()

    async def _launch(self, binary: str, listen_port: int) -> str:
        conf = self._data_dir / "nats-server.conf"
        log = self._data_dir / "nats-server.log"
        with data_dir_errors():
            for stale in self._data_dir.glob("nats-server_*.ports"):
                stale.unlink(missing_ok=True)
            write_private(conf, self._config(listen_port, log))
            # stderr goes to the log too: errors before the server opens its log land there.
            log_fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        # Only this run's lines explain this run's exit.
        log_offset = os.fstat(log_fd).st_size
        assert self._lock_fd is not None
        try:
            self._proc = await asyncio.create_subprocess_exec(
                binary,
                "-c",
                str(conf),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log_fd,
                # Out of the terminal's process group: Ctrl-C is the worker's to handle, and the
                # worker still needs its server to drain.
                start_new_session=True,
                # The lock outlives a killed worker as long as its server does.
                pass_fds=(self._lock_fd,),
                preexec_fn=die_with_parent(),
            )
        except OSError as exc:
            raise EmbeddedServerError(
                f"cannot run nats-server: {exc.strerror}"
            ) from None
        finally:
            os.close(log_fd)
        with contextlib.suppress(OSError):  # the pids only explain a refusal
            write_lock(self._lock_fd, os.getpid(), self._proc.pid)
        try:
            return await self._wait_ready(self._proc, log, log_offset, listen_port)
        except Exception:
            await self._stop()  # the lock stays: `start` may try another port
            raise
        except BaseException:
            # Cancelled: no awaiting allowed here, so skip the graceful path.
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            raise

    def _unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is None:
            return
        # The file stays: removing a lock file races with a process opening it to lock it.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)

    @property
    def _store_dir(self) -> Path:
        return self._data_dir / "nats"

    def _config(self, listen_port: int, log: Path) -> str:
        listener = (
            [websocket_config(self._websocket)] if self._websocket is not None else []
        )
        return "\n".join(
            [
                f"listen: {quote(f'{HOST}:{listen_port}')}",
                # Monitoring on a random port: readiness is checked through /healthz.
                f"http: {quote(f'{HOST}:-1')}",
                *listener,
                accounts_config(self.token, self.ui_token, self._browsers),
                f"jetstream {{ store_dir: {quote(str(self._store_dir))} }}",
                f"ports_file_dir: {quote(str(self._data_dir))}",
                f"log_file: {quote(str(log))}",
                "",
            ]
        )

    async def _wait_ready(
        self,
        proc: asyncio.subprocess.Process,
        log: Path,
        log_offset: int,
        listen_port: int,
    ) -> str:
        ports_file = self._data_dir / f"nats-server_{proc.pid}.ports"
        deadline = time.monotonic() + self._ready_timeout
        ports: dict[str, list[str]] | None = None
        # trust_env=False: an HTTP(S)_PROXY from the environment must not see loopback traffic.
        async with httpx.AsyncClient(timeout=1.0, trust_env=False) as http:
            while time.monotonic() < deadline:
                if proc.returncode is not None:
                    raise self._exit_error(
                        proc.returncode, log, log_offset, listen_port
                    )
                if ports is None:
                    ports = read_ports(ports_file)
                if ports is not None:
                    with contextlib.suppress(httpx.HTTPError):
                        health = (
                            f"{ports['monitoring'][0]}/healthz?js-enabled-only=true"
                        )
                        if (await http.get(health)).status_code == 200:
                            self._websocket_url = _first(ports.get("websocket"))
                            return ports["nats"][0]
                await asyncio.sleep(_POLL_INTERVAL)
        raise EmbeddedServerError(
            f"nats-server did not become ready within {self._ready_timeout:g} s"
        )

    def _exit_error(
        self, code: int, log: Path, log_offset: int, port: int
    ) -> Exception:
        try:
            with log.open("rb") as f:
                f.seek(log_offset)
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            lines = []
        last = next((line for line in reversed(lines) if line.strip()), "")
        reason = _LOG_PREFIX_RE.sub("", last).replace(str(self._data_dir), "<data_dir>")
        if "websocket" in reason.lower() and self._websocket is not None:
            where = f"{self._websocket.host}:{self._websocket.port}"
            return EmbeddedServerError(
                f"nats.websocket: cannot listen on {where}: {_after_colon(reason)}"
            )
        if "address already in use" in reason and port > 0:
            return PortInUse(port)
        return EmbeddedServerError(
            f"nats-server exited with code {code}: {reason or 'no log'}"
        )


def _first(urls: object) -> str | None:
    return urls[0] if isinstance(urls, list) and urls else None


def _after_colon(reason: str) -> str:
    """The system's words at the end of a Go error chain (`listen tcp …: bind: address already in use`)."""
    return reason.rsplit(": ", 1)[-1]
