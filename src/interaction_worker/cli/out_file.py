"""`--out FILE` of a command that writes as it goes (`record`): FILE is replaced only by output that
ended well, never by a failed run (docs/replay.md 2).

The output goes to a new file beside FILE, renamed onto it at the end: a rename is atomic, so FILE
holds either what it held before or the whole new output. `-` is stdout; an existing FILE that is
not a regular file (a pipe, `/dev/null`) is written directly, since there is nothing to replace.
"""

import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO

from .output import UsageError

STDOUT = "-"


class OutFile:
    """One `--out`, opened by `open()` and then ended by exactly one of `commit()` (the output is
    FILE now), `abandon()` (nothing of it is kept) or `keep()` (a partial output: it replaces no
    earlier FILE)."""

    def __init__(self, given: Path) -> None:
        self.given = given
        self._stdout = str(given) == STDOUT
        self._target = _resolved(given)
        self._aside: Path | None = None
        self._file: BinaryIO | None = None

    @property
    def name(self) -> str:
        """What messages call the output: `stdout`, or the path as given."""
        return "stdout" if self._stdout else str(self.given)

    def open(self) -> BinaryIO:
        """The stream to write to.

        Raises:
            UsageError: FILE's directory cannot be written, or FILE is a directory.
        """
        if self._stdout:
            self._file = sys.stdout.buffer
            return self._file
        try:
            existing = self._target.stat()
        except FileNotFoundError:
            existing = None
        except OSError as error:
            raise self._unwritable(error) from None
        if existing is not None and stat.S_ISDIR(existing.st_mode):
            raise UsageError(f"cannot write {self.given}: it is a directory")
        try:
            if existing is not None and not stat.S_ISREG(existing.st_mode):
                self._file = self._target.open("wb")
                return self._file
            fd, aside = tempfile.mkstemp(
                prefix=f"{self._target.name}.",
                suffix=".partial",
                dir=self._target.parent,
            )
        except OSError as error:
            raise self._unwritable(error) from None
        self._aside = Path(aside)
        # The mode FILE has, or the one a plain open() would give (mkstemp's is 0600).
        os.fchmod(fd, stat.S_IMODE(existing.st_mode) if existing else 0o666 & ~_umask())
        self._file = os.fdopen(fd, "wb")
        return self._file

    def commit(self) -> None:
        """The output is complete: it becomes FILE."""
        self._close()
        if self._aside is not None:
            os.replace(self._aside, self._target)
            self._aside = None

    def abandon(self) -> None:
        """Nothing worth keeping was written: FILE stays as it was, the file beside it goes."""
        self._close()
        if self._aside is not None:
            self._aside.unlink(missing_ok=True)
            self._aside = None

    def keep(self) -> str:
        """A partial output: it becomes FILE when there was none, else it stays beside FILE, which
        keeps its earlier content. Returns where it is, for a message."""
        self._close()
        if self._aside is None:
            return self.name
        aside, self._aside = self._aside, None
        try:
            # Linked, not renamed: the link fails if FILE appeared meanwhile; nothing is replaced.
            os.link(aside, self._target)
        except OSError:
            return str(aside)
        aside.unlink(missing_ok=True)
        return self.name

    def _close(self) -> None:
        file, self._file = self._file, None
        if file is None:
            return
        if self._stdout:
            file.flush()
        else:
            file.close()

    def _unwritable(self, error: OSError) -> UsageError:
        reason = error.strerror or "not writable"
        return UsageError(f"cannot write {self.given}: {reason}")


def _resolved(given: Path) -> Path:
    """FILE, through its symlinks: replacing a link would leave its target stale."""
    try:
        return given.resolve(strict=False)
    except (OSError, RuntimeError):  # a symlink loop: the open reports it
        return given


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
