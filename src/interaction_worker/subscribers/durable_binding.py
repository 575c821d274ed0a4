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

The consumers are read by their loops (`durable_consumers.py`).
"""

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from ..config import DurableSettings, defaults
from ..contracts.wire import CORE_KINDS, DURABLE_KINDS, Kind
from ..errors import ServeError
from ..ledger import KeyValueStore, StoreUnavailable, WaitingWrites
from .acked_answers import WriteFailed
from .acked_publish import AckedPublisher
from .delivery import Delivery, Redeliver
from .delivery import current as current_delivery
from .discovery import ServedEndpoint
from .dispatcher import Dispatcher, Publisher
from .durable_consumers import ConsumerLoops
from .durable_streams import (
    consumer_config,
    consumer_name,
    ensure_consumer,
    ensure_streams,
    stored_subjects,
)
from .durable_writes import UntilStored
from .endpoints import clock
from .event_writer import EventWriter, JetStreamEvents
from .fetch_failures import failure_said
from .handler import MessageHandler
from .in_progress import ProgressReports
from .incoming import Incoming
from .jetstream_messages import delivered
from .nats_binding import NatsBinding
from .outages import Outage
from .outgoing import Publish
from .queued_next import take_queued_first
from .slots import Slots
from .wire_publish import WirePublisher

_LOGGER = logging.getLogger("interaction_worker")


class DurableBinding(ConsumerLoops):
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
        self._slots = Slots(self.limit)
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
            take_queued_first(subscription)
            subscriptions.append((kind, subscription))
        await self.core.start()
        for kind, subscription in subscriptions:
            self._fetch(kind, subscription)
        self._subscriptions = [subscription for _, subscription in subscriptions]

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

    async def _handle(self, kind: Kind, msg: Msg) -> None:
        # Each delivery counts as a request, a redelivery too: discovery counts messages handled.
        endpoint = self.handler.endpoints[kind]
        endpoint.requests += 1
        started = clock()
        settings = self.settings
        number, sequence = delivered(msg)
        delivery = Delivery(
            number=number,
            last=number >= settings.max_deliver,
            letter_id=f"dead:{self._stream}:{sequence}",
        )
        # The message's own reply subject is JetStream's acknowledgement subject: the reply goes
        # only to Interaction-Reply-To (wire.md 7).
        incoming = Incoming(msg.subject, msg.data, msg.headers, None)
        alive = ProgressReports(msg, settings.ack_wait / 3, self.logger)
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
                await self._wire.acknowledge(msg)
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
                failure_said(error),
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
