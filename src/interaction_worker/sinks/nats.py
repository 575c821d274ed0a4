"""A sink that publishes each delivery on a core NATS subject, for UIs and downstream subscribers."""

import asyncio
import contextlib
import uuid
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from ..contracts import OutputRequest
from ..nodes import DeliveryContext
from ._bus import (
    NOT_SENT,
    Connection,
    check_subject,
    outgoing,
    subject_for,
)
from ._receipts import (
    DEFAULT_TIMEOUT,
    Receipt,
    accepted,
    check_name,
    check_timeout,
    timed_out,
    unavailable,
    unknown,
)


class _Echo:
    """Proves that the server has read what this connection published so far.

    A marker published to the connection's own subscription comes back only after the server has
    processed every message the connection sent before it. nats-py's `flush(timeout)` would do the
    same with a PING, but in nats-py 2.16 a flush that times out leaves its cancelled future in the
    PONG queue, and the late PONG then stops the connection's read loop for good.
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        self.prefix = client.new_inbox()
        self._waiting: dict[str, asyncio.Future[None]] = {}
        self._subscription: Subscription | None = None
        self._lock = asyncio.Lock()

    async def round_trip(self) -> None:
        async with self._lock:
            if self._subscription is None:
                self._subscription = await self.client.subscribe(
                    f"{self.prefix}.*", cb=self._on_marker
                )
        token = uuid.uuid4().hex
        back: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting[token] = back
        try:
            await self.client.publish(f"{self.prefix}.{token}")
            await back
        finally:
            self._waiting.pop(token, None)

    async def _on_marker(self, msg: Msg) -> None:
        back = self._waiting.pop(msg.subject.rpartition(".")[2], None)
        if back is not None and not back.done():
            back.set_result(None)

    async def close(self) -> None:
        subscription, self._subscription = self._subscription, None
        if subscription is not None and not self.client.is_closed:
            with contextlib.suppress(nats.errors.Error):
                await subscription.unsubscribe()


class NatsSink:
    """Publishes each delivery's wire JSON on a subject; `accepted` once the server has read it.

    The subject may contain `{key}`, the deliveryId's subject key (wire.md section 2), e.g.
    `ui.messages.{key}`. Core NATS is at most once and has no per-message acknowledgement:
    `accepted` means the server read the message (a marker published after it came back), not that
    a subscriber received it; with no subscriber, or a slow one the server cuts, it is still
    accepted. Use the JetStream sink when a delivery must be stored.

    Receipts: not connected (nothing sent) → `rejected` SINK_UNAVAILABLE, retryable; larger than
    the server's max_payload → `rejected` PAYLOAD_TOO_LARGE; sent but not confirmed within
    `timeout` (a stalled server, a connection lost meanwhile) → `unknown` SINK_TIMEOUT, since the
    client may still send it after reconnecting; the connection closed after sending → `unknown`
    SINK_CONNECTION_LOST. It needs to subscribe and publish on `_INBOX.>` (as requests do).

    Args:
        subject: the subject template.
        client: the connection to publish on; by default the worker's, handed over by
            `start(client)` when the worker starts. The sink never closes it.
        name: the sink's name in fan-out receipts and in its `Nats-Msg-Id` (`<name>:<K>`).
        timeout: seconds to wait for the confirmation.
    """

    def __init__(
        self,
        subject: str,
        *,
        client: Client | None = None,
        name: str = "nats",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.subject = check_subject(subject)
        self.name = check_name(name)
        self.timeout = check_timeout(timeout)
        self._connection = Connection(client)
        self._echo: _Echo | None = None

    async def start(self, client: Client) -> None:
        """Publish on `client` (the worker's connection), unless the sink was given one."""
        self._connection.start(client)

    async def deliver(
        self, request: OutputRequest, context: DeliveryContext
    ) -> dict[str, Any]:
        prepared = outgoing(
            self._connection, f"NatsSink {self.name!r}", request, self.name
        )
        if isinstance(prepared, dict):
            return prepared
        client, payload, headers = prepared
        if self._echo is None or self._echo.client is not client:
            self._echo = _Echo(client)
        echo = self._echo
        sent = False
        try:
            async with asyncio.timeout(self.timeout):
                await client.publish(
                    subject_for(self.subject, request), payload, headers=headers
                )
                sent = True
                await echo.round_trip()
        except TimeoutError:
            return timed_out(request, self.timeout)
        except NOT_SENT:
            if not sent:
                return unavailable(request)
            return _lost(request)
        return accepted(request)

    async def aclose(self) -> None:
        """Stop listening for confirmations; the connection itself stays open."""
        echo, self._echo = self._echo, None
        if echo is not None:
            await echo.close()


def _lost(request: OutputRequest) -> Receipt:
    return unknown(
        request,
        "SINK_CONNECTION_LOST",
        "The connection closed before the server confirmed the delivery",
    )
