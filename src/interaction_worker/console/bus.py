"""The console's side of the bus: one connection that subscribes to the events, the dead letters and
the deliveries, replays the events stream's history, and sends the page's requests.

The connection does not reconnect by itself: when it is lost, the feed connects again from the
start, through the injected `connect`, which finds the server afresh. An embedded server that comes
back on another port, or with a new token, is found as the command line would find it; nats-py's own
reconnection would keep dialling the old address.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from nats.aio.client import Client
from nats.aio.msg import Msg

from ..client import InteractionClient
from ..contracts.wire import MSG_ID_HEADER
from .events import build_event, event_subjects, sink_subject
from .history import StreamHistory
from .hub import Hub

_LOGGER = logging.getLogger("interaction_worker.console")

Disconnected = Callable[[], Awaitable[None]]
# Connects to the server (found afresh on each call) and calls its argument once the connection is
# lost; raises when the server cannot be reached.
Connector = Callable[[Disconnected], Awaitable[Client]]

# The events that happened while the console was away are replayed from a little before it lost the
# connection, so that a clock step or an event in flight at the cut is not missed.
_RECONNECT_OVERLAP = 2.0
_REPLAY_WAIT = 5.0
# The stream answers a direct get at once: a second without an answer means there is no more.
_REPLAY_IDLE = 1.0


class NotConnected(Exception):
    """The console has no connection to NATS at the moment."""


@dataclass(frozen=True)
class FeedOptions:
    """What the feed reads and how it sends.

    Attributes:
        prefix: the worker's subject prefix.
        delivery_subjects: the subjects of the configured `nats` sinks (`{key}` allowed).
        events_stream: the stream whose history is replayed, or None for none.
        history: how many events to replay.
        inbox_prefix: where the page's requests take their reply inboxes.
        timeout: seconds a page's request waits for its reply.
    """

    prefix: str
    delivery_subjects: tuple[str, ...] = ()
    events_stream: str | None = None
    history: int = 200
    inbox_prefix: str = "_INBOX"
    timeout: float = 75.0


class BusFeed:
    """Feeds the hub from NATS for as long as `run` runs, connecting again whenever it must."""

    def __init__(
        self,
        hub: Hub,
        options: FeedOptions,
        connect: Connector,
        *,
        retry_wait: float = 0.25,
        max_retry_wait: float = 2.0,
    ) -> None:
        self.hub = hub
        self.options = options
        self._connect = connect
        self._retry_wait = retry_wait
        self._max_retry_wait = max_retry_wait
        self._client: InteractionClient | None = None
        self._held: list[Msg] | None = None
        self._lost_at: float | None = None
        self.connected = asyncio.Event()

    @property
    def client(self) -> InteractionClient:
        """The client for the page's requests, on the current connection.

        Raises:
            NotConnected: the connection is down.
        """
        if self._client is None or self._client.nc.is_closed:
            raise NotConnected("the console is not connected to NATS")
        return self._client

    async def run(self) -> None:
        wait = self._retry_wait
        while True:
            lost = asyncio.Event()
            try:
                nc = await self._connect(_setter(lost))
            except Exception as error:
                if (
                    wait == self._retry_wait
                ):  # the first failure of a streak: say so once
                    _LOGGER.warning(
                        "console: not connected to NATS, retrying: %s", _one_line(error)
                    )
                self.hub.set_status(connected=False, detail=_one_line(error))
                await asyncio.sleep(wait)
                wait = min(wait * 2, self._max_retry_wait)
                continue
            wait = self._retry_wait
            try:
                await self._serve(nc, lost)
            except Exception as error:
                if not nc.is_closed:
                    _LOGGER.warning("console: %s", _one_line(error))
            finally:
                self.connected.clear()
                if self._client is not None:
                    # A page's request waiting for its reply gets its answer now, not at its timeout.
                    self._client.connection_lost()
                self._client = None
                self._lost_at = time.time()
                if not nc.is_closed:
                    await nc.close()
                self.hub.set_status(
                    connected=False, detail="connection lost; reconnecting"
                )

    async def _serve(self, nc: Client, lost: asyncio.Event) -> None:
        self._held = []
        subjects = (
            *event_subjects(self.options.prefix),
            *(sink_subject(s) for s in self.options.delivery_subjects),
        )
        for subject in dict.fromkeys(subjects):
            await nc.subscribe(subject, cb=self._on_message)
        await nc.flush()
        replayed: set[str] = set()
        try:
            replayed = await self._replay(nc)
        except Exception as error:
            # History is a courtesy: a server without JetStream, or without the stream, still
            # shows live events.
            _LOGGER.info("console: no history replayed (%s)", _one_line(error))
        held, self._held = self._held, None
        for msg in held:
            if (msg.headers or {}).get(MSG_ID_HEADER) not in replayed:
                self._show(msg)
        self._client = InteractionClient(
            nc,
            prefix=self.options.prefix,
            timeout=self.options.timeout,
            inbox_prefix=self.options.inbox_prefix,
        )
        self.hub.set_status(connected=True, detail=_where(nc))
        self.connected.set()
        await lost.wait()

    async def _on_message(self, msg: Msg) -> None:
        if self._held is not None:
            self._held.append(msg)
            return
        self._show(msg)

    def _show(self, msg: Msg) -> None:
        self._publish(msg.subject, msg.data, msg.headers)

    def _publish(
        self,
        subject: str,
        data: bytes,
        headers: Mapping[str, str] | None,
        *,
        received_at: float | None = None,
        replayed: bool = False,
    ) -> None:
        self.hub.publish(
            build_event(
                self.hub.next_seq(),
                subject,
                data,
                headers,
                prefix=self.options.prefix,
                instance=self.hub.instance,
                received_at=received_at,
                replayed=replayed,
            )
        )

    async def _replay(self, nc: Client) -> set[str]:
        """The last `history` events of the stream (after a lost connection: those since), shown
        in order; the `Nats-Msg-Id`s replayed. Read with direct gets, never a consumer."""
        stream, count = self.options.events_stream, self.options.history
        if stream is None or count < 1:
            return set()
        history = StreamHistory(
            nc, stream, f"{self.options.prefix}.>", idle=_REPLAY_IDLE
        )
        replayed: set[str] = set()
        async with asyncio.timeout(_REPLAY_WAIT):
            last = await history.last_sequence()
            if last is None:
                return replayed
            if self._lost_at is None:
                stored = history.read(
                    until=last, batch=count, sequence=max(1, last - count + 1)
                )
            else:
                stored = history.read(
                    until=last, batch=count, since=self._lost_at - _RECONNECT_OVERLAP
                )
            async for message in stored:
                msg_id = (message.headers or {}).get(MSG_ID_HEADER)
                if not self.hub.seen(msg_id):
                    self._publish(
                        message.subject,
                        message.data,
                        message.headers,
                        received_at=message.stored_at,
                        replayed=True,
                    )
                if msg_id is not None:
                    replayed.add(msg_id)
        return replayed


def _setter(event: asyncio.Event) -> Disconnected:
    async def set_it() -> None:
        event.set()

    return set_it


def _where(nc: Client) -> str:
    """The server's host and port, never the credentials a URL may carry."""
    url = nc.connected_url
    return f"{url.hostname}:{url.port}" if url is not None else ""


def _one_line(error: BaseException) -> str:
    text = str(error).splitlines()
    return text[0] if text and text[0] else type(error).__name__
