"""The sandbox: a cooperative permission policy (default deny) and workspace file access.

It is not OS isolation (seed 003): tools ask it before acting, and it refuses what the policy does not
grant. Lists hold exact names or `*`; `read`, `write` and `execute` are flags.
"""

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from ..contracts import js_trim
from ..errors import ConfigurationError, InvalidInput, PermissionDenied

PermissionKind = Literal["tools", "mcp", "skills", "network", "command_ids"]
_LIST_KINDS: tuple[PermissionKind, ...] = (
    "tools",
    "mcp",
    "skills",
    "network",
    "command_ids",
)


@dataclass(frozen=True)
class CommandResult:
    """What a command printed and how it ended.

    `exit_code` is None when the process did not exit by itself: the executor stopped it because
    stdout reached its limit (`truncated`) or it outlived its timeout (`timed_out`), or the program
    is not installed (`unavailable`). A process killed by a signal the executor did not send
    exits with 128 + the signal number, as in a shell.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    truncated: bool = False
    timed_out: bool = False
    unavailable: bool = False


class CommandExecutor(Protocol):
    """Runs one fixed program with separate arguments in the workspace, never through a shell.

    Cancellation (asyncio) must stop the program. A timeout, an output limit and a missing program
    are reported in the `CommandResult`, not raised.
    """

    async def run(
        self, command: str, args: Sequence[str], workspace: Path
    ) -> CommandResult: ...


class Sandbox:
    """Default-deny permissions for tools, MCP servers, skills, network origins and the filesystem.

    Command-protocol ids (`command_ids`, docs/commands.md) are the exception: all are granted unless
    a list is given, since the dispatcher bound in code is already their allow-list.
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

    def allows(self, kind: PermissionKind, name: str) -> bool:
        entries = self._lists.get(kind)
        return entries is not None and ("*" in entries or name in entries)

    def check(self, kind: PermissionKind, name: str) -> None:
        """Raise `PermissionDenied("Permission denied: kind:name")` unless the policy grants it."""
        if not self.allows(kind, name):
            raise PermissionDenied(f"Permission denied: {kind}:{name}")

    def policy(self) -> dict[str, object]:
        """The policy as plain data, for `check-config` and logs."""
        data: dict[str, object] = {key: sorted(self._lists[key]) for key in _LIST_KINDS}
        data.update(read=self.read, write=self.write, execute=self.execute)
        return data

    def resolve(self, path: str) -> Path:
        """The real path of `path` inside the workspace; symlinks that lead outside it are refused."""
        if self.workspace is None:
            raise PermissionDenied("Permission denied: workspace path")
        root = self.workspace.resolve()
        try:
            target = (root / path).resolve()
        # RuntimeError: a symlink loop, on Python 3.11.
        except (OSError, ValueError, RuntimeError):
            raise PermissionDenied("Permission denied: workspace path") from None
        if target != root and root not in target.parents:
            raise PermissionDenied("Permission denied: workspace path")
        return target

    async def read_text(self, path: str) -> str:
        """A workspace file as UTF-8 text, under the `read` permission."""
        if not self.read:
            raise PermissionDenied("Permission denied: filesystem:read")
        target = self.resolve(path)
        # Bytes, then strict UTF-8: text mode would turn CRLF into LF.
        data = await asyncio.to_thread(target.read_bytes)
        return data.decode("utf-8")

    async def write_text(self, path: str, content: str) -> None:
        """Write a workspace file under the `write` permission; a dangling symlink is refused."""
        if not self.write:
            raise PermissionDenied("Permission denied: filesystem:write")
        if self.workspace is not None:
            link = self.workspace / path
            if link.is_symlink() and not link.exists():
                raise PermissionDenied("Permission denied: symlink")
        target = self.resolve(path)
        await asyncio.to_thread(target.write_text, content, encoding="utf-8")

    async def run(
        self, command: str, args: Sequence[str], *, paths: Sequence[str] = ()
    ) -> CommandResult:
        """Run a command through the executor, under the `execute` permission.

        `paths` are the workspace paths among `args`: each must resolve (through symlinks) inside
        the workspace, checked before anything runs.
        """
        if not self.execute or self.executor is None:
            raise PermissionDenied(
                "Permission denied: execution requires an enabled SandboxExecutor"
            )
        if not isinstance(command, str) or not js_trim(command) or "\0" in command:
            raise InvalidInput("Invalid sandbox command")
        if isinstance(args, str) or not isinstance(args, Sequence):
            raise InvalidInput("Invalid sandbox command")
        if any(not isinstance(a, str) or "\0" in a for a in args):
            raise InvalidInput("Invalid sandbox command")
        if self.workspace is None:
            raise PermissionDenied("Permission denied: workspace path")
        args = list(args)  # a snapshot: the executor gets what was checked
        if paths:
            await asyncio.to_thread(lambda: [self.resolve(path) for path in paths])
        return await self.executor.run(command, args, self.workspace.resolve())
