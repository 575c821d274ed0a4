"""Durable mode (wire.md 7): tool calls, MCP requests and deliveries come from JetStream pull
consumers shared by every worker, so a call the server accepted survives a killed worker and a
restarted server; `P.observe` and `P.tool.list`, which change nothing, stay core subscriptions.

One message's order of work: claim in the ledger → execute → record → store the events (or the
dead letter), acknowledged → publish the reply → acknowledge. Every write is acknowledged, and
written again until it is stored (docs/wire.md 7): a leader election costs the call latency, never
an event. While it runs, the server is told every third of `ack_wait` that it is still in progress.
It is negatively acknowledged (and comes back after the next `nak_backoff` delay) only when its side
effect certainly did not start; a refused message is dead-lettered and terminated; a message whose
claim was taken over before its outcome was recorded is published but not acknowledged, so its
redelivery answers from the ledger. A delivery past `max_deliver` is never executed: it is resolved
from the ledger or dead-lettered, then terminated; one that finds a live claim waits for it, in
progress (a negative acknowledgement of the server's last delivery would have the server give the
message up).

Each consumer's loop fetches at most as many messages as the process has free slots (`concurrency`,
else `max_pending`), shared by its consumers, so no worker hoards work another could do. nats-py's
fetch also returns what earlier fetches left on the pull inbox, more than asked: those wait for a
slot each, so no more than `concurrency` messages ever run at once.
"""

import asyncio
import logging
import math
from collections import deque
from collections.abc import Callable
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from ..config import DurableSettings, defaults
from ..errors import ServeError
from ..ledger import KeyValueStore, StoreUnavailable, WaitingWrites
from .acked_publish import AckedPublisher, WriteFailed
from .delivery import Delivery, Redeliver
from .delivery import current as current_delivery
from .discovery import ServedEndpoint
from .dispatcher import Dispatcher, Publisher
from .durable_streams import (
    CORE_KINDS,
    DURABLE_KINDS,
    consumer_config,
    consumer_name,
    ensure_consumer,
    ensure_streams,
    stored_subjects,
)
from .durable_writes import UntilStored
from .endpoints import clock
from .event_writer import EventWriter, JetStreamEvents
from .handler import MessageHandler
from .incoming import Incoming
from .nats_binding import NatsBinding
from .outages import Outage
from .outgoing import Publish
from .subjects import Kind
from .wire_publish import WirePublisher

_LOGGER = logging.getLogger("interaction_worker")
# Seconds one fetch waits for messages; a free slot held by an idle fetch is lost to the other
# consumers that long.
_FETCH_WAIT = 0.5
# How long a fetch waits while another consumer waits for a slot it holds.
_FETCH_WAIT_CONTENDED = 0.02
# What a consumer loop meets while its stream elects a leader or its server restarts: one line once it
# is over (`Outage`), not a traceback per fetch.
_EXPECTED_FETCH_ERRORS = (
    nats.js.errors.ServiceUnavailableError,
    nats.errors.NoRespondersError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.StaleConnectionError,
    nats.errors.UnexpectedEOF,
    nats.errors.FlushTimeoutError,
)


