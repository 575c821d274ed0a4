"""The bounded dispatcher: what the nats-py binding's subscription callbacks hand messages to.

A callback only counts the message and starts a task, so the client's own pending buffer stays near
empty and `max_pending` is what fills first (wire.md section 6). Past it, the message is refused with
OVERLOADED right in the callback. `concurrency` bounds executions; the rest wait, still counted.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ..errors import InteractionWorkerError, Overloaded, ShuttingDown
from .envelope import Publish
from .handler import Incoming, MessageHandler
from .subjects import Kind

Publisher = Callable[[list[Publish]], Awaitable[None]]
_LOGGER = logging.getLogger("interaction_worker")


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
        self._slots = (
            asyncio.Semaphore(concurrency) if concurrency is not None else None
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._waiting: set[asyncio.Task[None]] = set()
        self.closing = False
        self.in_flight = 0
        self.refused = 0

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def submit(self, kind: Kind, msg: Incoming) -> None:
        """Take one message: start its task, or refuse it at once (OVERLOADED, SHUTTING_DOWN)."""
        if self.closing:
            await self._refuse(kind, msg, ShuttingDown())
            return
        if len(self._tasks) >= self.max_pending:
            await self._refuse(kind, msg, Overloaded())
            return
        task = asyncio.create_task(self._run(kind, msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _refuse(
        self, kind: Kind, msg: Incoming, error: InteractionWorkerError
    ) -> None:
        self.refused += 1
        target, _ = self.handler.reply_target(msg)
        await self.publish(self.handler.refuse(kind, msg, error, target=target))

    async def _run(self, kind: Kind, msg: Incoming) -> None:
        slots = self._slots
        if slots is not None:
            task = asyncio.current_task()
            assert task is not None
            self._waiting.add(task)
            try:
                await slots.acquire()
            except asyncio.CancelledError:
                if not self.closing:
                    raise
                task.uncancel()
                await self._refuse(kind, msg, ShuttingDown())
                return
            finally:
                self._waiting.discard(task)
            if self.closing:
                slots.release()
                await self._refuse(kind, msg, ShuttingDown())
                return
        self.in_flight += 1
        try:
            publishes = await self.handler.handle(kind, msg)
            await self.publish(publishes)
        except Exception:
            self.logger.exception("publishing the outcome of %s failed", msg.subject)
        finally:
            self.in_flight -= 1
            if slots is not None:
                slots.release()

    async def shutdown(self, grace: float) -> None:
        """Refuse what has not started, let running calls finish within `grace`, then cancel them
        (their outcome is published as `cancelled` / receipt `unknown` with WORKER_SHUTDOWN)."""
        self.closing = True
        for task in list(self._waiting):
            task.cancel()
        running = set(self._tasks)
        if running:
            _, late = await asyncio.wait(running, timeout=grace)
            if late:
                self.handler.shutting_down = True
                for task in late:
                    task.cancel()
                await asyncio.wait(late, timeout=max(grace, 5.0))
