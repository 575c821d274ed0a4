"""Expected interruptions, logged as one line each (docs/operations.md, "Logs").

A stream's leader election on a cluster, or a server restarting, interrupts for seconds what every
consumer loop of a worker does; each would otherwise log each failed attempt, with its traceback.
An `Outage` is told of each failure and of each success by its parties (the consumer loops), and
logs once it is over: what was interrupted, for how long, and why; a warning every `every`
seconds while it lasts.
"""

import logging
import time
from collections.abc import Callable

_LOGGER = logging.getLogger("interaction_worker")


class Outage:
    """Interruptions of `what`, shared by the parties that meet them.

    Args:
        what: how the log names what was interrupted (`fetching from the calls stream`).
        every: seconds between two warnings while it lasts.
    """

    def __init__(
        self,
        what: str,
        *,
        every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        logger: logging.Logger = _LOGGER,
    ) -> None:
        self.what = what
        self.every = every
        self.clock = clock
        self.logger = logger
        self._failing: set[str] = set()
        self._began: float | None = None
        self._warned = 0.0
        self._reason = ""

    @property
    def ongoing(self) -> bool:
        return bool(self._failing)

    def failed(self, party: str, reason: str) -> None:
        """`party` failed, for an expected `reason`."""
        now = self.clock()
        self._failing.add(party)
        self._reason = reason
        if self._began is None:
            self._began = self._warned = now
        elif now - self._warned >= self.every:
            self._warned = now
            self.logger.warning(
                "%s interrupted for %.1f s so far (%s)",
                self.what,
                now - self._began,
                reason,
            )

    def ok(self, party: str) -> None:
        """`party` succeeded."""
        if party not in self._failing:
            return
        self._failing.discard(party)
        if self._failing or self._began is None:
            return
        began, self._began = self._began, None
        self.logger.warning(
            "%s interrupted for %.1f s (%s); resumed",
            self.what,
            self.clock() - began,
            self._reason,
        )
