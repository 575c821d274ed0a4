"""The idempotency ledger (wire.md 8): the small state machine that decides, for a call id, whether
this worker runs the call, republishes its recorded outcome, waits for the attempt that is running,
or says honestly that the outcome cannot be known.

    absent ──create──▶ claimed ──update──▶ started ──update──▶ done
                          │                   │
           stale: a new claim           stale: a new claim when the call may run again,
                                        else the outcome `unknown`

Every write is a compare-and-set on the key's revision, so two workers (or two retries) never both
hold a claim: the loser reads what the winner wrote.
"""

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .records import CorruptRecord, Record
from .store import Conflict, KeyValueStore, StoreUnavailable

_LOGGER = logging.getLogger("interaction_worker")
# How often the store's answer is waited for again when the key keeps changing under a live claim
# (each renewal of the other attempt's lease is a change); a bound, not a tuning knob.
_MAX_ROUNDS = 10_000
# The keys found holding something that is not a record, remembered so that each is reported once;
# past this many, the oldest is forgotten (and reported again should it come back).
_REPORTED_KEYS = 4096


class FingerprintMismatch(Exception):
    """The id is recorded for a different call."""


class StillRunning(Exception):
    """Another attempt holds a live claim and its outcome did not come within the wait."""

    def __init__(self, key: str, lease_left: float = 0.0) -> None:
        super().__init__(key)
        self.lease_left = lease_left  # seconds until that claim's lease runs out


@dataclass(frozen=True, slots=True)
class Recorded:
    """A finished call: its recorded outcome (`{"result": …}`, `{"receipt": …}` or `{"error": …}`)."""

    outcome: dict[str, Any]


class Ledger:
    """Claims, records and looks up call ids in a `KeyValueStore`.

    Args:
        worker: this worker's id, written in its claims.
        lease: seconds a claim is held without renewal; renewed every third of it.
        wait: seconds a retry waits for a live claim's outcome before IN_PROGRESS.
        clock: wall-clock seconds since the epoch (leases are compared across processes).

    Attributes:
        invalid_entries: keys found holding something that is not a ledger record, each counted
            once (the metric `interaction_ledger_invalid_entries_total`).
    """

    def __init__(
        self,
        store: KeyValueStore,
        *,
        worker: str,
        lease: float = 30.0,
        wait: float = 30.0,
        clock: Callable[[], float] = time.time,
        logger: logging.Logger = _LOGGER,
    ) -> None:
        self.store = store
        self.worker = worker
        self.lease = lease
        self.wait = wait
        self.clock = clock
        self.logger = logger
        self.invalid_entries = 0
        self._reported: dict[str, None] = {}

    def decode(self, key: str, value: bytes) -> Record:
        """The record under `key`; something else there is reported (`invalid`) and raised.

        Raises:
            CorruptRecord: the value is not a ledger record.
        """
        try:
            return Record.decode(value)
        except CorruptRecord:
            self.invalid(key)
            raise

    def invalid(self, key: str) -> None:
        """Report, once per key, that `key` holds something no worker wrote: the bucket was written
        by someone else. Its content is never logged: it is whatever that writer chose."""
        if key in self._reported:
            return
        if len(self._reported) >= _REPORTED_KEYS:
            del self._reported[next(iter(self._reported))]
        self._reported[key] = None
        self.invalid_entries += 1
        self.logger.warning(
            "ledger %s: the entry is not a ledger record; requests with its id are refused "
            "until it expires",
            key,
        )

    async def begin(
        self, key: str, fingerprint: str, *, rerunnable: bool
    ) -> "Claim | Recorded":
        """This worker's claim on `key`, or the outcome recorded there.

        A claim with `unknown` set is a call that started elsewhere and cannot run again: the caller
        records the outcome `unknown` with it instead of running the call.

        Raises:
            FingerprintMismatch: the key holds a different call.
            CorruptRecord: the key holds something that is not a ledger record (reported).
            StillRunning: a live claim did not finish within `wait`.
            StoreUnavailable: the store could not be reached (nothing was claimed).
        """
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.wait
        for _ in range(_MAX_ROUNDS):
            try:
                revision = await self.store.create(key, self.claim_record(fingerprint))
                return self._claim(key, revision, fingerprint, unknown=False)
            except Conflict:
                pass
            entry = await self.store.get(key)
            if entry is None:
                continue  # released or expired since the create
            record = self.decode(key, entry.value)
            if record.fingerprint != fingerprint:
                raise FingerprintMismatch(key)
            if record.outcome is not None:
                return Recorded(record.outcome)
            assert record.lease_until is not None  # decode's rule for claims
            now = self.clock()
            if record.lease_until > now:
                remaining = give_up - loop.time()
                if remaining <= 0:
                    raise StillRunning(key, record.lease_until - now)
                try:
                    # Until the outcome, a release or a renewal, or until the lease runs out.
                    await self.store.changed(
                        key,
                        entry.revision,
                        min(remaining, record.lease_until - now + 0.05),
                    )
                except TimeoutError:
                    pass
                continue
            # A stale claim: its worker is gone.
            unknown = record.state == "started" and not rerunnable
            # Taken over to record `unknown`, the claim stays `started`: were this worker to die
            # before that record, the next one must not read "never started" and run the call.
            state = "started" if unknown else "claimed"
            try:
                revision = await self.store.update(
                    key, self.claim_record(fingerprint, state), entry.revision
                )
            except Conflict:
                continue
            return self._claim(key, revision, fingerprint, unknown=unknown)
        raise StillRunning(key)

    async def lookup(self, key: str) -> tuple[Record, int] | None:
        """The record under `key` and its revision; None when there is none.

        Raises:
            CorruptRecord: the key holds something that is not a ledger record (reported).
            StoreUnavailable: the store could not be reached.
        """
        entry = await self.store.get(key)
        if entry is None:
            return None
        return self.decode(key, entry.value), entry.revision

    async def settle(
        self, key: str, revision: int, fingerprint: str, outcome: dict[str, Any]
    ) -> bool:
        """Record `outcome` over the entry at `revision` (a claim its worker left); false when the
        entry changed meanwhile or the store is away."""
        value = Record(
            state="done",
            fingerprint=fingerprint,
            worker=self.worker,
            at=self.clock(),
            outcome=outcome,
        ).encode()
        try:
            await self.store.update(key, value, revision)
        except (Conflict, StoreUnavailable):
            return False
        return True

    def claim_record(self, fingerprint: str, state: str = "claimed") -> bytes:
        now = self.clock()
        return Record(
            state="started" if state == "started" else "claimed",
            fingerprint=fingerprint,
            worker=self.worker,
            at=now,
            lease_until=now + self.lease,
        ).encode()

    def _claim(
        self, key: str, revision: int, fingerprint: str, *, unknown: bool
    ) -> "Claim":
        return Claim(self, key, revision, fingerprint, unknown=unknown)


