"""Where a client's replies come: one subscription to an inbox of its own, the requests waiting on
it, and which message on it ends each wait (docs/flows.md 1).

Every request carries `Interaction-Reply-To: <an inbox of this client>` and its reply is read only
there, so the client works the same against a core-mode and a durable-mode worker (docs/wire.md 7).
The message's own reply subject is a sibling of that inbox: a core NATS server answers it with a 503
status when nobody serves the subject, and a JetStream stream that captured the request with its
PubAck, which says the call was accepted and nothing more. Only the answer to the request is believed
(`replies`): anything else that reaches the inbox is ignored.
"""

import asyncio
import contextlib
import itertools
import json
import logging
import secrets
import uuid
from collections.abc import Mapping
from typing import Any, NamedTuple

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import ConnectionClosedError

from ..contracts.wire import REPLY_TO_HEADER, SERVICE_ERROR_HEADER, WIRE
from .replies import Matcher

_ACK = "ack"  # the last token of the publish's own reply subject
_LOGGER = logging.getLogger("interaction_worker")
_SHOWN_ID = 128  # characters of an id a message shows


class NoWorkerError(Exception):
    """No worker serves the subject (the server answered the request with 503)."""


class ConnectionLost(Exception):
    """The connection to NATS closed while a request waited for its reply:
    that answer can no longer arrive. The message says what was waited for."""


class ReplyInbox:
    """The replies of one client on `nc`, under `inbox_prefix` (`nats.inbox_prefix`)."""

    def __init__(self, nc: Client, inbox_prefix: str) -> None:
        self.nc = nc
        self._inbox = f"{inbox_prefix}.{uuid.uuid4().hex}"
        self._tokens = itertools.count(1)
        self._waiting: dict[str, _Waiting] = {}
        # What the answer to each request waiting must carry (None: it carries no id).
        self._expected: dict[str, Matcher | None] = {}
        self._subscription: Subscription | None = None
        self._lost = False

    def connection_lost(self, prefix: str) -> None:
        """End every wait with `ConnectionLost`, and refuse new requests."""
        self._lost = True
        waiting, self._waiting = self._waiting, {}
        for entry in waiting.values():
            if not entry.future.done():
                entry.future.set_exception(
                    ConnectionLost(
                        "connection to NATS lost while waiting for "
                        + entry.what(prefix)
                    )
                )

    async def close(self) -> None:
        """Cancel every wait and stop listening."""
        for entry in self._waiting.values():
            entry.future.cancel()
        self._waiting.clear()
        self._expected.clear()
        # A connection that is closing refuses this too: there is nothing left to undo then.
        with contextlib.suppress(ConnectionClosedError):
            if self._subscription is not None:
                subscription, self._subscription = self._subscription, None
                if not self.nc.is_closed:
                    await subscription.unsubscribe()

    async def send(
        self,
        prefix: str,
        subject: str,
        data: bytes,
        headers: Mapping[str, str] | None,
        expected: Matcher | None,
    ) -> Msg:
        """Publish `data` on `PREFIX.SUBJECT` and wait for its answer: the first message on its
        inbox that `expected` accepts (any, when None), or the server's 503.

        Raises:
            NoWorkerError: no worker serves the subject.
            ConnectionLost: the connection is gone, or goes while waiting.
        """
        self._check_connected(prefix, subject, data)
        try:
            await self._listen()
        except ConnectionClosedError:
            self._check_connected(prefix, subject, data)
            raise
        # Unpredictable, so that an inbox seen once (in a dead letter, say) tells nobody where the
        # client's next replies will come.
        token = f"{next(self._tokens)}{secrets.token_hex(8)}"
        inbox = f"{self._inbox}.{token}"
        future: asyncio.Future[Msg] = asyncio.get_running_loop().create_future()
        self._waiting[token] = _Waiting(future, subject, data)
        self._expected[token] = expected
        full_subject = f"{prefix}.{subject}"
        try:
            try:
                await self.nc.publish(
                    full_subject,
                    data,
                    reply=f"{inbox}.{_ACK}",
                    headers={**(headers or {}), REPLY_TO_HEADER: inbox},
                )
            except ConnectionClosedError:
                self._check_connected(prefix, subject, data)
                raise
            reply = await future
        finally:
            self._waiting.pop(token, None)
            self._expected.pop(token, None)
        if reply.headers is not None and reply.headers.get("Status") == "503":
            raise NoWorkerError(f"no worker is serving {full_subject}")
        return reply

    async def _listen(self) -> None:
        if self._subscription is None:
            self._subscription = await self.nc.subscribe(
                f"{self._inbox}.>", cb=self._on_reply
            )

    def _check_connected(self, prefix: str, subject: str, body: bytes) -> None:
        """`ConnectionLost` naming the request, rather than nats-py's `ConnectionClosedError`."""
        if self._lost or self.nc.is_closed:
            what = _named(subject, body) or f"the request on {prefix}.{subject}"
            raise ConnectionLost(f"connection to NATS lost before {what} was sent")

    async def _on_reply(self, msg: Msg) -> None:
        token, _, last = msg.subject[len(self._inbox) + 1 :].partition(".")
        entry = self._waiting.get(token)
        if entry is None or entry.future.done():
            return
        future = entry.future
        if last == _ACK:
            # The server's "no responders", or a stream's PubAck: only the first ends the wait.
            if msg.headers is not None and msg.headers.get("Status") == "503":
                future.set_result(msg)
            return
        if last or not self._answers(token, msg):
            _LOGGER.debug(
                "ignoring a message on %s: not the answer to its request", msg.subject
            )
            return
        future.set_result(msg)

    def _answers(self, token: str, msg: Msg) -> bool:
        """Whether `msg`, on the inbox of the request `token`, is that request's answer: an error
        reply, or a reply that carries the request's id (`replies`)."""
        if msg.headers is not None and SERVICE_ERROR_HEADER in msg.headers:
            return True
        expected = self._expected.get(token)
        if expected is None:
            return True
        try:
            reply = json.loads(msg.data)
        except ValueError:
            return False
        return expected(reply)


class _Waiting(NamedTuple):
    """A request waiting for its reply, and what it is, for a message if the connection goes:
    worked out only then, from the body."""

    future: asyncio.Future[Msg]
    subject: str
    body: bytes

    def what(self, prefix: str) -> str:
        """`the reply to call ID`, `the reply to delivery ID`, or `the reply to the request on
        PREFIX.SUBJECT`."""
        named = (
            _named(self.subject, self.body) or f"the request on {prefix}.{self.subject}"
        )
        return f"the reply to {named}"


def _named(subject: str, body: bytes) -> str | None:
    """`call ID` for a tool call or an MCP invoke, `delivery ID` for a delivery."""
    try:
        document: Any = json.loads(body)
    except ValueError:
        return None
    if not isinstance(document, Mapping):
        return None
    if subject == WIRE["output"].request:
        ident, kind = document.get("deliveryId"), "delivery"
    else:
        call = (
            document.get("call")
            if subject in (WIRE["tool"].request, WIRE["mcp"].request)
            else None
        )
        ident, kind = (call.get("id") if isinstance(call, Mapping) else None), "call"
    if not isinstance(ident, str) or not ident:
        return None
    return f"{kind} {ident[:_SHOWN_ID]}"
