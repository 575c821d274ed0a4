"""SubprocessExecutor: the sandbox's `CommandExecutor` for local programs (reference section 9's
local executor, answering where it throws)."""

import asyncio
import codecs
import contextlib
import math
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from ..errors import ConfigurationError, InvalidInput, PermissionDenied
from ..nodes import CommandResult
from ._memory import DEFAULT_MAX_MEMORY, Launch, MemoryLimit

DEFAULT_PATH = "/usr/bin:/bin"
_CHUNK = 65536
_MAX_TIMEOUT = (2**31 - 1) / 1000  # the reference's timer limit, in seconds
_MAX_LIMIT = 16 * 1024 * 1024
_REAP_TIMEOUT = 5.0  # a SIGKILLed process is reaped at once; bounded anyway


def _limit(value: object, name: str, default: int) -> int:
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= _MAX_LIMIT
    ):
        raise ConfigurationError(f"{name} must be an integer from 1 to {_MAX_LIMIT}")
    return value


class SubprocessExecutor:
    """Runs one program with separate arguments in the workspace: no shell, nothing inherited.

    The program is looked up in `path` only (absolute directories, default `/usr/bin:/bin`, also the
    child's whole `PATH`; `env` adds variables, and `TMPDIR` is a directory of its own, removed once
    it ends), runs with argv[0] the command as given (`cat`, not the path it was found at) in a new
    session with stdin closed, and its whole process group is
    killed with SIGKILL when it outlives `timeout` (`timed_out`), when stdout reaches
    `max_output_bytes` + 1 byte (`truncated`; reading stops there), when the call is cancelled, and
    after it exits (children left behind). At most `max_error_bytes` + 1 bytes of stderr are kept;
    the rest is read and dropped, so memory stays bounded whatever a command prints. A program that
    is not installed is `unavailable`. `commands`, when given, lists the program names it runs.

    Each program may map at most `max_memory` bytes of address space (`RLIMIT_AS`, see `_memory`;
    None: no limit): past it its allocations fail, and the program ends as it does when memory runs
    out (coreutils and grep print `memory exhausted` and exit nonzero) instead of taking gigabytes.
    """

    def __init__(
        self,
        *,
        timeout: float = 5.0,
        max_output_bytes: int = 65536,
        max_error_bytes: int = 8192,
        commands: Collection[str] | None = None,
        path: str = DEFAULT_PATH,
        env: Mapping[str, str] | None = None,
        max_memory: int | None = DEFAULT_MAX_MEMORY,
    ) -> None:
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or not 0 < timeout <= _MAX_TIMEOUT
        ):
            raise ConfigurationError(
                "timeout must be a positive number of seconds (at most 2147483.647)"
            )
        self.timeout = float(timeout)
        self.max_output_bytes = _limit(max_output_bytes, "max_output_bytes", 65536)
        self.max_error_bytes = _limit(max_error_bytes, "max_error_bytes", 8192)
        if commands is not None and any(
            not isinstance(c, str) or not c or ("/" in c and not os.path.isabs(c))
            for c in commands
        ):
            raise ConfigurationError(
                "Commands must be executable names or absolute paths"
            )
        self.commands = None if commands is None else frozenset(commands)
        # A relative directory would be searched from the child's cwd, the workspace, whose files
        # are the agent's to write (see `_spawn`).
        if not isinstance(path, str) or any(
            not os.path.isabs(directory) for directory in path.split(os.pathsep)
        ):
            raise ConfigurationError("path must list absolute directories")
        self.path = path
        self._env = {**(env or {}), "PATH": path}
        self._memory = MemoryLimit(max_memory, path)

    @property
    def max_memory(self) -> int | None:
        return self._memory.max_memory

    def __repr__(self) -> str:
        return (
            f"SubprocessExecutor(timeout={self.timeout:g}, "
            f"max_output_bytes={self.max_output_bytes}, max_error_bytes={self.max_error_bytes}, "
            f"max_memory={self.max_memory})"
        )

    def _program(self, command: str) -> str | None:
        if self.commands is not None and command not in self.commands:
            raise PermissionDenied("Command is not enabled in this executor")
        if os.path.isabs(command):
            return (
                command
                if os.path.isfile(command) and os.access(command, os.X_OK)
                else None
            )
        if "/" in command:
            raise InvalidInput("Commands must be executable names or absolute paths")
        return shutil.which(command, path=self.path)

    async def run(
        self, command: str, args: Sequence[str], workspace: Path
    ) -> CommandResult:
        program = self._program(command)
        if program is None:
            return CommandResult("", "", None, unavailable=True)
        launch = self._memory.launch(command, args, program)
        # Its own temporary directory, removed once it has ended: a `sort` that spills to disk
        # (more often under max_memory) and is killed at its timeout leaves its files there.
        scratch = tempfile.mkdtemp(prefix="interaction-command-")
        try:
            return await self._run(launch, workspace, scratch)
        finally:
            await _remove(scratch)

    async def _run(
        self, launch: Launch, workspace: Path, scratch: str
    ) -> CommandResult:
        loop = asyncio.get_running_loop()
        # A missing workspace raises FileNotFoundError: not the program's absence.
        transport, capture = await loop.subprocess_exec(
            lambda: _Capture(self.max_output_bytes + 1, self.max_error_bytes + 1),
            *launch.argv,
            executable=_executable(loop, launch.program),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=workspace,
            env={**self._env, "TMPDIR": scratch},
            start_new_session=True,
            preexec_fn=launch.preexec_fn,
        )
        timed_out = False
        try:
            async with asyncio.timeout(self.timeout):
                await capture.stop
        except TimeoutError:
            timed_out = True
        finally:
            # Also after a normal exit: children it left behind in its group go with it.
            _kill_group(transport.get_pid())
            if not capture.finished.done():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_REAP_TIMEOUT):
                        await asyncio.shield(capture.finished)
            transport.close()
        code = transport.get_returncode()
        stopped = capture.filled or timed_out
        return CommandResult(
            _decode(
                capture.stdout, cut=stopped or len(capture.stdout) >= capture.out_limit
            ),
            _decode(
                capture.stderr, cut=stopped or len(capture.stderr) >= capture.err_limit
            ),
            None if stopped or code is None else (128 - code if code < 0 else code),
            truncated=capture.filled,
            timed_out=timed_out,
        )


