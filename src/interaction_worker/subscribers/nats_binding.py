"""The standalone serving path: nats-py subscriptions feeding our bounded dispatcher."""

import logging
from collections.abc import Callable
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from ..config import defaults
from ..contracts.wire import Kind
from ..errors import ServeError
from ..ledger import KeyValueStore, StoreUnavailable, WaitingWrites
from .discovery import ServedEndpoint
from .dispatcher import Dispatcher, Publisher
from .handler import MessageHandler
from .incoming import Incoming
from .outgoing import Publish
from .wire_publish import WirePublisher

_LOGGER = logging.getLogger("interaction_worker")


class NatsBinding:
    """Subscribes the four request subjects in a queue group and publishes what the handler says.

    The client's pending limits sit far above `max_pending`, so the dispatcher refuses (OVERLOADED)
    long before the client would drop a message as a slow consumer.

    Args:
        traced: wraps the publish with tracing's (docs/tracing.md), when the handler traces; chosen
            once here, so a binding that does not trace pays nothing per message.
    """

    def __init__(
        self,
        client: Client,
        handler: MessageHandler,
        *,
        queue: str,
        concurrency: int | None = None,
        max_pending: int = defaults.MAX_PENDING,
        logger: logging.Logger = _LOGGER,
        ledger_store: KeyValueStore | None = None,
        kinds: tuple[Kind, ...] | None = None,
        traced: Callable[[Publisher], Publisher] | None = None,
    ) -> None:
        self.client = client
        # By default every subject the handler serves.
        self.kinds = kinds if kinds is not None else handler.kinds
        self.ledger_store = ledger_store
        self.handler = handler
        self.queue = queue
        self.logger = logger
        self._wire = WirePublisher(client)
        self.dispatcher = Dispatcher(
            handler,
            self._wire.publish if traced is None else traced(self._publish),
            concurrency=concurrency,
            max_pending=max_pending,
            logger=logger,
        )
        self._subscriptions: list[Subscription] = []
        self._pending_limit = max(65536, max_pending * 16)
        # Writes waiting to be retried (the metrics): the ledger's outcomes, in core mode.
        ledger = handler.ledger
        self.waiting = (
            ledger.waiting if ledger is not None else WaitingWrites(logger=logger)
        )

    async def _publish(self, publishes: list[Publish]) -> None:
        await self._wire.publish(publishes)

    async def start(self) -> None:
        """Subscribe; with a ledger, its bucket is created or bound first.

        Raises:
            ServeError: the ledger's bucket cannot be opened (no JetStream on the server, say).
        """
        # A store of our own bucket is opened first; an injected one may need nothing opened.
        opener = getattr(self.ledger_store, "open", None)
        if opener is not None:
            try:
                await opener()
            except StoreUnavailable as error:
                raise ServeError(str(error)) from None
        for kind in self.kinds:
            subject = self.handler.subjects.request(kind)
            subscription = await self.client.subscribe(
                subject,
                queue=self.queue,
                cb=self._callback(kind),
                pending_msgs_limit=self._pending_limit,
                pending_bytes_limit=self._pending_limit * 64 * 1024,
            )
            self._subscriptions.append(subscription)
        # nats-py 2.16 writes flush()'s PING straight to the socket, ahead of the SUBs still in its
        # pending buffer, so one PONG does not prove the server has them; the second PING follows them.
        await self.client.flush()
        await self.client.flush()

    @property
    def pending(self) -> int:
        """Messages held by the dispatcher: queued or executing."""
        return self.dispatcher.pending

    @property
    def workers_lost(self) -> int:
        """Dispatcher workers that ended other than by shutdown (each replaced)."""
        return self.dispatcher.lost

    def served_endpoints(self) -> list[ServedEndpoint]:
        """The subjects this binding subscribes, as discovery lists them."""
        return [
            ServedEndpoint(self.handler.endpoints[kind], self.queue)
            for kind in self.kinds
        ]

    def _callback(self, kind: Kind) -> Any:
        dispatcher = self.dispatcher
        offer = dispatcher.offer
        endpoint = self.handler.endpoints[kind]

        async def on_message(msg: Msg) -> None:
            incoming = Incoming(msg.subject, msg.data, msg.headers, msg.reply)
            refusal = offer(endpoint, incoming)
            if refusal is not None:
                await dispatcher.refuse(kind, incoming, refusal)

        return on_message

    async def stop(self, grace: float) -> None:
        """Stop taking messages (a message already received is never dropped), then shut down."""
        for subscription in self._subscriptions:
            try:
                await subscription.drain()  # type: ignore[no-untyped-call]
            except Exception:  # a closed connection has nothing left to drain
                self.logger.debug("draining a subscription failed", exc_info=True)
        self._subscriptions.clear()
        await self.dispatcher.shutdown(grace)