class DurableBinding:
    def __init__(
        self,
        client: Client,
        handler: MessageHandler,
        *,
        queue: str,
        settings: DurableSettings,
        concurrency: int | None = None,
        max_pending: int = defaults.MAX_PENDING,
        ledger_store: KeyValueStore | None = None,
        logger: logging.Logger = _LOGGER,
        kinds: tuple[Kind, ...] | None = None,
        traced: Callable[[Publisher], Publisher] | None = None,
        events: EventWriter | None = None,
        atomic_events: bool = False,
    ) -> None:
        """
        Args:
            ledger_store: the ledger's store, opened at start when it can be (`open()`).
            events: where the events and dead letters are stored; by default the streams of
                `settings`, through acknowledged publishes on `client`.
            atomic_events: a call's events in one atomic batch (the events stream is updated to
                allow it).
        """
        self.client = client
        # What this worker serves: by default every kind its handler has (the command protocol's only
        # with a dispatcher). Only these kinds' subjects join the calls stream and get a consumer.
        served = kinds if kinds is not None else handler.kinds
        self._wire = WirePublisher(client)
        self.handler = handler
        self.queue = queue
        self.settings = settings
        self.logger = logger
        self.ledger_store = ledger_store
        self.limit = concurrency or max_pending
        self.core = NatsBinding(
            client,
            handler,
            queue=queue,
            concurrency=concurrency,
            max_pending=max_pending,
            logger=logger,
            kinds=tuple(kind for kind in CORE_KINDS if kind in served),
            traced=traced,
        )
        # What a message's publishes go through: `_publish`, or tracing's around it (docs/tracing.md).
        self._send = self._publish if traced is None else traced(self._publish)
        self.closing = False
        # Message tasks cancelled, and consumer loops ended, other than by shutdown.
        self.lost = 0
        self.running: set[asyncio.Task[None]] = set()
        # One per message running, and per message a fetch in flight may bring.
        self._slots = _Slots(self.limit)
        self._fetchers: list[asyncio.Task[None]] = []
        self._subscriptions: list[Any] = []
        self._js: JetStreamContext = client.jetstream()
        self._stream = settings.calls_stream
        self.kinds = tuple(kind for kind in DURABLE_KINDS if kind in served)
        prefix = handler.subjects.prefix
        self.atomic_events = atomic_events
        self._acked: AckedPublisher | None = None
        if events is None:
            self._acked = AckedPublisher(client)
            streams = stored_subjects(prefix, settings)
            events = JetStreamEvents(self._acked, streams, atomic=atomic_events)
        self.events = events
        # Writes waiting to be retried, the ledger's and the events' alike (the metrics).
        ledger = handler.ledger
        self.waiting = (
            ledger.waiting if ledger is not None else WaitingWrites(logger=logger)
        )
        self._stored_prefixes = tuple(
            subject for subject, _ in stored_subjects(prefix, settings)
        )
        self._until_stored = UntilStored(
            events,
            self.waiting,
            window=min(settings.duplicate_window, settings.events_max_age),
            alive=lambda: not client.is_closed,
        )
        self._fetching = Outage("fetching from the calls stream", logger=logger)

    async def start(self) -> None:
        """Open the ledger's bucket, create or check the streams and consumers, then consume.

        Raises:
            ServeError: JetStream is missing, a stream conflicts (wire.md 7), or the ledger's bucket
                cannot be opened.
        """
        opener = getattr(self.ledger_store, "open", None)
        if opener is not None:
            try:
                await opener()
            except StoreUnavailable as error:
                raise ServeError(str(error)) from None
        if self._acked is not None:
            try:
                await self._acked.open()
            except WriteFailed as failed:
                raise ServeError(failed.reason) from None
        prefix = self.handler.subjects.prefix
        await ensure_streams(
            self._js,
            prefix,
            self.settings,
            self.kinds,
            self.logger,
            atomic=self.atomic_events,
        )
        subscriptions = []
        for kind in self.kinds:
            subject = self.handler.subjects.request(kind)
            config = consumer_config(self.queue, kind, subject, self.settings)
            await ensure_consumer(self._js, self._stream, config, self.logger)
            subscription = await self._js.pull_subscribe_bind(
                durable=config.durable_name, stream=self._stream
            )
            subscriptions.append((kind, subscription))
        await self.core.start()
        for kind, subscription in subscriptions:
            self._fetch(kind, subscription)
        self._subscriptions = [subscription for _, subscription in subscriptions]

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
                if _expected(error):
                    fetching.failed(kind, _said(error))
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

    @property
    def pending(self) -> int:
        """Messages held: those of the consumers running, and the core subscriptions' (queued or
        executing)."""
        return len(self.running) + self.core.pending

    @property
    def dispatcher(self) -> Dispatcher:
        """The core subscriptions' dispatcher."""
        return self.core.dispatcher

    @property
    def workers_lost(self) -> int:
        """Message tasks, consumer loops and dispatcher workers that ended other than by shutdown."""
        return self.lost + self.core.workers_lost

    def served_endpoints(self) -> list[ServedEndpoint]:
        """The durable subjects (with the stream and consumer they are read from), then the core
        subscriptions, as discovery lists them."""
        durable = [
            ServedEndpoint(
                self.handler.endpoints[kind],
                self.queue,
                {
                    "stream": self._stream,
                    "consumer": consumer_name(self.queue, kind),
                },
            )
            for kind in self.kinds
        ]
        return durable + self.core.served_endpoints()

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

    async def _handle(self, kind: Kind, msg: Msg) -> None:
        # Each delivery counts as a request, a redelivery too: discovery counts messages handled.
        endpoint = self.handler.endpoints[kind]
        endpoint.requests += 1
        started = clock()
        settings = self.settings
        meta = msg.metadata
        number = meta.num_delivered or 1
        delivery = Delivery(
            number=number,
            last=number >= settings.max_deliver,
            letter_id=f"dead:{self._stream}:{meta.sequence.stream}",
        )
        # The message's own reply subject is JetStream's acknowledgement subject: the reply goes
        # only to Interaction-Reply-To (wire.md 7).
        incoming = Incoming(msg.subject, msg.data, msg.headers, None)
        alive = _InProgress(msg, settings.ack_wait / 3, self.logger)
        token = current_delivery.set(delivery)
        try:
            if number > settings.max_deliver:
                delivery.number = settings.max_deliver  # the executed attempts
                while True:
                    try:
                        publishes = await self.handler.resolve_exhausted(
                            kind, incoming, settings.max_deliver
                        )
                        break
                    except Redeliver as later:
                        # The server's last delivery: it would give the message up if naked.
                        await asyncio.sleep(later.delay if later.delay else 0.0)
                await self._send(publishes)
                if not delivery.stored:
                    return  # the process is ending: the server delivers it again
                await msg.term()
                return
            try:
                publishes = await self.handler.handle(kind, incoming)
            except Redeliver as later:
                delay = (
                    later.delay if later.delay is not None else self._backoff(number)
                )
                await msg.nak(delay=delay)
                return
            await self._send(publishes)
            if not delivery.recorded or not delivery.stored:
                return  # redelivered after ack_wait: the ledger answers then
            dead = f"{self.handler.subjects.prefix}.dead."
            if any(subject.startswith(dead) for subject, _, _ in publishes):
                await msg.term()
            else:
                await msg.ack()
        except asyncio.CancelledError:
            if not self.closing:
                self.lost += 1
                self.logger.error(
                    "handling %s was cancelled, not by shutdown: the server delivers it "
                    "again after ack_wait",
                    msg.subject,
                )
            raise
        except nats.errors.Error as error:
            # Publishing the reply or acknowledging failed (the connection closed): the message
            # comes back, and the ledger answers it without running it again.
            self.logger.warning(
                "handling %s: %s; the server delivers it again",
                msg.subject,
                _said(error),
            )
        except Exception:
            self.logger.warning("handling %s failed", msg.subject, exc_info=True)
        finally:
            current_delivery.reset(token)
            alive.stop()
            endpoint.processing_ns += clock() - started

    def _backoff(self, number: int) -> float:
        delays = self.settings.nak_backoff
        return delays[min(number, len(delays)) - 1]

    async def _publish(self, publishes: list[Publish]) -> None:
        """Store the events and dead letters (acknowledged, until stored), then publish the reply."""
        stored = self._stored_prefixes
        events = [p for p in publishes if p[0].startswith(stored)]
        if events:
            delivery = current_delivery.get()
            first_sent = delivery.first_sent if delivery is not None else None
            if not await self._until_stored.write(events, first_sent):
                if delivery is not None:
                    delivery.stored = False
                return
            publishes = [p for p in publishes if not p[0].startswith(stored)]
        if publishes:
            await self._wire.publish(publishes)

    async def stop(self, grace: float) -> None:
        """Stop fetching; let running messages finish within `grace`, then cancel them (their
        outcome is published as `cancelled` / WORKER_SHUTDOWN and acknowledged)."""
        self.closing = True
        fetchers = list(self._fetchers)
        for fetcher in fetchers:
            fetcher.cancel()
        await asyncio.gather(*fetchers, return_exceptions=True)
        self._fetchers.clear()
        for subscription in self._subscriptions:
            try:
                await subscription.unsubscribe()
            except Exception:  # a closed connection has nothing left to unsubscribe
                self.logger.debug("unsubscribing a consumer failed", exc_info=True)
        self._subscriptions.clear()
        await self.core.stop(grace)
        running = set(self.running)
        if running:
            _, late = await asyncio.wait(running, timeout=grace)
            if late:
                self.handler.shutting_down = True
                for task in late:
                    task.cancel()
                await asyncio.wait(late, timeout=max(grace, 5.0))


