"""Recording bus traffic (replay.md 2): live from core NATS, or history from a JetStream stream.

The recorder is one more client of the server: it subscribes and never publishes, so the worker does not
wait for it. Each message becomes one line as it arrives; the file is flushed at least every second and
when recording stops, so a recording cut by a signal holds every message received before it.

A recording must never have silent holes. nats-py drops a message when a subscription's pending queue is
full (a slow consumer) and reports it through the connection's error callback, which runs in the read
loop before the next message is parsed: at that moment every message received before the drop is either
written or waiting in a pending queue. Those are still written, nothing after them is, and the recording
ends there, saying so.
"""

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import BinaryIO

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import SlowConsumerError
from nats.js.api import ConsumerConfig, DeliverPolicy

from ..contracts.keys import redact_headers
from .format import RecordedMessage, RecordingHeader, encode_line, utc_timestamp

FLUSH_EVERY = 0.5  # seconds: "at least every second" with a margin for a busy loop
# Per subscription: enough for bursts of a busy worker, bounded so a stalled disk cannot eat memory.
PENDING_MESSAGES = 262_144
PENDING_BYTES = 256 * 1024 * 1024
STREAM_WAIT = (
    5.0  # seconds without a message from the stream before it is declared stalled
)


class Ending(StrEnum):
    """Why a recording stopped."""

    COUNT = "count"  # --count messages recorded
    DURATION = "duration"  # --duration elapsed
    STOPPED = "stopped"  # a signal, or the caller
    END_OF_STREAM = "end of stream"  # --stream: the last message at start was recorded
    SLOW_CONSUMER = (
        "slow consumer"  # messages were dropped: the recording ends before them
    )
    DISCONNECTED = (
        "disconnected"  # the connection is gone: nothing after it can be recorded
    )

    @property
    def failed(self) -> bool:
        return self in (Ending.SLOW_CONSUMER, Ending.DISCONNECTED)


