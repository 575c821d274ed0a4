"""Durable mode (wire.md 7): tool calls, MCP requests and deliveries come from JetStream pull
consumers shared by every worker, so a call the server accepted survives a killed worker and a
restarted server; `P.observe` and `P.tool.list`, which change nothing, stay core subscriptions.

One message's order of work: claim in the ledger → execute → record → publish → acknowledge.
While it runs, the server is told every third of `ack_wait` that it is still in progress. It is
negatively acknowledged (and comes back after the next `nak_backoff` delay) only when its side
effect certainly did not start; a refused message is dead-lettered and terminated; a message whose
outcome could not be recorded is published but not acknowledged, so its redelivery answers from the
ledger. A delivery past `max_deliver` is never executed: it is resolved from the ledger or
dead-lettered, then terminated.

Publishing: the reply to `Interaction-Reply-To` is a core publish, but the events and the dead letter
are JetStream publishes whose PubAck is awaited before the message is acknowledged, since the streams
are what durable mode promises: a core publish the events stream did not store (its leader being
elected on a cluster) would be delivered to live subscribers, then lost for good once the call is
acknowledged. A message's stream publishes go out together and each is retried, with a short
backoff, for up to one `ack_wait` (the in-progress reports hold the message meanwhile); one still
not stored leaves the message negatively acknowledged with the next `nak_backoff` delay, so its
redelivery publishes again: from the ledger's `done` record without running anything, or, with the
ledger off, by running the call again (at least once). The events' stable `Nats-Msg-Id` lets the
stream drop what an earlier attempt had stored.

Each consumer's loop fetches at most as many messages as the process has free slots (`concurrency`,
else `max_pending`), shared by the three consumers, so no worker hoards work another could do.
"""

import asyncio
import json
import logging
import math
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import Header

from ..config import DurableSettings
from ..errors import ServeError
from ..ledger import StoreUnavailable
from .delivery import Delivery, Redeliver
from .delivery import current as current_delivery
from .discovery import ServedEndpoint
from .dispatcher import Publisher
from .durable_streams import (
    DURABLE_KINDS,
    consumer_config,
    consumer_name,
    ensure_consumer,
    ensure_streams,
    stream_configs,
)
from .endpoints import clock
from .handler import MessageHandler
from .incoming import Incoming
from .ledger_store import JetStreamStore
from .nats_binding import NatsBinding
from .outgoing import Publish
from .subjects import Kind

_LOGGER = logging.getLogger("interaction_worker")
# Seconds one fetch waits for messages; a free slot held by an idle fetch is lost to the other
# consumers that long.
_FETCH_WAIT = 0.5
# How long a fetch waits while another consumer waits for a slot it holds.
_FETCH_WAIT_CONTENDED = 0.02
# Seconds one attempt at a stream publish waits for its PubAck: a stream electing a leader may leave
# a request unanswered, and the next attempt may reach the new leader.
_PUBACK_WAIT = 2.0
# The pauses between attempts at a stream publish: the first, doubled up to the last.
_RETRY_FIRST = 0.05
_RETRY_MOST = 0.5
# The status of a request no subscriber (here: no stream) answered.
_NO_RESPONDERS = "503"
# The stream publishes of the message being published (its events and dead letter), which `_publish`
# leaves for `_run` to send and await: set by `_run`, so the publisher's signature, and tracing's
# wrapper around it, stay as they are.
_stored: ContextVar[list[Publish] | None] = ContextVar("stored", default=None)


