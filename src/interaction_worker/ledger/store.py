"""The key-value store the ledger writes to: the operations it needs, with JetStream's revision
semantics, and an in-memory store that follows them (for tests, and for a worker without a server).

Revisions: every write of any key takes the next revision of the whole store, as a JetStream
stream's sequence does; `create` succeeds only when the key is absent (never written, or deleted);
`update` and `delete` only at the key's current revision.
"""

import asyncio
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Entry:
    """A key's current value and the revision that wrote it."""

    value: bytes
    revision: int


class Conflict(Exception):
    """A create of a key that exists, or an update or delete at a revision that is not the key's."""


class StoreUnavailable(Exception):
    """The store could not be reached or did not answer in time: the write may or may not have
    happened."""


class KeyValueStore(Protocol):
    async def get(self, key: str) -> Entry | None:
        """The key's entry; None when it is absent or deleted."""
        ...

    async def create(self, key: str, value: bytes) -> int:
        """Write `value` only if the key is absent; its revision. Raises Conflict."""
        ...

    async def update(self, key: str, value: bytes, revision: int) -> int:
        """Write `value` only if the key is at `revision`; the new revision. Raises Conflict."""
        ...

    async def delete(self, key: str, revision: int) -> None:
        """Delete the key only if it is at `revision`. Raises Conflict."""
        ...

    async def changed(self, key: str, revision: int, within: float) -> Entry | None:
        """Wait until the key is no longer at `revision`: its new entry, or None when it was deleted.

        Raises:
            TimeoutError: when it has not changed within `within` seconds.
        """
        ...


class MemoryStore:
    """A `KeyValueStore` in this process, with the same revision semantics (no expiry)."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._revision = 0
        self._changes = asyncio.Condition()

    async def get(self, key: str) -> Entry | None:
        return self._entries.get(key)

    async def create(self, key: str, value: bytes) -> int:
        if key in self._entries:
            raise Conflict(key)
        return await self._write(key, value)

    async def update(self, key: str, value: bytes, revision: int) -> int:
        self._check(key, revision)
        return await self._write(key, value)

    async def delete(self, key: str, revision: int) -> None:
        self._check(key, revision)
        del self._entries[key]
        self._revision += 1
        async with self._changes:
            self._changes.notify_all()

    async def changed(self, key: str, revision: int, within: float) -> Entry | None:
        def moved() -> bool:
            entry = self._entries.get(key)
            return entry is None or entry.revision != revision

        async with asyncio.timeout(within), self._changes:
            await self._changes.wait_for(moved)
        return self._entries.get(key)

    def _check(self, key: str, revision: int) -> None:
        entry = self._entries.get(key)
        if entry is None or entry.revision != revision:
            raise Conflict(key)

    async def _write(self, key: str, value: bytes) -> int:
        self._revision += 1
        self._entries[key] = Entry(value, self._revision)
        async with self._changes:
            self._changes.notify_all()
        return self._revision
