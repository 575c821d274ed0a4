"""The bounded dispatcher: what the nats-py binding's subscription callbacks hand messages to.

A callback only queues the message (or refuses it), so the client's own pending buffer stays near
empty and `max_pending` is what fills first (wire.md section 6). Past it, the message is refused with
OVERLOADED right in the callback.

Messages are run by a pool of worker tasks rather than a task each: creating a task costs about as
much CPU as a raw responder spends on a whole message. A busy worker takes the next queued message
as soon as it is done, so under load a message costs a deque append and pop. The pool grows up to
`concurrency` workers (or one per pending message when there is no limit) and keeps a few idle ones.
"""

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from ..errors import InteractionWorkerError, Overloaded, ShuttingDown
from .envelope import Publish
from .handler import Incoming, MessageHandler
from .subjects import Kind

Publisher = Callable[[list[Publish]], Awaitable[None]]
_LOGGER = logging.getLogger("interaction_worker")
_IDLE_WORKERS = 16  # kept waiting after a burst; the rest of the pool ends


class Dispatcher:
    def __init__(
        self,
        handler: MessageHandler,
        publish: Publisher,
        *,
        concurrency: int | None = None,
        max_pending: int = 1000,
        logger: logging.Logger = _LOGGER,
    ) -> None:
        self.handler = handler
        self.publish = publish
        self.max_pending = max_pending
        self.logger = logger
        self._max_workers = concurrency if concurrency is not None else max_pending
        self._queue: deque[tuple[Kind, Incoming]] = deque()
        self._idle: deque[asyncio.Future[None]] = deque()
        self._workers: set[asyncio.Task[None]] = set()
        self.closing = False
        self.pending = 0  # queued + running
        self.in_flight = 0
        self.refused = 0

    async def submit(self, kind: Kind, msg: Incoming) -> None:
        """Take one message: queue it for a worker, or refuse it at once (OVERLOADED, SHUTTING_DOWN)."""
        if self.closing:
            await self._refuse(kind, msg, ShuttingDown())
            return
        if self.pending >= self.max_pending:
            await self._refuse(kind, msg, Overloaded())
            return
        self.pending += 1
        self._queue.append((kind, msg))
        while self._idle:
            waiter = self._idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        if len(self._workers) < self._max_workers:
            task = asyncio.get_running_loop().create_task(self._work())
            self._workers.add(task)
            task.add_done_callback(self._workers.discard)

    async def _refuse(
        self, kind: Kind, msg: Incoming, error: InteractionWorkerError
    ) -> None:
        self.refused += 1
        target, _ = self.handler.reply_target(msg)
        await self.publish(self.handler.refuse(kind, msg, error, target=target))

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        queue = self._queue
        while True:
            while queue and not self.closing:
                kind, msg = queue.popleft()
                self.in_flight += 1
                try:
                    await self._run(kind, msg)
                finally:
                    self.in_flight -= 1
                    self.pending -= 1
            if self.closing or len(self._idle) >= _IDLE_WORKERS:
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._idle.append(waiter)
            await waiter

    async def _run(self, kind: Kind, msg: Incoming) -> None:
        try:
            publishes = await self.handler.handle(kind, msg)
            await self.publish(publishes)
        except Exception:
            self.logger.exception("publishing the outcome of %s failed", msg.subject)

    async def shutdown(self, grace: float) -> None:
        """Refuse what has not started, let running calls finish within `grace`, then cancel them
        (their outcome is published as `cancelled` / receipt `unknown` with WORKER_SHUTDOWN)."""
        self.closing = True
        while self._idle:
            waiter = self._idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
        while self._queue:
            kind, msg = self._queue.popleft()
            self.pending -= 1
            await self._refuse(kind, msg, ShuttingDown())
        running = set(self._workers)
        if running:
            _, late = await asyncio.wait(running, timeout=grace)
            if late:
                self.handler.shutting_down = True
                for task in late:
                    task.cancel()
                await asyncio.wait(late, timeout=max(grace, 5.0))