class RecordingWriter:
    """Appends messages to an open binary file as lines, numbering them from 1.

    Buffered: `flush()` pushes the lines written so far to the operating system.
    """

    def __init__(
        self,
        out: BinaryIO,
        header: RecordingHeader,
        *,
        limit: int | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._out = out
        self._limit = limit
        self._now = now
        self.count = 0
        out.write(encode_line(header.to_wire()))
        out.flush()

    @property
    def full(self) -> bool:
        return self._limit is not None and self.count >= self._limit

    def write(self, msg: Msg, at: str | None = None) -> None:
        """One message; `at` is its receive time, now unless given (a stream's stored time)."""
        self.count += 1
        line = RecordedMessage(
            seq=self.count,
            at=at or utc_timestamp(self._now()),
            subject=msg.subject,
            data=msg.data,
            headers=redact_headers(msg.headers) or None,
            reply=bool(msg.reply),
        )
        self._out.write(encode_line(line.to_wire()))

    def flush(self) -> None:
        self._out.flush()


@dataclass(frozen=True)
class Dropped:
    """The first message a slow consumer lost."""

    subject: str


class LiveRecording:
    """Core NATS subscriptions written to a `RecordingWriter` until a stop condition.

    The connection's `error_cb` and `disconnected_cb` must lead to `on_error` and `on_disconnected`
    (`client.target.connect` takes them), so that drops and a lost connection end the recording.
    """

    def __init__(
        self,
        writer: RecordingWriter,
        subjects: Sequence[str],
        *,
        pending_messages: int = PENDING_MESSAGES,
        pending_bytes: int = PENDING_BYTES,
    ) -> None:
        self._writer = writer
        self._subjects = tuple(subjects)
        self._pending_messages = pending_messages
        self._pending_bytes = pending_bytes
        self._subscriptions: list[Subscription] = []
        # Once a message is dropped: how many more each subscription may write (its queue then).
        self._allowance: dict[int, int] | None = None
        self.dropped: Dropped | None = None
        self._ended = asyncio.Event()
        self._ending: Ending | None = None

    async def on_error(self, error: Exception) -> None:
        if not isinstance(error, SlowConsumerError) or self._allowance is not None:
            return
        self.dropped = Dropped(error.subject)
        self._allowance = {
            id(subscription): subscription.pending_msgs
            for subscription in self._subscriptions
        }
        if not any(self._allowance.values()):
            self._end(Ending.SLOW_CONSUMER)

    async def on_disconnected(self) -> None:
        self._end(Ending.DISCONNECTED)

    def _end(self, ending: Ending) -> None:
        if self._ending is None:
            self._ending = ending
        self._ended.set()

    async def run(
        self,
        nc: Client,
        *,
        duration: float | None = None,
        stop: asyncio.Event | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> Ending:
        """Record until `--count`, `duration`, `stop`, a drop or a lost connection; `on_ready` is
        called once the server has the subscriptions (nothing published after it is missed)."""
        stop = stop or asyncio.Event()
        for subject in self._subjects:
            self._subscriptions.append(await self._subscribe(nc, subject))
        # Two PINGs: nats-py 2.16 may write its first ahead of SUBs still in its buffer.
        await nc.flush()
        await nc.flush()
        if on_ready is not None:
            on_ready()
        flusher = asyncio.create_task(self._flush_often())
        stopped = asyncio.create_task(stop.wait())
        ended = asyncio.create_task(self._ended.wait())
        try:
            await asyncio.wait(
                (stopped, ended),
                timeout=duration,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            for task in (flusher, stopped, ended):
                task.cancel()
            await self._unsubscribe(nc)
            self._writer.flush()
        if self._ending is not None:
            return self._ending
        return Ending.STOPPED if stop.is_set() else Ending.DURATION

    async def _subscribe(self, nc: Client, subject: str) -> Subscription:
        subscription: Subscription | None = None

        async def on_message(msg: Msg) -> None:
            if self._ended.is_set():
                return
            if self._allowance is not None:
                left = self._allowance.get(id(subscription), 0)
                if left <= 0:
                    return
                self._allowance[id(subscription)] = left - 1
            self._writer.write(msg)
            if self._writer.full:
                self._end(Ending.COUNT)
            elif self._allowance is not None and not any(self._allowance.values()):
                self._end(Ending.SLOW_CONSUMER)

        subscription = await nc.subscribe(
            subject,
            cb=on_message,
            pending_msgs_limit=self._pending_messages,
            pending_bytes_limit=self._pending_bytes,
        )
        return subscription

    async def _flush_often(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_EVERY)
            self._writer.flush()

    async def _unsubscribe(self, nc: Client) -> None:
        if nc.is_closed:
            return
        for subscription in self._subscriptions:
            try:
                await subscription.unsubscribe()
            except Exception:
                pass


class NoSuchStream(Exception):
    """The stream named by `--stream` does not exist on the server."""


async def record_stream(
    nc: Client,
    writer: RecordingWriter,
    stream: str,
    *,
    since: datetime | None = None,
    subject: str | None = None,
    stop: asyncio.Event | None = None,
    wait: float = STREAM_WAIT,
) -> Ending:
    """The stream's messages from `since` (all of them without it) up to its last one at start.

    An ordered consumer: ephemeral, flow-controlled, and re-created by nats-py from the last sequence
    seen if a message goes missing, so the history arrives whole and in order.

    Raises:
        NoSuchStream: no stream of that name.
        TimeoutError: the stream sent nothing for `wait` seconds with messages still to come.
    """
    js = nc.jetstream()
    try:
        info = await js.stream_info(stream)
    except Exception as error:  # nats.js.errors.NotFoundError, or the API's own error
        if "not found" in str(error).lower():
            raise NoSuchStream(f"no stream named {stream!r} on this server") from None
        raise
    last = info.state.last_seq
    if (
        info.state.messages == 0
        or last == 0
        or (since and since.timestamp() > time.time())
    ):
        writer.flush()
        return Ending.END_OF_STREAM
    config = ConsumerConfig(
        deliver_policy=DeliverPolicy.ALL
        if since is None
        else DeliverPolicy.BY_START_TIME,
        opt_start_time=since,
    )
    subscription = await js.subscribe(
        subject or ">", stream=stream, ordered_consumer=True, config=config
    )
    stop = stop or asyncio.Event()
    try:
        # Nothing at or after `since`: the consumer starts past the last message, and nothing
        # was pushed yet (a pushed message would count in `delivered`).
        consumer = await subscription.consumer_info()
        delivered = consumer.delivered.stream_seq if consumer.delivered else 0
        if not consumer.num_pending and not delivered:
            return Ending.END_OF_STREAM
        while not stop.is_set():
            msg = await subscription.next_msg(wait)
            metadata = msg.metadata
            if metadata.sequence.stream > last:  # stored after the recording started
                return Ending.END_OF_STREAM
            # The reply subject of a stream's message is the consumer's ack: not the publisher's.
            msg.reply = ""
            writer.write(msg, utc_timestamp(metadata.timestamp.timestamp()))
            if writer.full:
                return Ending.COUNT
            if metadata.sequence.stream == last:
                return Ending.END_OF_STREAM
        return Ending.STOPPED
    finally:
        writer.flush()
        if not nc.is_closed:
            try:
                await subscription.unsubscribe()
            except Exception:
                pass


def started_at(now: float | None = None) -> str:
    """The header's `startedAt`."""
    return utc_timestamp(time.time() if now is None else now)
