"""Acknowledged JetStream writes, many in flight on one connection (docs/wire.md 7).

nats-py acknowledges a JetStream publish through its request machinery: per write a request
object, a new inbox token, a future with a done-callback, a `wait_for` timer and a `PubAck` built
from the answer, about 200 µs of client CPU (docs/benchmarks.md). Here each write is a publish with
a reply subject under one wildcard subscription of this publisher (`_INBOX.<nuid>.*`), framed as
`wire_publish` frames publishes; the stream's answer resolves the write's future from nats-py's
read loop, with the answer's bytes. No timer per write, nor a clock read: one sweep, every quarter
of `timeout` while writes are waiting, marks where the writes sent so far end and fails those sent
before a mark older than `timeout` (between `timeout` and a quarter more after they were sent).

Each answer is taken from nats-py's read loop before it builds a message object (`acked_answers`).
nats-py's connection statistics (`Client.stats`) do not count these writes and answers: four
integer updates a write were a tenth of its cost (docs/benchmarks.md). tests/test_acked_publish.py
compares the bytes with what the public `publish` writes with the same reply subject; without the
non-public methods every write goes through the public `publish`, and every answer through the
subscription.

A write is never queued on a connection that is not connected (nats-py would buffer it until a
reconnect, or past its buffer drop it): it fails at once, certainly not sent, and the caller retries.
"""

import asyncio
import secrets
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, cast

from nats.aio.client import Client

from .acked_answers import AnswerTable, WriteFailed, answered_early
from .wire_publish import INVALID_SUBJECT, QueuedBytes, header_block

_CONNECTED = Client.CONNECTED

# A write's headers: a mapping (encoded as nats-py encodes it, or carrying its block as `wire`), or
# the `NATS/1.0` block itself, ready.
Headers = Mapping[str, str] | bytes | None
Write = tuple[str, bytes, Headers]