class DurableBinding:
    def __init__(
        self,
        client: Client,
        handler: MessageHandler,
        *,
        queue: str,
        settings: DurableSettings,
        concurrency: int | None = None,
        max_pending: int = 1000,
        ledger_store: JetStreamStore | None = None,
        logger: logging.Logger = _LOGGER,
        traced: Callable[[Publisher], Publisher] | None = None,
    ) -> None:
        self.client = client
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
            kinds=("observe", "list"),
            traced=traced,
        )
        # What a message's publishes go through: `_publish`, or tracing's around it (operate.md 3).
        self._send = self._publish if traced is None else traced(self._publish)
        self.closing = False
        self.running: set[asyncio.Task[None]] = set()
        # One per message running, and per message a fetch in flight may bring.
        self._slots = _Slots(self.limit)
        self._fetchers: list[asyncio.Task[None]] = []
        self._subscriptions: list[Any] = []
        self._js: JetStreamContext = client.jetstream()
        self._acks = _PubAcks(client)
        self._stream = settings.calls_stream
        # The subjects the events and dead-letter streams capture (`P.tool.result.` ...): what a
        # message publishes there waits for the stream's PubAck; anything else (the reply) is core.
        streams = stream_configs(handler.subjects.prefix, settings)
        self._stream_subjects = tuple(
            subject.removesuffix(">")
            for config in (streams.events, streams.dead)
            for subject in config.subjects or ()
        )

    async def start(self) -> None:
        """Open the ledger's bucket, create or check the streams and consumers, then consume.

        Raises:
            ServeError: JetStream is missing, a stream conflicts (wire.md 7), or the ledger's bucket
                cannot be opened.
        """
        if self.ledger_store is not None:
            try:
                await self.ledger_store.open()
            except StoreUnavailable as error:
                raise ServeError(str(error)) from None
        prefix = self.handler.subjects.prefix
        await ensure_streams(self._js, prefix, self.settings, self.logger)
        subscriptions = []
        for kind in DURABLE_KINDS:
            subject = self.handler.subjects.request(kind)
            config = consumer_config(self.queue, kind, subject, self.settings)
            await ensure_consumer(self._js, self._stream, config, self.logger)
            subscription = await self._js.pull_subscribe_bind(
                durable=config.durable_name, stream=self._stream
            )
            subscriptions.append((kind, subscription))
        await self._acks.start()
        await self.core.start()
        for kind, subscription in subscriptions:
            self._fetchers.append(
                asyncio.create_task(self._consume(kind, subscription))
            )
        self._subscriptions = [subscription for _, subscription in subscriptions]

    async def _consume(self, kind: Kind, subscription: Any) -> None:
        # Each fetch holds the slots it may fill until it returns. The consumers take turns for
        # slots, so one that found nothing queues behind the others for its next turn; while
        # another waits, an idle consumer's fetch returns almost at once.
        slots = self._slots
        most = max(1, math.ceil(self.limit / len(DURABLE_KINDS)))
        while not self.closing:
            taken = await slots.take(most)
            wait = _FETCH_WAIT if not slots.waiting else _FETCH_WAIT_CONTENDED
            try:
                messages = await subscription.fetch(batch=taken, timeout=wait)
            except (TimeoutError, nats.errors.TimeoutError):
                messages = []
            except asyncio.CancelledError:
                slots.give(taken)
                raise
            except Exception:
                messages = []
                if self.client.is_closed:
                    slots.give(taken)
                    return
                self.logger.warning("fetching from %s failed", kind, exc_info=True)
                await asyncio.sleep(_FETCH_WAIT)
            slots.give(taken - len(messages))
            for msg in messages:
                task = asyncio.create_task(self._run(kind, msg))
                self.running.add(task)
                task.add_done_callback(self._finished)

    @property
    def pending(self) -> int:
        """Messages held: those of the consumers running, and the core subscriptions' (queued or
        executing)."""
        return len(self.running) + self.core.pending

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
            for kind in DURABLE_KINDS
        ]
        return durable + self.core.served_endpoints()

    def _finished(self, task: asyncio.Task[None]) -> None:
        self.running.discard(task)
        self._slots.give(1)

    async def _run(self, kind: Kind, msg: Msg) -> None:
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
                publishes = await self.handler.resolve_exhausted(
                    kind, incoming, settings.max_deliver
                )
                if not await self._publish_all(publishes):
                    # No delivery follows this one: terminated all the same, said loudly.
                    self.logger.error(
                        "%s: its last delivery's events or dead letter were not stored",
                        msg.subject,
                    )
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
            if not await self._publish_all(publishes):
                self.logger.warning(
                    "%s: its events or dead letter were not stored; redelivered later",
                    msg.subject,
                )
                await msg.nak(delay=self._backoff(number))
                return
            if not delivery.recorded:
                return  # redelivered after ack_wait: the ledger answers then
            dead = f"{self.handler.subjects.prefix}.dead."
            if any(subject.startswith(dead) for subject, _, _ in publishes):
                await msg.term()
            else:
                await msg.ack()
        except asyncio.CancelledError:
            raise
        except Exception:
            # Publishing or acknowledging failed (the connection is away): the message comes back,
            # and the ledger answers it without running it again.
            self.logger.warning("handling %s failed", msg.subject, exc_info=True)
        finally:
            current_delivery.reset(token)
            alive.stop()
            endpoint.processing_ns += clock() - started

    def _backoff(self, number: int) -> float:
        delays = self.settings.nak_backoff
        return delays[min(number, len(delays)) - 1]

    async def _publish_all(self, publishes: list[Publish]) -> bool:
        """Send a message's publishes (through tracing's wrapper, if any), then wait for the PubAcks
        of those the events and dead-letter streams capture, publishing again those without one,
        with a short backoff, for up to one `ack_wait`. False if one is still not stored then: the
        message must not be acknowledged.

        Every failure is retried: no responders or no answer (the stream electing a leader, the
        connection reconnecting) and the stream's errors alike, since a redelivery would meet the
        same. A repeated publish is harmless: the stream drops a `Nats-Msg-Id` it already holds.
        """
        stored: list[Publish] = []
        token = _stored.set(stored)
        try:
            await self._send(publishes)
        finally:
            _stored.reset(token)
        if not stored:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.ack_wait
        acks = self._acks
        pause = _RETRY_FIRST
        while True:
            # Sent together: the PubAcks take one round trip, not one each.
            waits = [
                await acks.send(subject, payload, headers)
                for subject, payload, headers in stored
            ]
            left = deadline - loop.time()
            try:
                await asyncio.wait(waits, timeout=max(min(left, _PUBACK_WAIT), 0.01))
            except asyncio.CancelledError:
                for ack in waits:
                    ack.cancel()  # forgotten, not left waiting for a reply forever
                raise
            stored = [
                one
                for one, ack in zip(stored, waits, strict=True)
                if not acks.stored(ack)
            ]
            if not stored:
                return True
            if self.client.is_closed or deadline - loop.time() <= pause:
                self.logger.warning(
                    "publishing %s: not stored",
                    ", ".join(subject for subject, _, _ in stored),
                )
                return False
            self.logger.debug(
                "publishing %d message(s) to a stream failed; again", len(stored)
            )
            await asyncio.sleep(pause)
            pause = min(pause * 2, _RETRY_MOST)

    async def _publish(self, publishes: list[Publish]) -> None:
        """Core-publish the reply; leave the stream publishes to `_publish_all`, which sends them
        together and waits for their PubAcks (outside `_run`, e.g. a bare `_send`, all are core)."""
        stored = _stored.get()
        publish = self.client.publish
        for subject, payload, headers in publishes:
            if stored is not None and subject.startswith(self._stream_subjects):
                stored.append((subject, payload, headers))
            else:
                await publish(subject, payload, headers=headers)

    async def stop(self, grace: float) -> None:
        """Stop fetching; let running messages finish within `grace`, then cancel them (their
        outcome is published as `cancelled` / WORKER_SHUTDOWN and acknowledged)."""
        self.closing = True
        for fetcher in self._fetchers:
            fetcher.cancel()
        await asyncio.gather(*self._fetchers, return_exceptions=True)
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

    async def take(self, most: int) -> int:
        """At least one slot and at most `most`, once it is this caller's turn."""
        if self.free and not self._turns:
            taken = min(most, self.free)
            self.free -= taken
            return taken
        turn: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._turns.append((most, turn))
        try:
            return await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.give(turn.result())  # handed over, then cancelled: they go back
            raise

    def give(self, count: int) -> None:
        self.free += count
        while self.free and self._turns:
            most, turn = self._turns.popleft()
            if turn.done():
                continue  # its caller was cancelled while waiting
            taken = min(most, self.free)
            self.free -= taken
            turn.set_result(taken)


