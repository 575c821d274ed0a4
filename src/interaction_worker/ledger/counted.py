"""The ledger's operations counted by outcome, for the metrics (docs/configuration.md, "Metrics and
health": `interaction_ledger_operations_total{op,result}`).

A wrapper around any `KeyValueStore`, put in place only when a worker serves metrics: each operation
costs the ledger a round trip to JetStream (about 220 µs, docs/benchmarks.md), beside which one more
coroutine frame and a dictionary update are noise.
"""

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from .store import Conflict, Entry, KeyValueStore, StoreUnavailable

T = TypeVar("T")


class CountedStore:
    """A `KeyValueStore` that counts each operation of `store` by its result.

    Results: `ok` (a `get` of an absent key included), `conflict` (a compare-and-set lost),
    `unavailable` (the store did not answer: the write may have happened), `timeout` (a `changed`
    that saw no change in time), `cancelled` (the call was cancelled: a timeout or a shutdown),
    `error` (anything else).

    Attributes:
        counts: `(operation, result)` to how many.
    """

    def __init__(self, store: KeyValueStore) -> None:
        self.store = store
        self.counts: dict[tuple[str, str], int] = {}

    async def get(self, key: str) -> Entry | None:
        return await self._counted("get", self.store.get(key))

    async def create(self, key: str, value: bytes) -> int:
        return await self._counted("create", self.store.create(key, value))

    async def update(self, key: str, value: bytes, revision: int) -> int:
        return await self._counted("update", self.store.update(key, value, revision))

    async def delete(self, key: str, revision: int) -> None:
        await self._counted("delete", self.store.delete(key, revision))

    async def changed(self, key: str, revision: int, within: float) -> Entry | None:
        return await self._counted("changed", self.store.changed(key, revision, within))

    async def _counted(self, operation: str, call: Awaitable[T]) -> T:
        result = "error"
        try:
            value = await call
            result = "ok"
            return value
        except Conflict:
            result = "conflict"
            raise
        except StoreUnavailable:
            result = "unavailable"
            raise
        except TimeoutError:
            result = "timeout"
            raise
        except asyncio.CancelledError:
            result = "cancelled"
            raise
        finally:
            key = (operation, result)
            self.counts[key] = self.counts.get(key, 0) + 1