class _Slots:
    """Free slots, handed to the consumers in the order they asked (a fair semaphore that gives
    several permits at once)."""

    def __init__(self, total: int) -> None:
        self.free = total
        self._turns: deque[tuple[int, asyncio.Future[int]]] = deque()

    @property
    def waiting(self) -> bool:
        return bool(self._turns)

    async def take(self, most: int, *, first: bool = False) -> int:
        """At least one slot and at most `most`, once it is this caller's turn (`first`: before
        every caller waiting, for a message fetched already)."""
        if self.free > 0 and not self._turns:
            taken = min(most, self.free)
            self.free -= taken
            return taken
        turn: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if first:
            self._turns.appendleft((most, turn))
        else:
            self._turns.append((most, turn))
        try:
            return await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.give(turn.result())  # handed over, then cancelled: they go back
            raise

    def give(self, count: int) -> None:
        self.free += count
        while self.free > 0 and self._turns:
            most, turn = self._turns.popleft()
            if turn.done():
                continue  # its caller was cancelled while waiting
            taken = min(most, self.free)
            self.free -= taken
            turn.set_result(taken)


class _InProgress:
    """Tells the server every `interval` seconds that a message is still being handled: a timer,
    and a task only for each report (most calls end before the first is due)."""

    def __init__(self, msg: Msg, interval: float, logger: logging.Logger) -> None:
        self.msg = msg
        self.interval = interval
        self.logger = logger
        self.loop = asyncio.get_running_loop()
        self.reports: set[asyncio.Task[None]] = set()
        self.timer: asyncio.TimerHandle | None = self.loop.call_later(
            interval, self._due
        )

    def _due(self) -> None:
        report = self.loop.create_task(self._report())
        self.reports.add(report)
        report.add_done_callback(self.reports.discard)
        self.timer = self.loop.call_later(self.interval, self._due)

    async def _report(self) -> None:
        if self.timer is None:
            return  # the message ended before this report ran: it is acknowledged, or coming back
        try:
            await self.msg.in_progress()
        except Exception:
            # While the server cannot hear it (the writes waiting say so once, not per message).
            self.logger.debug(
                "telling the server %s is in progress failed", self.msg.subject
            )

    def stop(self) -> None:
        """No report after this (one being written finishes: cut short, it could leave a partial
        write on the connection)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


def _expected(error: BaseException) -> bool:
    """Whether a fetch failed as it does while a stream elects a leader or a server restarts."""
    if isinstance(error, _EXPECTED_FETCH_ERRORS):
        return True
    return isinstance(error, nats.js.errors.APIError) and error.code == 503


def _said(error: BaseException) -> str:
    if isinstance(
        error, nats.js.errors.ServiceUnavailableError | nats.errors.NoRespondersError
    ):
        return "no leader to answer (a stream electing one, or a server restarting)"
    if isinstance(error, nats.js.errors.APIError):
        return (
            f"JetStream answered {error.code}: {error.description or 'no description'}"
        )
    return f"the NATS connection failed ({type(error).__name__})"
