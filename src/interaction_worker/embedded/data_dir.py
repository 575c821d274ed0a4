"""The data directory: its lock, the tokens and the files that say where the server is.

`flock` rather than a pid file alone: the kernel releases a lock when its last holder dies, so a
lock left by a killed process needs no liveness check that a reused pid would fool.
"""

import contextlib
import fcntl
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

from .errors import DataDirInUse, EmbeddedServerError, ForeignDataDir

# `secrets.token_urlsafe` output; anything else in the token file was not written by us.
_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{16,}")
# What the first use of a data directory leaves there for good: `run`'s lock (never removed), the
# console's token, `mcp login`'s tokens. A directory holding files but none of these was never a
# data directory: its files are the user's, and a `token` or `url` among them proves nothing.
MARKS = frozenset(("lock", "console-token", "mcp-auth"))


def check_own(data_dir: Path) -> None:
    """Raise `ForeignDataDir` when `data_dir` holds entries but no mark of a data directory: the
    lock, token, URL and server configuration written there would replace a user's files."""
    names = [entry.name for entry in data_dir.iterdir()]
    if names and not MARKS.intersection(names):
        raise ForeignDataDir()


def token_path(data_dir: Path) -> Path:
    """The worker's secret: the password of the embedded server's `worker` user."""
    return data_dir / "token"


def ui_token_path(data_dir: Path) -> Path:
    """The browsers' secret: the password of the embedded server's read-only `ui` user. Like the
    rest of the data directory, no tool may read it."""
    return data_dir / "ui-token"


def read_embedded_credentials(data_dir: Path) -> tuple[str, str] | None:
    """Return `(url, token)` of the embedded server recorded in `data_dir`, if both are there."""
    try:
        url = (data_dir / "url").read_text(encoding="utf-8").strip()
        token = token_path(data_dir).read_text(encoding="utf-8").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not url or not token:
        return None
    return url, token


@contextlib.contextmanager
def data_dir_errors() -> Iterator[None]:
    """Turn a file-system failure in the data directory into one line without a path."""
    try:
        yield
    except OSError as exc:
        raise EmbeddedServerError(
            f"cannot prepare the data directory: {exc.strerror or exc}"
        ) from None


def lock(path: Path) -> int:
    """Lock `path` for this process and return its descriptor; the lock lasts until it is closed.

    `flock` rather than a pid file alone: the kernel releases the lock when its last holder dies,
    so a lock left by a killed process never needs a liveness check that a reused pid would fool.

    Raises:
        DataDirInUse: a live process holds the lock.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = lock_holder(fd)
        os.close(fd)
        raise DataDirInUse(holder) from None
    except BaseException:
        os.close(fd)
        raise
    write_lock(fd, os.getpid())
    return fd


def write_lock(fd: int, *pids: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, "".join(f"{pid}\n" for pid in pids).encode(), 0)


def lock_holder(fd: int) -> int | None:
    """The first live pid the lock file names: the worker, else its server (outliving it)."""
    try:
        text = os.pread(fd, 256, 0).decode("ascii", "replace")
    except OSError:
        return None
    for word in text.split():
        if word.isdigit() and alive(int(word)):
            return int(word)
    return None


def alive(pid: int) -> bool:
    if pid <= 0:
        return False  # kill(0) and kill(-1) would address groups
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def load_or_create_token(path: Path) -> str:
    token = secrets.token_urlsafe(32)
    try:
        # O_EXCL with mode 0600: the token is never readable by others, not even briefly.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        os.chmod(path, 0o600)
        token = path.read_text(encoding="utf-8").strip()
        if not _TOKEN_RE.fullmatch(token):
            raise EmbeddedServerError(
                "the token file in the data directory is malformed; delete it to get a new token"
            ) from None
        return token
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token


def write_private(path: Path, text: str) -> None:
    """Replace `path` atomically with a mode-0600 file holding `text`."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)  # the umask may have removed bits we need
        f.write(text)
    os.replace(tmp, path)
