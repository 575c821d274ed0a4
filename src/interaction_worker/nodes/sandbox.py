"""The sandbox: a cooperative permission policy (default deny) and workspace file access.

It is not OS isolation (docs/tools.md): tools ask it before acting, and it refuses what the policy
does not grant. Lists hold exact names or `*`; `read`, `write` and `execute` are flags. Whatever it
grants, the protected paths (`protected.py`: the worker's own secrets) stay out of reach of its
`read_text`, `write_text` and the paths `run` is told about.
"""

import asyncio
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from ..contracts import js_trim
from ..errors import ConfigurationError, InvalidInput, PermissionDenied
from .descent import Descent, Hidden, WalkTimeout, hidden_below
from .executor import CommandExecutor, CommandResult
from .protected import ProtectedPaths, ProtectedSnapshot, identity

WORKSPACE_DENIED = "Permission denied: workspace path"
PROTECTED_DENIED = "Permission denied: protected path"
# How long the walk before a descending command may take when the executor names no timeout.
_DEFAULT_WALK_TIMEOUT = 5.0

PermissionKind = Literal["tools", "mcp", "skills", "network", "command_ids"]
_LIST_KINDS: tuple[PermissionKind, ...] = (
    "tools",
    "mcp",
    "skills",
    "network",
    "command_ids",
)