class Claim:
    """This worker's hold on one key, renewed until the outcome is recorded or the claim released."""

    def __init__(
        self,
        ledger: Ledger,
        key: str,
        revision: int,
        fingerprint: str,
        *,
        unknown: bool,
    ) -> None:
        self.ledger = ledger
        self.key = key
        self.revision = revision
        self.fingerprint = fingerprint
        self.unknown = unknown
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
        """Mark the call started, right before its side effect.

        Raises:
            StoreUnavailable: the mark could not be written; the side effect must not start.
        """
        try:
            await self._write(self.ledger.claim_record(self.fingerprint, "started"))
        except Conflict:
            raise StoreUnavailable(
                "the claim was lost before the call started"
            ) from None
        self.started = True

    async def done(self, outcome: dict[str, Any]) -> bool:
        """Record the outcome; false when it could not be. A store that stays away past the lease
        leaves the claim as it was (a retry then answers per wire.md 8, item 3): the outcome is published
        anyway, so this never raises."""
        self._stop_renewing()
        ledger = self.ledger
        value = Record(
            state="done",
            fingerprint=self.fingerprint,
            worker=ledger.worker,
            at=ledger.clock(),
            outcome=outcome,
        ).encode()
        loop = asyncio.get_running_loop()
        give_up = loop.time() + ledger.lease
        delay = 0.05
        while True:
            try:
                await self._write(value)
                return True
            except Conflict:
                if await self._recorded():
                    return True
                ledger.logger.warning(
                    "ledger %s: the claim was taken over before its outcome was recorded",
                    self.key,
                )
                return False
            except StoreUnavailable:
                if loop.time() + delay > give_up:
                    ledger.logger.warning(
                        "ledger %s: the outcome could not be recorded",
                        self.key,
                        exc_info=True,
                    )
                    return False
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

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
        """Give the key up (the call did not start), so a retry runs it. Never raises.

        A `started` mark whose write timed out may still have landed (a client buffers writes while
        it reconnects), leaving the key at a revision this claim never saw: left there, it would
        answer the retry `unknown` for a call that never ran. So a delete that fails is retried, for
        up to one lease, at the revision the key holds while the record there is still this
        claim's."""
        self._stop_renewing()
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.ledger.lease
        delay = 0.05
        while True:
            try:
                async with self._writing:
                    await self.ledger.store.delete(self.key, self.revision)
                return
            except (Conflict, StoreUnavailable):
                pass
            if not await self._still_mine() or loop.time() + delay > give_up:
                # Another worker's claim now, or the store stayed away: the lease decides.
                self.ledger.logger.info(
                    "ledger %s: the claim could not be released", self.key
                )
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

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

    async def _write(self, value: bytes) -> None:
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
                state = "started" if self.started else "claimed"
                self.revision = await ledger.store.update(
                    self.key,
                    ledger.claim_record(self.fingerprint, state),
                    self.revision,
                )
        except StoreUnavailable:
            ledger.logger.info("ledger %s: the lease could not be renewed", self.key)
        except Conflict:
            self.lost = True
            self._renewing = False
            ledger.logger.warning("ledger %s: the claim was taken over", self.key)
            return
        finally:
            self._renewal = None
        if self._renewing:
            self._timer = self._loop.call_later(ledger.lease / 3, self._renew_due)
