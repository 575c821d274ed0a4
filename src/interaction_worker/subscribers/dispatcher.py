"""The bounded dispatcher: what the nats-py binding's subscription callbacks hand messages to.

A callback only counts the message and queues it, so the client's own pending buffer stays near
empty and `max_pending` is what fills first (wire.md section 6). Past it, the message is refused with
OVERLOADED right in the callback. `concurrency` bounds executions; the rest wait, still counted.

Messages are run by worker tasks that take them from the queue one after another, not by a task per
message: creating, scheduling and finishing a task costs more CPU than a no-op tool call's whole
handling. A worker runs its message to the end in its own task, so everything that keys on the current
task (deadlines, anyio cancel scopes, `asyncio.timeout`) sees one task per message. When a worker
suspends with messages still queued, another worker is summoned for them, so a slow call never holds
up the calls behind it: workers are added only as calls actually wait.

A worker task outlives its messages, so nothing armed for one message may reach the next: a deadline
is disarmed with its call (`requests/deadlines.py`), and a worker left with a cancellation request
after a message ends rather than take another. A worker that ends other than by shutdown (cancelled
from outside, a bug) is counted (`lost`), logged and replaced by the next message that needs one; a
message its cancellation cut is refused INTERNAL. `stalled_for` tells the readiness probe when queued
messages have no worker to take them (docs/operations.md).

Waiting to publish is not such a wait. nats-py's `publish` waits only when the connection's outgoing
buffer is full; other workers would then run more calls only to queue more output behind it (in a
flood of calls, each blocked worker holding one more outcome). The queue waits for the publishing
worker instead: backpressure reaches the queue, and past `max_pending`, OVERLOADED.

The discovery counters (`endpoints.Endpoint`) are kept here: a message is counted as it is offered
(refused ones too), and its processing time is added once it is answered. A worker reads the clock
once per message, when the message ends; that reading starts the next message it takes at once, so
only a worker that has just started or woken reads the clock one more time.
"""

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from ..config import defaults
from ..contracts.wire import Kind
from ..errors import InteractionWorkerError, Internal, Overloaded, ShuttingDown
from .endpoints import Endpoint, clock
from .handler import MessageHandler
from .incoming import Incoming
from .outgoing import Publish

Publisher = Callable[[list[Publish]], Awaitable[None]]
_LOGGER = logging.getLogger("interaction_worker")
# Workers parked beyond this many end instead: a burst of slow calls leaves no crowd of idle tasks.
_MAX_PARKED = 256


