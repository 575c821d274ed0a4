"""What a command that walks below its paths (`grep -r`, `find`, `du`, `ls`) would meet of the
protected paths, found beforehand so that the program can be told to skip it.

The walk does what those programs do: it follows a path given on the command line, never a symbolic
link met below it (`grep -r`, `find` and `du` do not), crosses mount points (they do too), and goes
as deep as the program reads. It compares each directory (one `stat` each, which also catches a
bind mount) and each regular file (a hard link) to the protected entries by device and inode. Only
what it finds changes the command line; a workspace without protected entries runs the command as
built.
"""

import os
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .protected import ProtectedSnapshot

# The clock is read once per this many entries.
_CLOCK_EVERY = 256


@dataclass(frozen=True)
class Hidden:
    """A protected entry below a command's path: `path` as the program prints it (the path given,
    `/`, then the names below it), `name` its last part."""

    path: str
    name: str
    directory: bool


@dataclass(frozen=True)
class Descent:
    """How a command walks: the workspace paths it descends (`roots`), how many levels below them it
    reads (`depth`, None: all), and the argv that has it skip the given entries (`skip`)."""

    roots: tuple[str, ...]
    depth: int | None
    skip: Callable[[Sequence[Hidden]], list[str]]


class WalkTimeout(Exception):
    """The walk outlived its deadline."""


def hidden_below(
    root: Path,
    shown: str,
    depth: int | None,
    protected: ProtectedSnapshot,
    deadline: float,
) -> list[Hidden]:
    """The protected entries below the real directory `root` (given to the program as `shown`), down
    to `depth` levels; a protected directory is reported, not entered. Unreadable directories are
    passed over: the program cannot read them either.

    Raises:
        WalkTimeout: past `deadline` (`time.monotonic()`).
    """
    found: list[Hidden] = []
    if depth == 0 or not protected:
        return found
    stack: list[tuple[str, str, int]] = [(str(root), shown, 1)]
    counted = 0
    while stack:
        directory, prefix, level = stack.pop()
        try:
            with os.scandir(directory) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            counted += 1
            if counted % _CLOCK_EVERY == 0 and time.monotonic() > deadline:
                raise WalkTimeout
            try:
                if entry.is_symlink():
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
                if not is_dir and not entry.is_file(follow_symlinks=False):
                    continue
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            shown_path = f"{prefix}/{entry.name}"
            if protected.is_protected(info):
                found.append(Hidden(shown_path, entry.name, is_dir))
            elif stat.S_ISDIR(info.st_mode) and (depth is None or level < depth):
                stack.append((entry.path, shown_path, level + 1))
    found.sort(key=lambda hidden: hidden.path)
    return found
