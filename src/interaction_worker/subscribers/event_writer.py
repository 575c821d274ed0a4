"""Where durable mode stores a call's events and dead letters (docs/wire.md 7): acknowledged writes to
the events and dead-letter streams.

`EventWriter` is the seam: what a durable binding needs of the streams, nothing of how. A write
either stores every event given (a duplicate within the stream's `duplicate_window` counts as
stored) or raises `EventsNotStored` with those that may not be; the caller decides when to write
them again (`durable_writes`). `JetStreamEvents` is the writer over `AckedPublisher`.

An event written again long after it was first sent would be stored twice: the stream forgets a
`Nats-Msg-Id` after `duplicate_window`. Asked to `look_up`, the writer first reads the stream's last
message on the event's subject, and skips the event when that message carries its `Nats-Msg-Id`.

With `atomic`, a call's events on one stream go in one atomic batch (`Nats-Batch-Id`, one
acknowledgement for the batch): the stream must allow it (`allow_atomic`). A batch the stream
refuses as a duplicate (10201: it holds one of its ids), as too many in flight (10210), or because
atomic publish is off (10174, and from then on every batch) is written again one event at a time; so
is a call's events while 50 batches of this writer are in flight (the server's bound per stream).
Measured against one event at a time it costs more (docs/benchmarks.md), so durable mode leaves it
off.
"""

import asyncio
import base64
import binascii
import json
import secrets
from collections.abc import Sequence
from typing import Protocol

from ..contracts.wire import MSG_ID_HEADER
from .acked_answers import WriteFailed
from .acked_publish import AckedPublisher, Write
from .outgoing import Publish, wire_headers
from .wire_publish import INVALID_SUBJECT, header_block

# The stream refused the batch: it holds one of its message ids; too many batches are in flight;
# atomic publish is off.
_BATCH_DUPLICATE = 10201
_BATCH_IN_FLIGHT = 10210
_ATOMIC_DISABLED = 10174
# The server holds at most 50 atomic batches in flight per stream; past that, one event at a time.
_MAX_BATCHES_IN_FLIGHT = 50
# The stream has no message on the subject.
_NO_MESSAGE = 10037
_MSG_ID = MSG_ID_HEADER


class EventsNotStored(Exception):
    """Some events may not be stored: `events`, and why (`reason`)."""

    def __init__(self, events: list[Publish], reason: str) -> None:
        super().__init__(reason)
        self.events = events
        self.reason = reason


class EventWriter(Protocol):
    async def write(self, events: Sequence[Publish], *, look_up: bool = False) -> None:
        """Store `events` (in order); with `look_up`, skip those the stream holds already.

        Raises:
            EventsNotStored: those that may not be stored, and why; write them again.
        """
        ...


