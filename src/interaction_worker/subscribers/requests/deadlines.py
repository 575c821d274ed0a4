"""Call deadlines enforced by one sweeper task.

`asyncio.timeout` arms a timer per call (about 10 µs of CPU each on our machines, a third of the hot
path's budget); here a call costs a set insertion and removal, and one task wakes up every
`resolution` seconds while calls are running. A deadline may fire up to `resolution` late.

A deadline is a `with` block around the one await it bounds: it is armed on entry and disarmed on
exit, whichever way the block ends (a result, an exception, a cancellation), and a cancellation it
made is withdrawn there too. So a deadline never outlives its call: a worker task that runs one
message after another (the dispatcher's) is never cancelled for a message it has finished.
"""

import asyncio
import contextvars
import math
from types import TracebackType


class Deadline:
    """One call's deadline on the task that runs it, for one `with` block: armed on entry, disarmed
    on exit (the hot path pays for one object and its two methods, and no call beyond them).

    Attributes:
        fired: the deadline passed while the block ran, and cancelled the task.
        expired: set on exit when the deadline cancelled the block and the block ended with that
            cancellation, which the exit then swallows: the caller answers with its timeout. A block
            that swallowed the cancellation and finished keeps its outcome.
    """

    __slots__ = (
        "_deadlines",
        "task",
        "bucket",
        "fired",
        "expired",
        "_cancelling",
    )

    def __init__(
        self, deadlines: "Deadlines", task: asyncio.Task[object], when: float
    ) -> None:
        self._deadlines = deadlines
        self.task = task
        self.bucket = math.ceil(when / deadlines.resolution)
        self.fired = False
        self.expired = False

    def __enter__(self) -> "Deadline":
        # Cancellations requested before the block are someone else's: never swallowed on exit.
        self._cancelling = self.task.cancelling()
        owner = self._deadlines
        buckets = owner._buckets
        deadlines = buckets.get(self.bucket)
        if deadlines is None:  # not setdefault: it would build a set on every call
            deadlines = buckets[self.bucket] = set()
        deadlines.add(self)
        sweeper = owner._sweeper
        if sweeper is None or sweeper.done():
            # In a context of its own: the sweeper outlives this call, and must not keep the call's
            # context variables (its ledger claim, its trace) alive with it.
            owner._sweeper = asyncio.get_running_loop().create_task(
                owner._sweep(), context=contextvars.Context()
            )
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        buckets = self._deadlines._buckets
        deadlines = buckets.get(self.bucket)
        if deadlines is not None:
            deadlines.discard(self)
            if not deadlines:
                del buckets[self.bucket]
        if not self.fired:
            return False
        # Withdrawn whatever the block ended with: a cancellation request left on the task would
        # reach whatever the task runs next.
        left = self.task.uncancel()
        if kind is asyncio.CancelledError and left <= self._cancelling:
            self.expired = True
            return True
        return False  # another exception, or someone else's cancellation too: it propagates


class Deadlines:
    """The deadlines of one family's calls, and the task that sweeps them."""

    def __init__(self, resolution: float = 0.05) -> None:
        self.resolution = resolution
        self._buckets: dict[int, set[Deadline]] = {}
        self._sweeper: asyncio.Task[None] | None = None

    def scope(self, task: asyncio.Task[object], when: float) -> Deadline:
        """A `with` block that cancels `task` once the loop's clock passes `when`."""
        return Deadline(self, task, when)

    @property
    def armed(self) -> int:
        """Deadlines armed now: the `with` blocks running."""
        return sum(len(deadlines) for deadlines in self._buckets.values())

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        while self._buckets:
            await asyncio.sleep(self.resolution)
            now = math.floor(loop.time() / self.resolution)
            for bucket in [b for b in self._buckets if b <= now]:
                for deadline in self._buckets.pop(bucket):
                    # Only a block still running is in a bucket: the task is suspended inside it.
                    if not deadline.task.done():
                        deadline.fired = True
                        deadline.task.cancel()