class AckedPublisher:
    """JetStream writes on `client`, each acknowledged on one shared reply subscription.

    Args:
        timeout: seconds a write waits for its answer before `WriteFailed` (it may have been stored).
    """

    def __init__(self, client: Client, *, timeout: float = 5.0) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, not {timeout!r}")
        self.client = client
        self.timeout = timeout
        self._queued = QueuedBytes(client)
        self._names: dict[str, str | None] = {}
        self._token = 0  # the last write's
        # (when, the first token after it): marked by each sweep, for the ones after it.
        self._marks: deque[tuple[float, int]] = deque()
        self._prefix = ""
        self._reply = b""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: AnswerTable | None = None
        self._opening = asyncio.Lock()
        self._sweep: asyncio.TimerHandle | None = None
        self._wakes: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        """Writes sent and not answered yet."""
        return 0 if self._waiting is None else len(self._waiting.writes)

    async def open(self) -> None:
        """Subscribe the reply subject (once; nats-py subscribes it again after a reconnect).

        Raises:
            WriteFailed: the connection is closed or draining.
        """
        if self._waiting is not None:
            return
        async with self._opening:
            if self._waiting is not None:
                return
            client = self.client
            if client.is_closed or client.is_draining:
                raise WriteFailed("the NATS connection is closed", sent=False)
            # Under the connection's inbox prefix (what the workers may subscribe), a short token of
            # its own: nats-py's parser reads every answer's subject with a pattern, and each
            # character costs.
            prefix = client.new_inbox().rsplit(".", 1)[0]
            inbox = f"{prefix}.{secrets.token_hex(6)}"
            waiting = AnswerTable(len(inbox) + 1)
            # nats-py hands each message of a subscription made with a future to its set_result.
            subscription = await client.subscribe(
                f"{inbox}.*", future=cast(Any, waiting)
            )
            if self._queued.fast:
                answered_early(client, subscription._id, waiting)
            self._prefix = f"{inbox}."
            self._reply = f"{inbox}.".encode()
            self._loop = asyncio.get_running_loop()
            self._waiting = waiting

    def write_nowait(
        self, subject: str, payload: bytes, block: bytes
    ) -> asyncio.Future[bytes] | None:
        """Queue one write whose header block is ready (the ledger's), without a coroutine: the
        future of its answer (its bytes: a PubAck or an API error, or `WriteFailed`); None when it
        was not queued and `send_one` must send it (not connected, not opened, not fast)."""
        client = self.client
        waiting = self._waiting
        size = len(payload)
        # Draining or closed, a connection is not `is_connected` either.
        loop = self._loop
        if (
            waiting is None
            or loop is None
            # What `is_connected` and `max_payload` read, without two calls a write.
            or client._status != _CONNECTED
            or not self._queued.fast
            or size > client._max_payload
        ):
            return None
        if self._sweep is None:
            self._sweeping(loop)
        self._token = token = self._token + 1
        future: asyncio.Future[bytes] = loop.create_future()
        waiting.writes[token] = future
        length = len(block)
        command = b"HPUB %s %s%d %d %d\r\n%s%s\r\n" % (
            subject.encode(),
            self._reply,
            token,
            length,
            length + size,
            block,
            payload,
        )
        if self._queued.queue(command):
            # Past the pending buffer's limit, or the flusher stopped: woken in a task of its own
            # (kept until it is done), as nats-py's publish would wait for it.
            wake = loop.create_task(self._queued.wake())
            self._wakes.add(wake)
            wake.add_done_callback(self._wakes.discard)
        return future

    async def send_one(
        self, subject: str, payload: bytes, headers: Headers
    ) -> asyncio.Future[bytes]:
        """Send one write: the future of its answer, as `write_nowait`'s.

        Raises:
            WriteFailed: not connected: it was not sent.
        """
        if type(headers) is bytes:
            future = self.write_nowait(subject, payload, headers)
            if future is not None:
                return future
        return (await self._send(((subject, payload, headers),), every=True))[0]

    async def send(self, writes: Sequence[Write]) -> list[asyncio.Future[bytes]]:
        """Send `writes` in order, each with a reply subject: the futures of their answers (the
        answer's bytes: a PubAck or an API error), or `WriteFailed`.

        Raises:
            WriteFailed: not connected: none was sent.
        """
        return await self._send(writes, every=True)

    async def send_batch(self, writes: Sequence[Write]) -> asyncio.Future[bytes]:
        """Send `writes` in order, only the last with a reply subject (an atomic batch, whose
        headers the caller gives): the future of the one answer.

        Raises:
            WriteFailed: not connected: none was sent.
        """
        return (await self._send(writes, every=False))[-1]

    async def _send(
        self, writes: Sequence[Write], *, every: bool
    ) -> list[asyncio.Future[bytes]]:
        client = self.client
        if not client.is_connected or client.is_draining_pubs:
            raise _not_sent(client)
        if self._waiting is None:
            await self.open()
        waiting = self._waiting
        assert waiting is not None  # open's postcondition
        loop = asyncio.get_running_loop()
        if self._sweep is None:
            self._sweeping(loop)
        prefix = self._prefix
        futures: list[asyncio.Future[bytes]] = []
        replies: list[str] = []
        last = len(writes) - 1
        for index in range(len(writes)):
            if every or index == last:
                self._token += 1
                future: asyncio.Future[bytes] = loop.create_future()
                waiting.writes[self._token] = future
                reply = f"{prefix}{self._token}"
                futures.append(future)
                replies.append(reply)
            else:
                replies.append("")
        await self._publish(writes, replies)
        return futures

    async def _publish(self, writes: Sequence[Write], replies: Sequence[str]) -> None:
        client = self.client
        if not self._queued.fast:
            for (subject, payload, headers), reply in zip(writes, replies, strict=True):
                await client.publish(
                    subject, payload, reply=reply, headers=_plain(headers)
                )
            return
        validate = not getattr(client, "_skip_subject_validation", False)
        max_payload = client.max_payload
        parts: list[bytes] = []
        sent = 0
        for (subject, payload, headers), reply in zip(writes, replies, strict=True):
            size = len(payload)
            if (
                size > max_payload
                or not subject
                or (validate and INVALID_SUBJECT.search(subject) is not None)
            ):
                break
            block: bytes | None
            if isinstance(headers, bytes):
                block = headers
            elif headers is None:
                block = None
            else:
                wire = getattr(headers, "wire", None)
                if type(wire) is bytes:
                    block = (
                        wire  # encoded with its headers, from `outgoing`'s templates
                    )
                else:
                    try:
                        block = header_block(headers, self._names)
                    except (ValueError, UnicodeEncodeError):
                        break
            if block is None:
                parts.append(f"PUB {subject} {reply} {size}\r\n".encode())
            else:
                length = len(block)
                parts.append(
                    f"HPUB {subject} {reply} {length} {length + size}\r\n".encode()
                )
                parts.append(block)
            parts.append(payload)
            parts.append(b"\r\n")
            sent += 1
        if sent and self._queued.queue(b"".join(parts)):
            await self._queued.wake()
        # What the fast path does not vouch for goes through the public publish, which raises as
        # it always did.
        for index in range(sent, len(writes)):
            subject, payload, headers = writes[index]
            await client.publish(
                subject, payload, reply=replies[index], headers=_plain(headers)
            )

    def _sweeping(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the sweeps: the writes from now on are after this mark."""
        self._marks.append((loop.time(), self._token + 1))
        self._sweep = loop.call_later(self.timeout / 4, self._timed_out)

    def _timed_out(self) -> None:
        """Fail the writes sent before a mark older than `timeout`; mark, and look again in a
        quarter of it, while any wait."""
        self._sweep = None
        waiting = self._waiting
        if waiting is None:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        marks = self._marks
        first = 0  # the first token not timed out
        while marks and marks[0][0] <= now - self.timeout:
            first = marks.popleft()[1]
        if first:
            expired = []
            for token in waiting.writes:
                if token >= first:
                    break
                expired.append(token)
            for token in expired:
                future = waiting.writes.pop(token)
                if not future.done():
                    future.set_exception(
                        WriteFailed(
                            f"no acknowledgement within {self.timeout:g} s", sent=True
                        )
                    )
        if waiting.writes:
            self._sweeping(loop)
        else:
            marks.clear()


def _not_sent(client: Client) -> WriteFailed:
    return WriteFailed(
        "the NATS connection is closed"
        if client.is_closed
        else "the NATS connection is reconnecting",
        sent=False,
    )


def _plain(headers: Headers) -> dict[str, str] | None:
    """The headers as a dict for the public `publish` (a block read back into one)."""
    if headers is None:
        return None
    if type(headers) is bytes:
        lines = headers.decode().split("\r\n")[1:]
        pairs = (line.partition(": ") for line in lines if ": " in line)
        return {name: value for name, _, value in pairs}
    assert not isinstance(headers, bytes)
    return dict(headers)
