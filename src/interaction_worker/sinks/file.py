"""A sink that appends one JSON line per delivery to a file, with group-committed fsyncs."""

import asyncio
import contextlib
import contextvars
import logging
import os
from pathlib import Path
from typing import Any

from ..contracts import OutputRequest
from ..nodes import DeliveryContext
from ._receipts import DEFAULT_TIMEOUT, check_timeout

_LOGGER = logging.getLogger("interaction_worker.sinks.file")
_WRITE_FAILED = {"code": "SINK_WRITE_FAILED", "message": "File sink write failed"}
_Pending = tuple[bytes, asyncio.Future[bool]]


def _open(path: Path) -> int:
    """Open for appending (0600 when created, parents made); end a torn last line first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not os.path.lexists(path)
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        size = os.fstat(fd).st_size
        # A crash or a failed write can leave a partial line; the next line must not join it.
        if size and os.pread(fd, 1, size - 1) != b"\n":
            _write_all(fd, b"\n")
        if created:
            # The new directory entry must be durable too, or a crash can lose the whole file.
            directory = os.open(path.parent, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _commit(fd: int | None, path: Path, data: bytes) -> int:
    """Write `data` and fsync it; returns the descriptor, closed (and the error raised) on failure."""
    if fd is None:
        fd = _open(path)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        # After a failed fsync the kernel may have dropped the dirty pages: never trust this
        # descriptor again, the next batch reopens the file.
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return fd


class FileSink:
    """Appends each delivery's wire JSON as one line; `accepted` only once an fsync covers the line.

    Group commit: one writer task at a time takes every pending line, writes them and fsyncs once
    for all of them, so many concurrent deliveries share few fsyncs (`fsync_count` counts them).
    The file is opened on the first delivery. A failed write or fsync makes the receipts of that
    batch `unknown` (the lines may or may not be in the file) and the next batch reopens the file.
    `close()` waits for pending lines and closes the file; a later delivery opens it again.
    `timeout` is what a fan-out (or `run`, for a lone sink) waits for a receipt.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        name: str = "file",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.name = name
        self.timeout = check_timeout(timeout)
        self.path = Path(path)
        self.fsync_count = 0
        self._fd: int | None = None
        self._pending: list[_Pending] = []
        self._writer: asyncio.Task[None] | None = None

    async def deliver(
        self, request: OutputRequest, context: DeliveryContext
    ) -> dict[str, Any]:
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append((request.to_json() + b"\n", done))
        if self._writer is None or self._writer.done():
            # In a context of its own: the writer outlives this delivery (it writes the batches of
            # those behind it), and must not keep this delivery's context variables alive.
            self._writer = asyncio.create_task(
                self._drain(), context=contextvars.Context()
            )
        if await done:
            return {"deliveryId": request.delivery_id, "status": "accepted"}
        return {
            "deliveryId": request.delivery_id,
            "status": "unknown",
            "error": dict(_WRITE_FAILED),
        }

    async def close(self) -> None:
        """Wait until every pending line is written and fsynced, then close the file."""
        while self._writer is not None and not self._writer.done():
            await asyncio.wait({self._writer})
        # Handed off first: a delivery arriving meanwhile opens a descriptor of its own.
        fd, self._fd = self._fd, None
        if fd is not None:
            await asyncio.to_thread(os.close, fd)

    async def _drain(self) -> None:
        # Deliveries arriving while a batch is written and fsynced wait for the next batch: the
        # loop ends only when nothing is pending, with no await between that check and the end.
        while self._pending:
            batch, self._pending = self._pending, []
            data = b"".join(line for line, _ in batch)
            try:
                self._fd = await asyncio.to_thread(_commit, self._fd, self.path, data)
                self.fsync_count += 1
                ok = True
            except OSError as error:
                self._fd = None
                ok = False
                _LOGGER.warning(
                    "file sink %s: write failed (%s)", self.name, error.strerror
                )
            except asyncio.CancelledError:
                self._fd = None
                for _, done in (*batch, *self._pending):
                    done.cancel()
                self._pending = []
                raise
            except Exception as error:  # a bug, not the disk: its deliveries raise it
                self._fd = None
                for _, done in batch:
                    if not done.done():
                        done.set_exception(error)
                continue
            for _, done in batch:
                if not done.done():  # its delivery may have been cancelled meanwhile
                    done.set_result(ok)