class Sandbox:
    """Default-deny permissions for tools, MCP servers, skills, network origins and the filesystem.

    Command-protocol ids (`command_ids`, docs/commands.md) are the exception: all are granted unless
    a list is given, since the dispatcher bound in code is already their allow-list.

    `protected` holds the worker's secrets (`ProtectedPaths`): `run` adds the data directory and the
    credential files to it, and no permission reaches them (docs/tools.md).
    """

    def __init__(
        self,
        *,
        tools: Sequence[str] | None = None,
        mcp: Sequence[str] | None = None,
        skills: Sequence[str] | None = None,
        network: Sequence[str] | None = None,
        command_ids: Sequence[str] | None = ("*",),
        read: bool | None = None,
        write: bool | None = None,
        execute: bool | None = None,
        workspace: str | os.PathLike[str] | None = None,
        executor: CommandExecutor | None = None,
        protected: ProtectedPaths | None = None,
    ) -> None:
        for key, flag in (("read", read), ("write", write), ("execute", execute)):
            if flag is not None and not isinstance(flag, bool):
                raise ConfigurationError(f"Invalid sandbox {key} permission")
        lists = {
            "tools": tools,
            "mcp": mcp,
            "skills": skills,
            "network": network,
            "command_ids": command_ids,
        }
        for key, entries in lists.items():
            if entries is None:
                continue
            if isinstance(entries, str) or not isinstance(entries, Sequence):
                raise ConfigurationError(f"Invalid sandbox {key} permissions")
            if any(not isinstance(e, str) or not js_trim(e) for e in entries):
                raise ConfigurationError(f"Invalid sandbox {key} permissions")
        self._lists: dict[str, frozenset[str]] = {
            key: frozenset(entries or ()) for key, entries in lists.items()
        }
        self.read = bool(read)
        self.write = bool(write)
        self.execute = bool(execute)
        self.workspace = Path(workspace) if workspace is not None else None
        self.executor = executor
        self.protected = protected if protected is not None else ProtectedPaths()

    def allows(self, kind: PermissionKind, name: str) -> bool:
        entries = self._lists.get(kind)
        return entries is not None and ("*" in entries or name in entries)

    def check(self, kind: PermissionKind, name: str) -> None:
        """Raise `PermissionDenied("Permission denied: kind:name")` unless the policy grants it."""
        entries = self._lists.get(kind)  # `allows`, inline: asked once per call
        if entries is None or ("*" not in entries and name not in entries):
            raise PermissionDenied(f"Permission denied: {kind}:{name}")

    def policy(self) -> dict[str, object]:
        """The policy as plain data, for `check-config` and logs."""
        data: dict[str, object] = {key: sorted(self._lists[key]) for key in _LIST_KINDS}
        data.update(read=self.read, write=self.write, execute=self.execute)
        return data

    def check_workspace(self) -> None:
        """Refuse a workspace that is a protected directory or lies inside one (the data directory).

        Raises:
            ConfigurationError: naming `workspace`.
        """
        if self.workspace is None:
            return
        if self.protected.snapshot().refuses(Path(os.path.realpath(self.workspace))):
            raise ConfigurationError(
                "workspace must not be inside data_dir or another directory the worker keeps "
                "its secrets in: no tool may read them"
            )

    def resolve(self, path: str) -> Path:
        """The real path of `path` inside the workspace; symlinks that lead outside it and the
        protected paths are refused (blocking: it calls `stat`)."""
        return self._resolve(path, self.protected.snapshot())

    def _resolve(self, path: str, protected: ProtectedSnapshot) -> Path:
        if self.workspace is None:
            raise PermissionDenied(WORKSPACE_DENIED)
        root = self.workspace.resolve()
        try:
            target = (root / path).resolve()
        # RuntimeError: a symlink loop, on Python 3.11.
        except (OSError, ValueError, RuntimeError):
            raise PermissionDenied(WORKSPACE_DENIED) from None
        if target != root and root not in target.parents:
            raise PermissionDenied(WORKSPACE_DENIED)
        if protected.refuses(target):
            raise PermissionDenied(PROTECTED_DENIED)
        return target

    async def read_text(self, path: str) -> str:
        """A workspace file as UTF-8 text, under the `read` permission."""
        if not self.read:
            raise PermissionDenied("Permission denied: filesystem:read")
        data = await asyncio.to_thread(self._read_bytes, path)
        # Bytes, then strict UTF-8: text mode would turn CRLF into LF.
        return data.decode("utf-8")

    async def write_text(self, path: str, content: str) -> None:
        """Write a workspace file under the `write` permission; a dangling symlink is refused."""
        if not self.write:
            raise PermissionDenied("Permission denied: filesystem:write")
        await asyncio.to_thread(self._write, path, content.encode("utf-8"))

    def _read_bytes(self, path: str) -> bytes:
        protected = self.protected.snapshot()
        fd = os.open(self._resolve(path, protected), _READ_FLAGS)
        with open(fd, "rb") as file:
            self._check_opened(fd, path, protected)
            return file.read()

    def _write(self, path: str, data: bytes) -> None:
        if self.workspace is not None:
            link = self.workspace / path
            if link.is_symlink() and not link.exists():
                raise PermissionDenied("Permission denied: symlink")
        protected = self.protected.snapshot()
        fd = os.open(self._resolve(path, protected), _WRITE_FLAGS, 0o666)
        with open(fd, "wb") as file:
            # Checked before a byte is changed: only then truncated.
            self._check_opened(fd, path, protected)
            file.truncate()
            file.write(data)

    def _check_opened(self, fd: int, path: str, protected: ProtectedSnapshot) -> None:
        """The file opened is the one checked: a path changed in between (a link swapped in) may
        lead elsewhere, and a hard link is only known once the file is open."""
        opened = os.fstat(fd)
        if protected.is_protected(opened):
            raise PermissionDenied(PROTECTED_DENIED)
        try:
            again = os.stat(self._resolve(path, protected))
        except FileNotFoundError:
            raise PermissionDenied(WORKSPACE_DENIED) from None
        if identity(again) != identity(opened):
            raise PermissionDenied(WORKSPACE_DENIED)

    async def run(
        self, command: str, args: Sequence[str], *, paths: Sequence[str] = ()
    ) -> CommandResult:
        """Run a command through the executor, under the `execute` permission.

        `paths` are the workspace paths among `args`: each must resolve (through symlinks) inside
        the workspace and be no protected path, checked before anything runs.
        """
        executor = self._check_execute()
        if not isinstance(command, str) or not js_trim(command) or "\0" in command:
            raise InvalidInput("Invalid sandbox command")
        if isinstance(args, str) or not isinstance(args, Sequence):
            raise InvalidInput("Invalid sandbox command")
        if any(not isinstance(a, str) or "\0" in a for a in args):
            raise InvalidInput("Invalid sandbox command")
        if self.workspace is None:
            raise PermissionDenied(WORKSPACE_DENIED)
        args = list(args)  # a snapshot: the executor gets what was checked
        if paths:
            await asyncio.to_thread(self._resolve_all, paths)
        return await executor.run(command, args, self.workspace.resolve())

    async def skip_protected(self, descent: Descent, args: Sequence[str]) -> list[str]:
        """The argv of a command that walks below its paths: `args` as they are when it would meet
        no protected entry, else `descent.skip` of those it would meet (docs/tools.md).

        Raises:
            PermissionDenied: as `run` would, or a root is itself protected or outside.
            TimeoutError: the walk outlived the executor's timeout.
        """
        self._check_execute()
        timeout = getattr(self.executor, "timeout", None)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            timeout = _DEFAULT_WALK_TIMEOUT
        deadline = time.monotonic() + timeout
        try:
            hidden = await asyncio.to_thread(self._hidden, descent, deadline)
        except WalkTimeout:
            raise TimeoutError from None
        return descent.skip(hidden) if hidden else list(args)

    def _hidden(self, descent: Descent, deadline: float) -> list[Hidden]:
        protected = self.protected.snapshot()
        found: list[Hidden] = []
        for root in descent.roots:
            real = self._resolve(root, protected)
            found += hidden_below(real, root, descent.depth, protected, deadline)
        return found

    def _resolve_all(self, paths: Sequence[str]) -> None:
        protected = self.protected.snapshot()
        for path in paths:
            self._resolve(path, protected)

    def _check_execute(self) -> CommandExecutor:
        if not self.execute or self.executor is None:
            raise PermissionDenied(
                "Permission denied: execution requires an enabled SandboxExecutor"
            )
        return self.executor


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# The path is real when it is opened: a final component that became a link since is refused.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | _CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | _CLOEXEC
