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

# Files with several links below the protected directories are looked for only when a checked file
# has several links itself, and this many entries at most: past it, any file with several links is
# taken for one of them.
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
        self._linked: set[Identity] | None = None
        self._linked_complete = True

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
        if self._linked is None:
            self._linked = self._scan_linked()
        return key in self._linked or not self._linked_complete

    def _scan_linked(self) -> set[Identity]:
        found: set[Identity] = set()
        seen = 0
        stack = [real for real in self.real if real.is_dir()]
        while stack:
            try:
                entries = list(os.scandir(stack.pop()))
            except OSError:
                continue
            for entry in entries:
                seen += 1
                if seen > _MAX_LINKED_SCAN:
                    self._linked_complete = False
                    return found
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        info = entry.stat(follow_symlinks=False)
                        if info.st_nlink > 1:
                            found.add(identity(info))
                except OSError:
                    continue
        return found
