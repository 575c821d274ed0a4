"""A worker's hold on one ledger key (wire.md 8), from its claim to its outcome or its release:
the `started` mark, the `done` record, the release, and the lease renewed every third of it while
the call runs. Every write is at the revision the claim last wrote, after any renewal being written.
The ledger (`ledger.py`) decides when a claim is taken; this module, how a held one is written.
"""

import asyncio
from typing import TYPE_CHECKING, Any

from .records import CorruptRecord
from .store import Conflict, StoreUnavailable

if TYPE_CHECKING:
    from .ledger import Ledger

# The longest pause between two attempts of a write the store did not take.
_MAX_DELAY = 1.0


class Claim:
    """This worker's hold on one key, renewed until the outcome is recorded or the claim released."""

    def __init__(
        self,
        ledger: "Ledger",
        key: str,
        revision: int,
        fingerprint: str,
        *,
        unknown: bool,
        marked: bool = False,
    ) -> None:
        self.ledger = ledger
        self.key = key
        self.revision = revision
        self.fingerprint = fingerprint
        self.unknown = unknown
        # The store holds the claim as `started` already (a call that may run again): `start`
        # has nothing to write.
        self.marked = marked
        self.started = False
        self.lost = False
        self._writing = asyncio.Lock()
        # Renewal: a timer, and a task only while one renewal is written (most calls end before
        # the first is due, and a timer costs less than a task that sleeps and is cancelled).
        self._loop = asyncio.get_running_loop()
        self._renewing = not unknown
        self._timer: asyncio.TimerHandle | None = None
        self._renewal: asyncio.Task[None] | None = None
        if self._renewing:
            self._timer = self._loop.call_later(ledger.lease / 3, self._renew_due)

    async def start(self) -> None:
        """Mark the call started, right before its side effect. A mark the store did not take is
        written again while this claim's lease lasts (no one else may take the claim before it
        ends); one that timed out but landed is recognised (the key holds exactly what was written).

        Raises:
            StoreUnavailable: the mark could not be written; the side effect must not start.
        """
        if self.marked:
            self.started = True
            return
        ledger = self.ledger
        value = ledger.claim_record(self.fingerprint, "started")
        loop = asyncio.get_running_loop()
        give_up = loop.time() + ledger.lease / 2
        delay = 0.05
        unseen = False  # a write may have landed without its answer
        while True:
            try:
                await self._write(value)
                break
            except Conflict:
                if unseen and await self._holds(value):
                    break
                raise StoreUnavailable(
                    "the claim was lost before the call started"
                ) from None
            except StoreUnavailable:
                unseen = True
                if loop.time() + delay > give_up:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_DELAY)
        self.started = True

    async def _holds(self, value: bytes) -> bool:
        """Whether the key holds exactly `value`, written by this claim unseen (`revision` then
        follows it)."""
        try:
            entry = await self.ledger.store.get(self.key)
        except StoreUnavailable:
            return False
        if entry is None or entry.value != value:
            return False
        self.revision = entry.revision
        return True

    async def done(self, outcome: dict[str, Any]) -> bool:
        """Record the outcome; false when it could not be. Persistent (durable mode), it is written
        until it is stored; otherwise a store that stays away past the lease leaves the claim as it
        was (a retry then answers per wire.md 8, item 3) and the outcome is published anyway. Never
        raises but a cancellation."""
        self._stop_renewing()
        ledger = self.ledger
        value = ledger.done_record(self.fingerprint, outcome)
        loop = asyncio.get_running_loop()
        give_up = None if ledger.persistent else loop.time() + ledger.lease
        delay = 0.05
        waiting = None
        stored = False
        try:
            while True:
                try:
                    await self._write(value, last=True)
                    stored = True
                    return True
                except Conflict:
                    if await self._recorded():
                        stored = True
                        return True
                    ledger.logger.warning(
                        "ledger %s: the claim was taken over before its outcome was recorded",
                        self.key,
                    )
                    return False
                except StoreUnavailable as error:
                    if give_up is not None and loop.time() + delay > give_up:
                        ledger.logger.warning(
                            "ledger %s: the outcome could not be recorded (%s)",
                            self.key,
                            error,
                        )
                        return False
                    if waiting is None:
                        waiting = ledger.waiting.begin(f"the ledger: {error}")
                    else:
                        waiting.failed(f"the ledger: {error}")
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_DELAY)
        finally:
            if waiting is not None:
                waiting.done(stored=stored)

    async def _recorded(self) -> bool:
        """Whether the key holds an outcome of this call: a write that timed out may still have
        landed (a client buffers writes while it reconnects), and the retry then finds it there."""
        try:
            entry = await self.ledger.store.get(self.key)
        except StoreUnavailable:
            return False
        if entry is None:
            return False
        try:
            record = self.ledger.decode(self.key, entry.value)
        except CorruptRecord:
            return False
        return record.state == "done" and record.fingerprint == self.fingerprint

    async def release(self) -> None:
        """Give the key up (the call did not start), so a retry runs it. Never raises but a
        cancellation.

        A `started` mark whose write timed out may still have landed (a client buffers writes while
        it reconnects), leaving the key at a revision this claim never saw: left there, it would
        answer the retry `unknown` for a call that never ran. So a delete that fails is retried, at
        the revision the key holds while the record there is still this claim's: persistent, until
        it is gone; otherwise for up to one lease."""
        self._stop_renewing()
        ledger = self.ledger
        loop = asyncio.get_running_loop()
        give_up = None if ledger.persistent else loop.time() + ledger.lease
        delay = 0.05
        waiting = None
        try:
            while True:
                try:
                    if self._writing.locked():
                        async with self._writing:
                            await ledger.store.delete(self.key, self.revision)
                    else:
                        # Renewing has stopped and none is being written: no write to wait for.
                        await ledger.store.delete(self.key, self.revision)
                    return
                except (Conflict, StoreUnavailable) as error:
                    reason = f"the ledger: {error}"
                mine = await self._still_mine()
                if not mine or (give_up is not None and loop.time() + delay > give_up):
                    # Another worker's claim now, or the store stayed away: the lease decides.
                    ledger.logger.info(
                        "ledger %s: the claim could not be released", self.key
                    )
                    return
                if waiting is None:
                    waiting = ledger.waiting.begin(reason)
                else:
                    waiting.failed(reason)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_DELAY)
        finally:
            if waiting is not None:
                waiting.done()

    async def _still_mine(self) -> bool:
        """Whether the key still holds this claim (as written, or with a `started` mark that landed
        unseen); `revision` follows the key's, so the next delete can succeed."""
        try:
            entry = await self.ledger.store.get(self.key)
        except StoreUnavailable:
            return True  # unknown yet: try again while the lease lasts
        if entry is None:
            return False  # gone already: nothing to release
        try:
            record = self.ledger.decode(self.key, entry.value)
        except CorruptRecord:
            return False
        mine = (
            record.state in ("claimed", "started")
            and record.worker == self.ledger.worker
            and record.fingerprint == self.fingerprint
        )
        if mine:
            self.revision = entry.revision
        return mine

    def abandon(self) -> None:
        """Stop renewing without writing: the lease runs out. Idempotent; `Ledgered` calls it as
        each message ends, however it ends, so no renewal outlives its message."""
        self._stop_renewing()

    async def _write(self, value: bytes, *, last: bool = False) -> None:
        """Write `value` at the claim's revision, after a renewal being written. `last`: renewing
        has stopped, so no renewal can start meanwhile and, none being written, no lock is taken
        (three coroutines a write)."""
        if last and not self._writing.locked():
            self.revision = await self.ledger.store.update(
                self.key, value, self.revision
            )
            return
        async with self._writing:
            self.revision = await self.ledger.store.update(
                self.key, value, self.revision
            )

    def _stop_renewing(self) -> None:
        self._renewing = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        # A renewal being written finishes (cut short, it might have been written unseen, and the
        # next write at the old revision would fail); it writes nothing once renewing stopped.

    def _renew_due(self) -> None:
        self._timer = None
        if self._renewing:
            self._renewal = self._loop.create_task(self._renew())

    async def _renew(self) -> None:
        ledger = self.ledger
        try:
            async with self._writing:
                if not self._renewing:
                    return  # the outcome or the release came first
                state = "started" if self.started or self.marked else "claimed"
                self.revision = await ledger.store.update(
                    self.key,
                    ledger.claim_record(self.fingerprint, state),
                    self.revision,
                )
        except StoreUnavailable:
            # The waiting writes and the store's own outage say it once; each claim would say it
            # again every third of a lease.
            ledger.logger.debug("ledger %s: the lease could not be renewed", self.key)
        except Conflict:
            self.lost = True
            self._renewing = False
            ledger.logger.warning("ledger %s: the claim was taken over", self.key)
            return
        finally:
            self._renewal = None
        if self._renewing:
            self._timer = self._loop.call_later(ledger.lease / 3, self._renew_due)
