"""A durable message's events and dead letters, written until they are stored (docs/wire.md 7).

Every write of durable mode is acknowledged before the message is, and none is given up while the
worker lives: a leader election, a server restarting or a lost connection only delays it. Each
attempt that fails is retried after a pause that grows to a second; while writes wait they are
counted (`WaitingWrites`: the metrics, and the log's one line per outage). An event first sent
longer ago than the streams remember message ids (`duplicate_window`) is looked up before it is
sent again, so a late retry cannot store it twice.
"""

import asyncio
import time
from collections.abc import Callable, Sequence

from ..ledger.waiting import WaitingWrites
from .event_writer import EventsNotStored, EventWriter
from .outgoing import Publish

# The longest pause between two attempts.
_MAX_DELAY = 1.0


class UntilStored:
    """Writes through `writer` until stored, or until `alive()` turns false (the process ends).

    Args:
        window: the streams' `duplicate_window`: seconds within which a write sent again is
            recognised as a duplicate by its `Nats-Msg-Id`.
        clock: seconds since the epoch (an outcome the ledger recorded says when, in those).
    """

    def __init__(
        self,
        writer: EventWriter,
        waiting: WaitingWrites,
        *,
        window: float,
        alive: Callable[[], bool],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.writer = writer
        self.waiting = waiting
        self.window = window
        self.alive = alive
        self.clock = clock

    async def write(self, events: Sequence[Publish], first_sent: float | None) -> bool:
        """Store `events`; `first_sent`: when they were first sent, if before now (an outcome the
        ledger answers). False when the process ended first (the connection is closed)."""
        # Half the window: the time a message takes to reach the stream, and clocks that differ
        # between the worker that recorded an outcome and this one, stay well inside it.
        late = first_sent is not None and self.clock() - first_sent > self.window / 2
        first = first_sent if first_sent is not None else self.clock()
        try:
            await self.writer.write(events, look_up=late)
            return True
        except EventsNotStored as failed:
            pending, reason = failed.events, failed.reason
        waiting = self.waiting.begin(reason)
        stored = False
        delay = 0.05
        try:
            while self.alive():
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_DELAY)
                late = self.clock() - first > self.window / 2
                try:
                    await self.writer.write(pending, look_up=late)
                    stored = True
                    return True
                except EventsNotStored as failed:
                    pending = failed.events
                    waiting.failed(failed.reason)
            return False
        finally:
            waiting.done(stored=stored)
