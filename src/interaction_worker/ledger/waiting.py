"""Writes waiting to be retried (docs/operations.md, "Alerts"): how many, since when the oldest, and
what the log says of them.

In durable mode no write is given up while the worker lives (docs/wire.md 7): an outcome, an event or
a dead letter that the server did not take is written again until it is. A leader election or a
server restart makes many wait at once for a few seconds; that is expected, and the log says it in
one line once they are stored: how many waited, for how long, and the last reason. Writes that keep
waiting are logged every `every` seconds (a warning), and counted for the metrics
`interaction_writes_waiting` and `interaction_writes_waiting_oldest_seconds`.
"""

import logging
import time
from collections import OrderedDict
from collections.abc import Callable

_LOGGER = logging.getLogger("interaction_worker")


class Waiting:
    """One write waiting: `failed` as each attempt fails, `done` once it is stored (`stored=False`:
    left as its process stops)."""

    __slots__ = ("book", "reason", "since")

    def __init__(self, book: "WaitingWrites", since: float, reason: str) -> None:
        self.book = book
        self.since = since
        self.reason = reason

    def failed(self, reason: str) -> None:
        self.reason = reason
        self.book.failed(self)

    def done(self, *, stored: bool = True) -> None:
        self.book.done(self, stored=stored)


class WaitingWrites:
    """The writes of one process waiting to be retried.

    Args:
        every: seconds between two warnings while writes wait.
    """

    def __init__(
        self,
        *,
        every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        logger: logging.Logger = _LOGGER,
    ) -> None:
        self.every = every
        self.clock = clock
        self.logger = logger
        # In the order they began waiting (the oldest found at once, however many ended before it).
        self._waiting: OrderedDict[Waiting, None] = OrderedDict()
        # Since when some write has been waiting, how many waited since, and the last reason.
        self._began: float | None = None
        self._waited = 0
        self._reason = ""
        self._warned: float | None = None
        self._dropped = 0

    @property
    def count(self) -> int:
        """Writes waiting now."""
        return len(self._waiting)

    def oldest(self) -> float:
        """Seconds the oldest write now waiting has waited; 0 when none waits."""
        for entry in self._waiting:
            return max(0.0, self.clock() - entry.since)
        return 0.0

    def begin(self, reason: str) -> Waiting:
        """A write that failed (`reason`) and will be written again."""
        now = self.clock()
        entry = Waiting(self, now, reason)
        self._waiting[entry] = None
        if self._began is None:
            self._began, self._warned, self._waited = now, now, 0
        self._waited += 1
        self.failed(entry)
        return entry

    def failed(self, entry: Waiting) -> None:
        self._reason = entry.reason
        now = self.clock()
        if self._warned is not None and now - self._warned >= self.every:
            self._warned = now
            count = len(self._waiting)
            self.logger.warning(
                "%d %s waiting to be retried, the oldest for %.1f s (%s)",
                count,
                "write" if count == 1 else "writes",
                self.oldest(),
                self._reason,
            )

    def done(self, entry: Waiting, *, stored: bool = True) -> None:
        if entry not in self._waiting:
            return
        del self._waiting[entry]
        if not stored:
            self._dropped += 1
        if self._waiting:
            return
        began, self._began = self._began, None
        if began is None:
            return
        dropped, self._dropped = self._dropped, 0
        self.logger.warning(
            "%d %s up to %.1f s to be retried (%s); %s",
            self._waited,
            "write waited" if self._waited == 1 else "writes waited",
            self.clock() - began,
            self._reason,
            f"{dropped} left unstored as the worker stops" if dropped else "all stored",
        )