class JetStreamEvents:
    """An `EventWriter` into the JetStream streams whose subjects start as `streams` says.

    Args:
        streams: (subject prefix, stream name) pairs, for `look_up` (which stream to read).
        atomic: a call's events on one stream in one atomic batch.
    """

    def __init__(
        self,
        publisher: AckedPublisher,
        streams: Sequence[tuple[str, str]],
        *,
        atomic: bool = False,
    ) -> None:
        self.publisher = publisher
        self.streams = tuple(streams)
        self.atomic = atomic
        self._batch = f"{secrets.token_hex(8)}-"
        self._batches = 0
        self._names: dict[str, str | None] = {}
        # Atomic batches sent and not answered yet, and the most there were at once.
        self.batches_in_flight = 0
        self.peak_batches = 0

    async def write(self, events: Sequence[Publish], *, look_up: bool = False) -> None:
        if look_up:
            kept: list[Publish] = []
            for index, event in enumerate(events):
                try:
                    if not await self._stored(event):
                        kept.append(event)
                except EventsNotStored as failed:
                    raise EventsNotStored(
                        [*kept, *events[index:]], failed.reason
                    ) from None
            events = kept
        if not events:
            return
        if (
            self.atomic
            and len(events) > 1
            and self.batches_in_flight < _MAX_BATCHES_IN_FLIGHT
        ):
            if await self._batched(events):
                return
        try:
            futures = self._queued(events) or await self.publisher.send(events)
        except WriteFailed as failed:
            raise EventsNotStored(list(events), failed.reason) from None
        unstored: list[Publish] = []
        reason = ""
        for event, future in zip(events, futures, strict=True):
            try:
                answer = await future
            except WriteFailed as failed:
                unstored.append(event)
                reason = failed.reason
                continue
            refusal = _refusal(answer)
            if refusal is not None:
                unstored.append(event)
                reason = refusal[1]
        if unstored:
            raise EventsNotStored(unstored, reason)

    def _queued(self, events: Sequence[Publish]) -> list[asyncio.Future[bytes]] | None:
        """The events queued without a coroutine when each comes with its header block (as
        `outgoing` builds an event's); None when one does not, and none was queued."""
        blocks: list[bytes] = []
        for _, _, headers in events:
            wire = getattr(headers, "wire", None)
            if type(wire) is not bytes:
                return None
            blocks.append(wire)
        futures: list[asyncio.Future[bytes]] = []
        write = self.publisher.write_nowait
        for index, (subject, payload, _) in enumerate(events):
            future = (
                write(subject, payload, blocks[index])
                if INVALID_SUBJECT.search(subject) is None
                else None
            )
            if future is None:
                if index == 0:
                    return None
                # Not connected any more, or a subject the public `publish` refuses: the ones
                # queued are written; this one and those after it fail, and are written again.
                for _ in range(index, len(events)):
                    failed = asyncio.get_running_loop().create_future()
                    failed.set_exception(
                        WriteFailed("not queued after the events before it", sent=False)
                    )
                    futures.append(failed)
                return futures
            futures.append(future)
        return futures

    async def _batched(self, events: Sequence[Publish]) -> bool:
        """Whether `events` were stored as one atomic batch; False: write them one by one.

        Raises:
            EventsNotStored: the batch failed otherwise (every event may not be stored).
        """
        self._batches += 1
        batch = f"{self._batch}{self._batches}"
        last = len(events) - 1
        framed: list[Write] = []
        for index, (subject, payload, headers) in enumerate(events):
            added = {"Nats-Batch-Id": batch, "Nats-Batch-Sequence": str(index + 1)}
            if index == last:
                added["Nats-Batch-Commit"] = "1"
            wire = getattr(headers, "wire", None)
            block = (
                wire
                if type(wire) is bytes
                else header_block(headers or {}, self._names)
            )
            extra = "".join(f"{name}: {value}\r\n" for name, value in added.items())
            framed.append(
                (
                    subject,
                    payload,
                    wire_headers(
                        {**(headers or {}), **added},
                        block[:-2].decode() + extra + "\r\n",
                    ),
                )
            )
        try:
            future = await self.publisher.send_batch(framed)
        except WriteFailed as failed:
            raise EventsNotStored(list(events), failed.reason) from None
        self.batches_in_flight += 1
        self.peak_batches = max(self.peak_batches, self.batches_in_flight)
        try:
            answer = await future
        except WriteFailed as failed:
            raise EventsNotStored(list(events), failed.reason) from None
        finally:
            self.batches_in_flight -= 1
        refusal = _refusal(answer)
        if refusal is None:
            return True
        code, reason = refusal
        if code == _ATOMIC_DISABLED:
            self.atomic = False
        if code in (_BATCH_DUPLICATE, _BATCH_IN_FLIGHT, _ATOMIC_DISABLED):
            return False
        raise EventsNotStored(list(events), reason)

    async def _stored(self, event: Publish) -> bool:
        """Whether the stream's last message on the event's subject is this event (its
        `Nats-Msg-Id`).

        Raises:
            EventsNotStored: the stream could not be asked.
        """
        subject, _, headers = event
        msg_id = (headers or {}).get(_MSG_ID)
        stream = next(
            (name for prefix, name in self.streams if subject.startswith(prefix)), None
        )
        if msg_id is None or stream is None:
            return False
        ask = json.dumps({"last_by_subj": subject}).encode()
        try:
            (future,) = await self.publisher.send(
                [(f"$JS.API.STREAM.MSG.GET.{stream}", ask, None)]
            )
            answer = await future
        except WriteFailed as failed:
            raise EventsNotStored([event], failed.reason) from None
        refusal = _refusal(answer)
        if refusal is not None:
            if refusal[0] == _NO_MESSAGE:
                return False
            raise EventsNotStored([event], refusal[1])
        return _msg_id(answer) == msg_id


def _refusal(answer: bytes) -> tuple[int, str] | None:
    """The stream's error in an answer (its code and what it says); None for a PubAck."""
    if b'"error"' not in answer:
        return None
    try:
        error = json.loads(answer).get("error")
    except (ValueError, AttributeError):
        return 0, "the stream's answer is not JSON"
    if not isinstance(error, dict):
        return None
    code = error.get("err_code")
    said = error.get("description") or f"code {error.get('code')}"
    return (
        code if type(code) is int else 0,
        f"the stream refused it ({said}, error {code})",
    )


def _msg_id(answer: bytes) -> str | None:
    """The `Nats-Msg-Id` of a stored message, as a message get answers it."""
    try:
        message = json.loads(answer)["message"]
        block = base64.b64decode(message["hdrs"]).decode("utf-8", "replace")
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None
    for line in block.split("\r\n")[1:]:
        name, sep, value = line.partition(":")
        if sep and name.strip() == _MSG_ID:
            return value.strip()
    return None
