"""Where an MCP server's OAuth tokens live (docs/configuration.md, "MCP servers behind OAuth").

One record per server, a JSON object (`records.py` says what is in it), kept by a `TokenStore`:

- `FileTokenStore`: `<data_dir>/mcp-auth/<key>.json`, mode 0600 in a directory of mode 0700, written
  whole and renamed into place, so a reader never sees half a record. Used without a NATS URL (the
  embedded server), where one machine holds the worker and the person who signs in.
- `KvTokenStore` (`kv_store.py`): the key-value bucket `interaction_mcp_auth`, one key per server,
  shared by every worker of a fleet.

Both offer a refresh lease (`SERVER.refresh`): the worker that holds it is the only one spending the
refresh token; the others wait, then read the tokens it stored. `<key>` is the server's name as a
subject key (`=XX` for each byte outside `[A-Za-z0-9_-]`), valid as a file name and as a key.
"""

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

from ...contracts.keys import subject_key

_LOGGER = logging.getLogger("interaction_worker.mcp")
LEASE_SECONDS = (
    30.0  # the longest a refresh may hold the lease before another worker takes it
)
_POLL = 0.05


class TokenStoreError(Exception):
    """The store could not be read or written (the message names the server, never a value)."""


class TokenStore(Protocol):
    """What the providers and `mcp login` need of a place that keeps tokens."""

    async def read(self, server: str) -> dict[str, Any] | None:
        """The server's record, or None when there is none (or it cannot be understood)."""
        ...

    async def write(self, server: str, record: dict[str, Any]) -> None: ...

    async def delete(self, server: str) -> None: ...

    async def revision(self, server: str) -> object:
        """A value that changes whenever the record does (None: no record); cheap to ask."""
        ...

    def lease(self, server: str) -> AbstractAsyncContextManager[None]:
        """Held around a refresh, so that one holder at a time spends the refresh token."""
        ...


def store_key(server: str) -> str:
    """The server's name as a file name and a key-value key."""
    return subject_key(server)


def decode(raw: bytes, server: str) -> dict[str, Any] | None:
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        record = None
    if not isinstance(record, dict):
        _LOGGER.warning("the stored tokens of MCP server %s cannot be read", server)
        return None
    return record


def encode(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()


class FileTokenStore:
    """Records as files in `directory` (created with mode 0700 on the first write)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, server: str) -> Path:
        return self.directory / f"{store_key(server)}.json"

    def paths(self) -> list[Path]:
        """Every file this store keeps tokens in (none of them may be read by a tool)."""
        return [self.directory]

    async def read(self, server: str) -> dict[str, Any] | None:
        try:
            raw = self.path(server).read_bytes()
        except FileNotFoundError:
            return None
        except OSError:
            raise TokenStoreError(
                f"cannot read the stored tokens of MCP server {server}"
            ) from None
        return decode(raw, server)

    async def write(self, server: str, record: dict[str, Any]) -> None:
        target = self.path(server)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.directory, 0o700)
            descriptor = os.open(
                temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600
            )
            with os.fdopen(descriptor, "wb") as file:
                file.write(encode(record))
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, target)
        except OSError:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise TokenStoreError(
                f"cannot store the tokens of MCP server {server}"
            ) from None

    async def delete(self, server: str) -> None:
        try:
            self.path(server).unlink(missing_ok=True)
        except OSError:
            raise TokenStoreError(
                f"cannot remove the stored tokens of MCP server {server}"
            ) from None

    async def revision(self, server: str) -> object:
        try:
            status = self.path(server).stat()
        except OSError:
            return None
        return (status.st_ino, status.st_mtime_ns, status.st_size)

    def lease(self, server: str) -> AbstractAsyncContextManager[None]:
        return self._lease(self.directory / f"{store_key(server)}.refresh")

    @asynccontextmanager
    async def _lease(self, path: Path) -> AsyncIterator[None]:
        """An exclusive `flock` on the lease file, polled (a blocked flock cannot be cancelled);
        the kernel releases it if the holder dies. Past LEASE_SECONDS the refresh goes ahead: a
        stuck holder must not keep the others from their tokens forever."""
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            raise TokenStoreError("cannot open the refresh lease") from None
        try:
            deadline = time.monotonic() + LEASE_SECONDS
            while True:
                try:
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        break
                    await asyncio.sleep(_POLL)
            yield
        finally:
            os.close(descriptor)  # releases the lock
