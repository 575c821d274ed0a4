"""The protected paths: the worker's own secrets, which no built-in tool reads, lists or searches.

One registry (`ProtectedPaths`, held by the sandbox) of files and directories, filled by whoever writes
or reads a secret: the data directory (the embedded server's token and configuration, the console's
token), and each file a credential is read from (a NATS creds file, a TLS key). docs/tools.md says
what the tools do with them.

A path is compared by what it is, not by how it is spelled: by device and inode, so that a symbolic
link, a hard link, a bind mount, `..` or an absolute spelling all reach the same answer, and by its
real path too, for entries that do not exist yet (a token file written after the worker started). A
directory protects everything below it. The registered paths are looked at again for each check
(`snapshot`): a few `stat` calls, and one more per directory above the checked path.
"""

import os
import stat
from collections.abc import Iterable
from pathlib import Path

Identity = tuple[int, int]  # (st_dev, st_ino)

# The environment of the worker and of the processes it starts (the embedded server, MCP servers)
# holds credentials, and each is a file there (`/proc/PID/environ`), readable by the worker's user.
PROCESS_FILES = Path("/proc")

# Files with several links below the protected directories of one device are looked for only when a
# checked file on that device has several links itself, and this many entries at most: past it, any
# file with several links on that device is taken for one of them.
_MAX_LINKED_SCAN = 100_000


def identity(info: os.stat_result) -> Identity:
    return (info.st_dev, info.st_ino)


class ProtectedPaths:
    """Files and directories that no built-in tool may read, list or search (docs/tools.md).

    `add` takes a path that need not exist yet; it is kept absolute, as spelled, and resolved at
    each check, so a symbolic link registered is followed to what it names then.
    """

    def __init__(self, paths: Iterable[str | os.PathLike[str]] = ()) -> None:
        self._paths: dict[Path, None] = {}
        for path in paths:
            self.add(path)

    def __repr__(self) -> str:
        return f"ProtectedPaths({len(self._paths)} paths)"

    def add(self, path: str | os.PathLike[str]) -> None:
        self._paths.setdefault(Path(os.path.abspath(path)), None)

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(self._paths)

    def snapshot(self) -> "ProtectedSnapshot":
        """What the protected paths are now (blocking: it calls `stat`)."""
        return ProtectedSnapshot(self._paths)


class ProtectedSnapshot:
    """The identities of the protected paths at one moment, for the checks of one call."""

    def __init__(self, paths: Iterable[Path]) -> None:
        self.real = tuple(Path(os.path.realpath(path)) for path in paths)
        self.directories: set[Identity] = set()
        self.files: set[Identity] = set()
        for real in self.real:
            try:
                info = os.stat(real)
            except OSError:
                continue  # nothing there yet: its real path still counts
            if stat.S_ISDIR(info.st_mode):
                self.directories.add(identity(info))
            else:
                self.files.add(identity(info))
        # Per device: hard links never cross file systems, so `/proc` is never walked for a file.
        self._linked: dict[int, set[Identity] | None] = {}

    def __bool__(self) -> bool:
        return bool(self.real)

    def is_protected(self, info: os.stat_result) -> bool:
        """Whether the entry `info` describes is a protected file or directory itself."""
        key = identity(info)
        if stat.S_ISDIR(info.st_mode):
            return key in self.directories
        if key in self.files:
            return True
        return info.st_nlink > 1 and self._is_linked(key)

    def refuses(self, target: Path) -> bool:
        """Whether `target`, a real path (no symbolic link in it), is protected or lies below a
        protected directory, whether it exists or not."""
        if not self.real:
            return False
        if any(target == real or real in target.parents for real in self.real):
            return True
        try:
            if self.is_protected(os.stat(target)):
                return True
        except OSError:
            pass
        # A protected directory may also be reached under another name: a bind mount.
        for parent in target.parents:
            try:
                if identity(os.stat(parent)) in self.directories:
                    return True
            except OSError:
                continue
        return False

    def _is_linked(self, key: Identity) -> bool:
        """Whether `key` is a file below a protected directory that has another name elsewhere."""
        device = key[0]
        if device not in self._linked:
            self._linked[device] = self._scan_linked(device)
        linked = self._linked[device]
        return linked is None or key in linked

    def _scan_linked(self, device: int) -> set[Identity] | None:
        """The files with several links below the protected directories on `device`; None when
        there are too many entries to look at."""
        found: set[Identity] = set()
        seen = 0
        stack = [str(real) for real in self.real if _on(real, device)]
        while stack:
            try:
                with os.scandir(stack.pop()) as listing:
                    entries = list(listing)
            except OSError:
                continue
            for entry in entries:
                seen += 1
                if seen > _MAX_LINKED_SCAN:
                    return None
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if info.st_dev != device:
                    continue  # a mount point: nothing below it links here
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
                elif stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                    found.add(identity(info))
        return found


def _on(path: Path, device: int) -> bool:
    """Whether `path` is a directory on `device`."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_dev == device