class Dispatcher:
    def __init__(
        self,
        handler: MessageHandler,
        publish: Publisher,
        *,
        concurrency: int | None = None,
        max_pending: int = defaults.MAX_PENDING,
        logger: logging.Logger = _LOGGER,
        clock: Callable[[], int] = clock,
    ) -> None:
        self.handler = handler
        self.clock = clock  # monotonic nanoseconds, for the endpoints' processing time
        self.publish = publish
        self.concurrency = concurrency
        self.max_pending = max_pending
        self.logger = logger
        self.closing = False
        self.refused = 0
        self._queue: deque[tuple[Endpoint, Incoming]] = deque()
        self._held = 0  # queued or executing
        self._workers: set[asyncio.Task[None]] = set()
        self._busy: set[asyncio.Task[None]] = set()
        self._parked: deque[asyncio.Future[None]] = deque()
        # Workers that will look at the queue before they park: summoned, or between two messages.
        self._ready = 0
        self._check_scheduled = False
        # Workers publishing an outcome: nonzero between two callbacks only while a publish waits.
        self._publishing = 0
        # Workers that ended other than by shutdown (a stray cancellation, a bug): each is replaced.
        self.lost = 0
        self._answering: set[asyncio.Task[None]] = set()
        # The queue's head when a stall was first seen, and when (`stalled_for`).
        self._stall: tuple[tuple[Endpoint, Incoming], float] | None = None

    @property
    def pending(self) -> int:
        """Messages held: queued or executing."""
        return self._held

    @property
    def in_flight(self) -> int:
        """Messages executing."""
        return len(self._busy)

    @property
    def workers(self) -> int:
        return len(self._workers)

    async def submit(self, kind: Kind, msg: Incoming) -> None:
        """Take one message: queue it for a worker, or refuse it at once (OVERLOADED, SHUTTING_DOWN)."""
        refusal = self.offer(self.handler.endpoints[kind], msg)
        if refusal is not None:
            await self.refuse(kind, msg, refusal)

    def offer(self, endpoint: Endpoint, msg: Incoming) -> InteractionWorkerError | None:
        """Count one message of `endpoint`'s subject and queue it for a worker, or say why it is
        refused; `refuse` answers it then.

        Synchronous, so a subscription callback pays no coroutine for the common case; it holds its
        subject's endpoint, so counting costs no lookup."""
        endpoint.requests += 1
        if self.closing:
            return ShuttingDown()
        if self._held >= self.max_pending:
            return Overloaded()
        self._held += 1
        self._queue.append((endpoint, msg))
        if self._ready == 0 and not self._publishing:
            self._summon(1)
        return None

    async def refuse(
        self, kind: Kind, msg: Incoming, error: InteractionWorkerError
    ) -> None:
        self.refused += 1
        target, _ = self.handler.reply_target(msg)
        await self.publish(self.handler.refuse(kind, msg, error, target=target))

    def _summon(self, wanted: int) -> None:
        """Make up to `wanted` more workers ready: parked ones first, then new ones up to the limit."""
        limit = self.concurrency
        for _ in range(wanted):
            if not self._unpark():
                if limit is not None and len(self._workers) >= limit:
                    return  # every worker is busy: the first to finish takes the next message
                task = asyncio.get_running_loop().create_task(self._work())
                self._workers.add(task)
            self._ready += 1

    def _unpark(self) -> bool:
        """Wake one parked worker; false when none is left (a parked worker cancelled by someone
        else leaves a cancelled future behind, skipped here)."""
        while self._parked:
            parked = self._parked.popleft()
            if not parked.done():
                parked.set_result(None)
                return True
        return False

    def _check(self) -> None:
        """Run once the worker that scheduled it has suspended or emptied the queue: messages still
        queued with no worker ready are behind a call that waits, so they get workers of their own."""
        self._check_scheduled = False
        # A worker suspended in `publish` waits for the connection to take its output: more workers
        # would only pile more output behind it. It goes on with the queue once its output is taken.
        if self._publishing:
            return
        if self._queue and self._ready == 0 and not self.closing:
            self._summon(len(self._queue))

    async def _work(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        queue, busy = self._queue, self._busy
        handle, publish, clock = self.handler.handle, self.publish, self.clock
        ready = True
        parked: asyncio.Future[None] | None = None
        done = False  # ended on its own (shutdown, or too many parked), not lost
        lost: BaseException | str | None = None
        started = clock()
        try:
            while True:
                while queue and not self.closing:
                    endpoint, msg = queue.popleft()
                    self._ready -= 1
                    ready = False
                    if queue and not self._check_scheduled:
                        self._check_scheduled = True
                        loop.call_soon(self._check)
                    busy.add(task)
                    try:
                        try:
                            publishes = await handle(endpoint.kind, msg)
                        except asyncio.CancelledError:
                            # The handler answers every failure and shutdown's cancellations; this
                            # task was cancelled by something else, before anything was published.
                            if not self.closing:
                                self._unanswered(endpoint.kind, msg)
                            raise
                        self._publishing += 1
                        try:
                            await publish(publishes)
                        finally:
                            self._publishing -= 1
                    except Exception:
                        self.logger.exception(
                            "publishing the outcome of %s failed", msg.subject
                        )
                    finally:
                        busy.discard(task)
                        self._held -= 1
                        now = clock()
                        endpoint.processing_ns += now - started
                        started = now
                    self._ready += 1
                    ready = True
                    if task.cancelling():
                        # A cancellation requested while this message ran, and not withdrawn: it
                        # would cut the next message. A fresh task takes the queue instead.
                        lost = f"a cancellation outlived the message on {msg.subject}"
                        return
                if self.closing or len(self._parked) >= _MAX_PARKED:
                    done = True
                    return
                parked = loop.create_future()
                self._parked.append(parked)
                self._ready -= 1
                ready = False
                await parked  # `_summon` counts this worker ready again
                parked = None
                ready = True
                started = clock()
        except BaseException as error:
            lost = error
            raise
        finally:
            # Woken by `_summon` (which counted it ready) but cancelled before it ran again.
            if ready or (
                parked is not None and parked.done() and not parked.cancelled()
            ):
                self._ready -= 1
            self._workers.discard(task)
            if not done and not self.closing:
                self.lost += 1
                self.logger.error(
                    "a dispatcher worker ended (%s); %d running, %d queued: it is replaced",
                    _why(lost),
                    len(busy),
                    len(queue),
                )
            if self._queue and self._ready == 0 and not self.closing:
                self._summon(1)

    def _unanswered(self, kind: Kind, msg: Incoming) -> None:
        """Refuse, INTERNAL, a message whose worker was cancelled while it ran (published from a
        task of its own: the cancelled worker ends)."""
        self.logger.error(
            "handling %s was cancelled, neither by shutdown nor by its deadline: refused INTERNAL",
            msg.subject,
        )
        answer = asyncio.get_running_loop().create_task(
            self._refuse_quietly(kind, msg, Internal())
        )
        self._answering.add(answer)
        answer.add_done_callback(self._answering.discard)

    async def _refuse_quietly(
        self, kind: Kind, msg: Incoming, error: InteractionWorkerError
    ) -> None:
        try:
            await self.refuse(kind, msg, error)
        except Exception:
            self.logger.exception("refusing %s failed", msg.subject)

    def stalled_for(self, now: float) -> float:
        """Seconds the message at the head of the queue has waited with no worker to take it (none
        running, or fewer than `concurrency` allows), as successive calls see it: `now` is the
        caller's monotonic clock, and the first call that sees a stall answers 0. A worker waiting
        for the connection to take its output holds the queue on purpose: not a stall."""
        queue = self._queue
        limit = self.concurrency
        if (
            not queue
            or self._publishing
            or self.closing
            or (self._busy and limit is not None and len(self._workers) >= limit)
        ):
            self._stall = None
            return 0.0
        head = queue[0]
        if self._stall is None or self._stall[0] is not head:
            self._stall = (head, now)
            return 0.0
        return now - self._stall[1]

    async def shutdown(self, grace: float) -> None:
        """Refuse what has not started, let running calls finish within `grace`, then cancel them
        (their outcome is published as `cancelled` / receipt `unknown` with WORKER_SHUTDOWN)."""
        self.closing = True
        while self._unpark():
            self._ready += 1
        while self._queue:
            endpoint, msg = self._queue.popleft()
            self._held -= 1
            try:
                await self.refuse(endpoint.kind, msg, ShuttingDown())
            except Exception:
                self.logger.exception("refusing %s at shutdown failed", msg.subject)
        running = set(self._busy)
        if running:
            _, late = await asyncio.wait(running, timeout=grace)
            if late:
                self.handler.shutting_down = True
                for task in late:
                    task.cancel()
                await asyncio.wait(late, timeout=max(grace, 5.0))


def _why(lost: BaseException | str | None) -> str:
    if isinstance(lost, str):
        return lost
    if isinstance(lost, asyncio.CancelledError):
        return "cancelled, not by shutdown"
    if lost is None:
        return "no reason given"
    return f"{type(lost).__name__} raised"
