"""The upward search for `worker.yaml` and `.interaction/`, bounded as git bounds its own
(docs/configuration.md 3).

`run` starts the MCP server commands its file names, so a file found by searching must be the
user's own: the search looks in the start directory and its parents, never in a directory the user
does not own, never across a filesystem boundary and never above the home directory (whose own
files are still found), and it refuses what it finds there that belongs to another user or that
group or others may write.
"""

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigurationError


class UnsafeFile(ConfigurationError):
    """The search found a file or directory that another user owns or may write."""


@dataclass(frozen=True)
class SearchBounds:
    """Who searches, and where the search ends.

    Attributes:
        uid: the user whose directories and files the search accepts.
        home: the directory above which it never looks (its own entries are still found), or
            None for no such limit.
    """

    uid: int
    home: Path | None

    @classmethod
    def current(cls) -> "SearchBounds":
        """This process's user, and `$HOME` (or the password database's home without it)."""
        try:
            home: Path | None = Path.home()
        except RuntimeError:  # no HOME and no entry in the password database
            home = None
        return cls(os.geteuid(), home)


def find_upwards(
    name: str,
    start: Path,
    *,
    directory: bool = False,
    bounds: SearchBounds | None = None,
) -> Path | None:
    """`start/name`, else the same name in the nearest parent that has it, within `bounds`.

    Raises:
        UnsafeFile: the nearest one is owned by another user or writable by group or others.
    """
    bounds = SearchBounds.current() if bounds is None else bounds
    start = start.absolute()
    home = _identity(bounds.home)
    device: int | None = None
    for folder in (start, *start.parents):
        try:
            info = folder.stat()
        except OSError:
            return None
        device = info.st_dev if device is None else device
        if info.st_dev != device or info.st_uid != bounds.uid:
            return None
        found = _entry(folder / name, directory=directory, uid=bounds.uid)
        if found is not None:
            return found
        if (info.st_dev, info.st_ino) == home:
            return None
    return None


def _entry(candidate: Path, *, directory: bool, uid: int) -> Path | None:
    try:
        info = candidate.stat()
    except OSError:
        return None
    if stat.S_ISDIR(info.st_mode) != directory or not (
        directory or stat.S_ISREG(info.st_mode)
    ):
        return None
    explicit = "--data-dir" if directory else "--config or INTERACTION_CONFIG"
    if info.st_uid != uid:
        raise UnsafeFile(
            f"refusing {candidate}: it belongs to another user (uid {info.st_uid}); "
            f"name the one to use with {explicit}"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeFile(
            f"refusing {candidate}: group or others may write it (mode "
            f"{stat.S_IMODE(info.st_mode):o}: `chmod go-w` it, or name the one to use with "
            f"{explicit})"
        )
    return candidate


def _identity(path: Path | None) -> tuple[int, int] | None:
    if path is None:
        return None
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino
