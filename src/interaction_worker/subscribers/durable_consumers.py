"""The consumer loops of a durable binding (docs/wire.md 7). Each consumer's loop fetches at most as
many messages as the process has free slots (`concurrency`, else `max_pending`), shared by its
consumers, so no worker hoards work another could do. nats-py's fetch also returns what earlier
fetches left on the pull inbox, more than asked: those wait for a slot each, so no more than
`concurrency` messages ever run at once. A loop that ends other than by shutdown is counted, logged
and started again. How one message is handled is the binding's (`durable_binding.py`)."""

import asyncio
import logging
import math
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from ..contracts.wire import Kind
from .fetch_failures import expected_failure, failure_said
from .outages import Outage
from .slots import Slots

# Seconds one fetch waits for messages; a free slot held by an idle fetch is lost to the other
# consumers that long.
_FETCH_WAIT = 0.5
# How long a fetch waits while another consumer waits for a slot it holds.
_FETCH_WAIT_CONTENDED = 0.02


class ConsumerLoops:
    """What `DurableBinding` reads its consumers with; the binding sets these attributes and handles
    each message (`_handle`)."""

    client: Client
    logger: logging.Logger
    kinds: tuple[Kind, ...]
    limit: int
    closing: bool
    lost: int
    running: set[asyncio.Task[None]]
    _slots: Slots
    _fetchers: list[asyncio.Task[None]]
    _fetching: Outage

    async def _handle(self, kind: Kind, msg: Msg) -> None:
        raise NotImplementedError

    def _fetch(self, kind: Kind, subscription: Any) -> None:
        """Run `kind`'s consumer loop; one that ends other than by `stop` (a stray cancellation, a
        bug) is counted, logged and started again, so the consumer never stops being read."""
        fetcher = asyncio.create_task(self._consume(kind, subscription))
        self._fetchers.append(fetcher)

        def ended(task: asyncio.Task[None]) -> None:
            if task in self._fetchers:
                self._fetchers.remove(task)
            if self.closing or self.client.is_closed:
                return
            self.lost += 1
            error = None if task.cancelled() else task.exception()
            self.logger.error(
                "the consumer loop of %s ended (%s): it is started again",
                kind,
                "cancelled" if task.cancelled() else type(error).__name__,
                exc_info=error,
            )
            # After a pause: a loop that fails at once must not spin. `stop` sets `closing` first.
            asyncio.get_running_loop().call_later(_FETCH_WAIT, again)

        def again() -> None:
            if not self.closing and not self.client.is_closed:
                self._fetch(kind, subscription)

        fetcher.add_done_callback(ended)

    async def _consume(self, kind: Kind, subscription: Any) -> None:
        # Each fetch holds the slots it may fill until it returns. The consumers take turns for
        # slots, so one that found nothing queues behind the others for its next turn; while
        # another waits, an idle consumer's fetch returns almost at once.
        slots = self._slots
        most = max(1, math.ceil(self.limit / len(self.kinds)))
        fetching = self._fetching
        while not self.closing:
            taken = await slots.take(most)
            wait = _FETCH_WAIT if not slots.waiting else _FETCH_WAIT_CONTENDED
            try:
                messages = await subscription.fetch(batch=taken, timeout=wait)
                fetching.ok(kind)
            except (TimeoutError, nats.errors.TimeoutError):
                messages = []
                fetching.ok(kind)
            except asyncio.CancelledError:
                slots.give(taken)
                raise
            except Exception as error:
                messages = []
                if self.client.is_closed:
                    slots.give(taken)
                    return
                if expected_failure(error):
                    fetching.failed(kind, failure_said(error))
                else:
                    self.logger.warning("fetching from %s failed", kind, exc_info=True)
                await asyncio.sleep(_FETCH_WAIT)
            # nats-py's fetch also hands over what earlier fetches left on the pull inbox: beyond
            # the slots taken, each waits for one of its own.
            slots.give(max(0, taken - len(messages)))
            for index, msg in enumerate(messages):
                task = asyncio.create_task(self._run(kind, msg, slot=index < taken))
                self.running.add(task)
                task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self.running.discard(task)

    async def _run(self, kind: Kind, msg: Msg, *, slot: bool = True) -> None:
        """Handle one message in the slot taken for it (`slot`), or in one it waits for first;
        the slot is given back as it ends, however it ends."""
        if not slot:
            try:
                await self._slots.take(1, first=True)
            except asyncio.CancelledError:
                return  # shut down while it waited: the server delivers it again
        try:
            await self._handle(kind, msg)
        finally:
            self._slots.give(1)