class _PubAcks:
    """JetStream publishes whose PubAck is awaited: each sent with a reply subject under one
    wildcard inbox, answered into a future of its own. Neither a task, a timer nor a subscription
    per publish (as `js.publish` costs: two per message are on the hot path of durable mode); the
    caller bounds its wait over all of a message's at once."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.prefix = ""
        self.count = 0
        self.waiting: dict[str, asyncio.Future[bool]] = {}

    async def start(self) -> None:
        self.prefix = f"{self.client.new_inbox()}."
        await self.client.subscribe(f"{self.prefix}*", cb=self._answer)

    async def send(
        self, subject: str, payload: bytes, headers: dict[str, str]
    ) -> asyncio.Future[bool]:
        """Publish to a stream; the future is True once it has stored it (a duplicate included),
        False if it refused or no stream answered. Its reply is forgotten once it is done or
        cancelled."""
        self.count += 1
        token = str(self.count)
        ack: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.waiting[token] = ack
        ack.add_done_callback(lambda _: self.waiting.pop(token, None))
        try:
            await self.client.publish(
                subject, payload, reply=self.prefix + token, headers=headers
            )
        except Exception as error:
            ack.set_result(False)
            _LOGGER.debug("publishing %s failed: %s", subject, type(error).__name__)
        return ack

    @staticmethod
    def stored(ack: asyncio.Future[bool]) -> bool:
        """Whether the stream stored it; an ack still awaited is given up (cancelled)."""
        if not ack.done():
            ack.cancel()
            return False
        return not ack.cancelled() and ack.result()

    async def _answer(self, msg: Msg) -> None:
        ack = self.waiting.get(msg.subject[len(self.prefix) :])
        if ack is None or ack.done():
            return  # answered after its wait ended
        if msg.headers and msg.headers.get(Header.STATUS) == _NO_RESPONDERS:
            ack.set_result(False)  # no stream captures the subject now (an election)
        elif b'"error"' in msg.data and "error" in json.loads(msg.data):
            _LOGGER.debug("a stream refused a publish: %s", msg.data[:200])
            ack.set_result(False)
        else:
            ack.set_result(True)


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
        try:
            await self.msg.in_progress()
        except Exception:
            self.logger.info(
                "telling the server %s is in progress failed", self.msg.subject
            )

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
