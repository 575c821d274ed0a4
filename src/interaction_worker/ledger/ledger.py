"""The idempotency ledger (wire.md 8): the small state machine that decides, for a call id, whether
this worker runs the call, republishes its recorded outcome, waits for the attempt that is running,
or says honestly that the outcome cannot be known.

    absent ──create──▶ claimed ──update──▶ started ──update──▶ done
                          │                   │
           stale: a new claim           stale: a new claim when the call may run again,
                                        else the outcome `unknown`

A call that may run again after a crash (an idempotent or read-only tool) is claimed `started` at once:
for it both claims lead to the same, so the mark costs no write of its own (docs/wire.md 8).

Every write is a compare-and-set on the key's revision, so two workers (or two retries) never both
hold a claim: the loser reads what the winner wrote.

With `persistent` (durable mode, docs/wire.md 7), the holder of an outcome writes it until it is
stored, however long the store is away; so a `started` claim whose lease ran out is taken for a dead
worker's only once this process has seen it unchanged for one further lease: its worker may be
alive, reconnecting, with an outcome to record.
"""

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .claim import Claim
from .records import CorruptRecord, Record, encode_record, quote
from .store import Conflict, KeyValueStore
from .waiting import WaitingWrites

_LOGGER = logging.getLogger("interaction_worker")
# How often the store's answer is waited for again when the key keeps changing under a live claim
# (each renewal of the other attempt's lease is a change); a bound, not a tuning knob.
_MAX_ROUNDS = 10_000
# The keys found holding something that is not a record, remembered so that each is reported once;
# past this many, the oldest is forgotten (and reported again should it come back).
_REPORTED_KEYS = 4096
# Stale `started` claims this process is watching (first seen, by key and revision): a bound, the
# oldest forgotten first (it is then watched again from the start, never taken over sooner).
_MAX_WATCHED = 10_000


class FingerprintMismatch(Exception):
    """The id is recorded for a different call."""


class StillRunning(Exception):
    """Another attempt holds a live claim and its outcome did not come within the wait."""

    def __init__(self, key: str, lease_left: float = 0.0) -> None:
        super().__init__(key)
        self.lease_left = lease_left  # seconds until that claim's lease runs out


@dataclass(frozen=True, slots=True)
class Recorded:
    """A finished call: its recorded outcome (`{"result": …}`, `{"receipt": …}` or `{"error": …}`),
    and when it was recorded (seconds since the epoch, as the recording worker's clock read)."""

    outcome: dict[str, Any]
    at: float | None = field(default=None, compare=False)


class Ledger:
    """Claims, records and looks up call ids in a `KeyValueStore`.

    Args:
        worker: this worker's id, written in its claims.
        lease: seconds a claim is held without renewal; renewed every third of it.
        wait: seconds a retry waits for a live claim's outcome before IN_PROGRESS.
        clock: wall-clock seconds since the epoch (leases are compared across processes).
        persistent: an outcome (and a release) is written until it is stored, never given up, and
            an expired `started` claim is taken over only after one further lease (durable mode);
            otherwise an outcome is written for up to one lease.
        waiting: where writes waiting to be retried are counted.

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
        persistent: bool = False,
        waiting: WaitingWrites | None = None,
    ) -> None:
        self.store = store
        self.worker = worker
        self.lease = lease
        self.wait = wait
        self.clock = clock
        self.logger = logger
        self.persistent = persistent
        self.waiting = waiting if waiting is not None else WaitingWrites(logger=logger)
        # In the order first seen; an OrderedDict, whose oldest is found at once however many
        # were removed before it.
        self._stale: OrderedDict[tuple[str, int], float] = OrderedDict()
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
    ) -> Claim | Recorded:
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
            # A call that may run again is claimed `started` at once: after a crash, a `claimed`
            # and a `started` claim of it lead to the same (it runs again), so the mark is written
            # with the claim, one write fewer (docs/wire.md 8).
            first = "started" if rerunnable else "claimed"
            try:
                revision = await self.store.create(
                    key, self.claim_record(fingerprint, first)
                )
                return self._claim(
                    key, revision, fingerprint, unknown=False, marked=rerunnable
                )
            except Conflict:
                pass
            entry = await self.store.get(key)
            if entry is None:
                continue  # released or expired since the create
            record = self.decode(key, entry.value)
            if record.fingerprint != fingerprint:
                raise FingerprintMismatch(key)
            if record.outcome is not None:
                return Recorded(record.outcome, record.at)
            assert record.lease_until is not None  # decode's rule for claims
            now = self.clock()
            unknown = record.state == "started" and not rerunnable
            left = record.lease_until - now
            if left <= 0 and unknown and self.persistent:
                left = self.stale_for(key, entry.revision)
            if left > 0:
                remaining = give_up - loop.time()
                if remaining <= 0:
                    raise StillRunning(key, left)
                try:
                    # Until the outcome, a release or a renewal, or until the lease runs out.
                    await self.store.changed(
                        key, entry.revision, min(remaining, left + 0.05)
                    )
                except TimeoutError:
                    pass
                continue
            # A stale claim: its worker is gone.
            # Taken over to record `unknown`, the claim stays `started`: were this worker to die
            # before that record, the next one must not read "never started" and run the call.
            state = "started" if unknown or rerunnable else "claimed"
            try:
                revision = await self.store.update(
                    key, self.claim_record(fingerprint, state), entry.revision
                )
            except Conflict:
                continue
            return self._claim(
                key, revision, fingerprint, unknown=unknown, marked=rerunnable
            )
        raise StillRunning(key)

    def stale_for(self, key: str, revision: int) -> float:
        """Seconds before the `started` claim at `key`, `revision`, whose lease has run out, may be
        taken for a dead worker's: it must have stayed unchanged for one further lease as this
        process sees it (its worker may be alive and reconnecting, with an outcome to record)."""
        now = self.clock()
        watched = self._stale
        first = watched.get((key, revision))
        if first is None:
            # Forget what has been watched for long (its key moved on), then what is oldest.
            while watched:
                oldest = next(iter(watched))
                if (
                    len(watched) < _MAX_WATCHED
                    and now - watched[oldest] < 4 * self.lease
                ):
                    break
                del watched[oldest]
            first = watched[(key, revision)] = now
        left = first + self.lease - now
        if left <= 0:
            del watched[(key, revision)]
        return max(left, 0.0)

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
        entry changed meanwhile.

        Raises:
            StoreUnavailable: the store did not take it (it may have landed).
        """
        value = self.done_record(fingerprint, outcome)
        try:
            await self.store.update(key, value, revision)
        except Conflict:
            return False
        return True

    def claim_record(self, fingerprint: str, state: str = "claimed") -> bytes:
        now = self.clock()
        return encode_record(
            "started" if state == "started" else "claimed",
            fingerprint,
            self._worker_json,
            now,
            now + self.lease,
        )

    def done_record(self, fingerprint: str, outcome: dict[str, Any]) -> bytes:
        return encode_record(
            "done", fingerprint, self._worker_json, self.clock(), None, outcome
        )

    @property
    def worker(self) -> str:
        return self._worker

    @worker.setter
    def worker(self, worker: str) -> None:
        self._worker = worker
        self._worker_json = quote(worker)  # written in every record: quoted once

    def _claim(
        self,
        key: str,
        revision: int,
        fingerprint: str,
        *,
        unknown: bool,
        marked: bool = False,
    ) -> Claim:
        return Claim(self, key, revision, fingerprint, unknown=unknown, marked=marked)