async def _remove(directory: str) -> None:
    try:
        os.rmdir(directory)  # mostly empty: no thread needed
    except FileNotFoundError:
        pass
    except OSError:
        # Shielded: a second cancellation must not leave the files behind.
        await asyncio.shield(asyncio.to_thread(shutil.rmtree, directory, True))


def _executable(loop: asyncio.AbstractEventLoop, program: str) -> str | None:
    """What to pass as `executable`, argv[0] being the command as given: a program's messages then
    read `cat: missing: …`, as from a shell, not `/usr/bin/cat: …` with a directory of the machine.

    asyncio's own loop hands `executable` to `subprocess.Popen`, which runs it and leaves argv[0]
    alone. uvloop overwrites argv[0] with it instead; there nothing is passed, and the child finds
    the bare name by searching its own `PATH`: the same absolute directories, in the same order,
    that `program` was found in.
    """
    return program if isinstance(loop, asyncio.BaseEventLoop) else None


class _Capture(asyncio.SubprocessProtocol):
    """Keeps at most `out_limit` bytes of stdout and `err_limit` of stderr; `stop` resolves when
    the process has exited and closed its pipes (`finished`), or when stdout reached its limit."""

    def __init__(self, out_limit: int, err_limit: int) -> None:
        loop = asyncio.get_running_loop()
        self.stdout, self.stderr = bytearray(), bytearray()
        self.out_limit, self.err_limit = out_limit, err_limit
        self.filled = False
        self.stop: asyncio.Future[None] = loop.create_future()
        self.finished: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        into, limit = (
            (self.stdout, self.out_limit) if fd == 1 else (self.stderr, self.err_limit)
        )
        room = limit - len(into)
        if room > 0:
            into += data[:room]
        if fd == 1 and len(into) >= limit and not self.filled:
            self.filled = True
            _resolve(self.stop)

    def connection_lost(self, exc: Exception | None) -> None:
        # Called once the process has exited and every pipe is closed.
        _resolve(self.finished)
        _resolve(self.stop)


def _decode(data: bytearray, *, cut: bool) -> str:
    """UTF-8 with U+FFFD for invalid bytes; output cut short loses its unfinished last character
    instead of gaining a U+FFFD."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    return decoder.decode(bytes(data), final=not cut)


def _resolve(future: "asyncio.Future[None]") -> None:
    if not future.done():
        future.set_result(None)


def _kill_group(pid: int) -> None:
    # The child leads its own session, so its process group id is its pid: SIGKILL reaches every
    # process it started that did not leave the group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
