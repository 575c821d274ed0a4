"""One message's publishes written to the connection in one go, with the bytes nats-py would write.

nats-py's public `publish` re-validates and re-encodes every header of every message and kicks its
flusher once per publish: on a no-op tool call that was three fifths of the worker's instructions
(docs/benchmarks.md). Here a message's publishes (the reply and its two events) become one buffer
handed to the connection once. A header block comes ready with its headers when `outgoing` built it
from its template (`WireHeaders`); any other is built once per message, the header names encoded
once per connection. The bytes are nats-py's own framing (`HPUB subject reply hlen tlen`, the
`NATS/1.0` block, names checked by its pattern, values trimmed with CR and LF made spaces);
tests/test_wire_publish.py compares them with what the public `publish` writes for every header set
the worker sends, so a nats-py release that changes its framing fails the suite, not production.

This and `acked_publish` are the only modules that touch nats-py's non-public side: here, what
`Client._send_command` does to queue bytes for the flusher (`_pending`, `_pending_data_size`,
`_max_pending_size`) and what `Client._flush_pending` does to wake it (`_flush_queue`,
`_flusher_task`), within the version range pyproject.toml pins (`QueuedBytes`, which the
acknowledged writes use too). Without them, and for anything the fast path does not vouch for (a connection
that is not connected, a payload over `max_payload`, an empty or invalid subject, an invalid header
name, a value that cannot be encoded), messages go through the public `publish`, which raises or
buffers exactly as it always did; the messages before such a one are written first, in order.
"""

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from .outgoing import Publish, WireHeaders

# nats-py's rules (nats/aio/client.py): a header name's characters, what a value may not contain,
# and what makes a subject invalid when the connection validates subjects.
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE_NEWLINES = str.maketrans({"\r": " ", "\n": " "})
INVALID_SUBJECT = re.compile(r"[ \t\r\n]")
_STATUS_LINE = "NATS/1.0\r\n"
_CRLF = b"\r\n"
# Names seen per connection are few (the wire's headers, trace headers); a flood of odd names from
# some caller stops being remembered past this many.
_MAX_NAMES = 256

SendCommand = Callable[[bytes], Awaitable[None]]


def header_block(headers: Mapping[str, str], names: dict[str, str | None]) -> bytes:
    """The `NATS/1.0` block of `headers`, as nats-py 2.x writes it.

    `names` maps a header name to its encoded form (`"Name: "`), or None for a name nats-py skips
    (blank once trimmed); filled as names are met.

    Raises:
        ValueError: a name nats-py refuses (it raises `BadHeaderError`).
        UnicodeEncodeError: a name or value UTF-8 cannot encode.
    """
    parts = [_STATUS_LINE]
    for name, value in headers.items():
        prefix = names.get(name)
        if prefix is None:
            if name in names:
                continue  # blank once trimmed: skipped, as nats-py does
            prefix = _name_prefix(name)
            if len(names) < _MAX_NAMES:
                names[name] = prefix
            if prefix is None:
                continue
        value = value.strip()
        if "\r" in value or "\n" in value:
            value = value.translate(_VALUE_NEWLINES)
        parts.append(prefix)
        parts.append(value)
        parts.append("\r\n")
    parts.append("\r\n")
    return "".join(parts).encode()


def _name_prefix(name: str) -> str | None:
    key = name.strip()
    if not key:
        return None
    if not _HEADER_NAME.fullmatch(key):
        raise ValueError(key)
    key.encode()  # a name UTF-8 cannot encode fails here, before anything is queued
    return key + ": "


class QueuedBytes:
    """Bytes queued on a nats-py connection for its flusher, as its `publish` queues a message.

    Attributes:
        fast: whether the connection has the non-public methods; without them nothing may be
            queued here, and the caller publishes through the public `publish`.
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        flush: Any = getattr(client, "_flush_pending", None)
        self.fast = (
            callable(flush)
            and isinstance(getattr(client, "_pending", None), list)
            and all(
                hasattr(client, name)
                for name in (
                    "_pending_data_size",
                    "_max_pending_size",
                    "_flush_queue",
                    "_flusher_task",
                )
            )
        )

    async def send(self, command: bytes, count: int, size: int) -> None:
        """Queue `command` (`count` messages, `size` payload bytes) as `publish` queues one."""
        if self.queue(command, count, size):
            await self.wake()

    def queue(self, command: bytes, count: int = 0, size: int = 0) -> bool:
        """Queue `command` as `_send_command` does, and wake the flusher as `publish` does, without
        a coroutine: False when done; True when the flusher must be awaited (`wake`): the pending
        buffer is past its limit, or the flusher is not running. `count` messages of `size` payload
        bytes are added to the connection's statistics, as `publish` adds them."""
        client: Any = self.client
        if count:
            stats = client.stats
            stats["out_msgs"] += count
            stats["out_bytes"] += size
        client._pending.append(command)
        client._pending_data_size += len(command)
        limit = client._max_pending_size
        if limit > 0 and client._pending_data_size > limit:
            return True
        queue = client._flush_queue
        if queue is None or queue._queue:
            return False  # a flush is coming: it writes these bytes too
        flusher = client._flusher_task
        if flusher is None or flusher.done() or not client.is_connected:
            return True
        try:
            # What `_flush_pending` puts there: a future the flusher resolves once it has written.
            queue.put_nowait(asyncio.get_running_loop().create_future())
        except asyncio.QueueFull:
            return True
        return False

    async def wake(self) -> None:
        """Wake the flusher, waiting for it when the pending buffer is past its limit, as
        `_send_command` and `publish` do."""
        client: Any = self.client
        limit = client._max_pending_size
        if limit > 0 and client._pending_data_size > limit:
            await client._flush_pending(force_flush=True)
            return
        await client._flush_pending()


class WirePublisher:
    """Publishes a message's list of publishes on a nats-py connection, in order.

    Args:
        client: the connection; its non-public `_send_command` and `_flush_pending` are used when
            present, else every message goes through its public `publish`.
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        self._queued = QueuedBytes(client)
        self._fast = self._queued.fast
        self._names: dict[str, str | None] = {}

    async def publish(self, publishes: list[Publish]) -> None:
        client = self.client
        if not self._fast or not client.is_connected or client.is_draining_pubs:
            # Reconnecting, closed or draining: the public path buffers or raises as it decides.
            await self._public(publishes, 0)
            return
        validate = not getattr(client, "_skip_subject_validation", False)
        max_payload = client.max_payload
        names = self._names
        parts: list[bytes] = []
        sent = total = 0
        for subject, payload, headers in publishes:
            size = len(payload)
            if (
                size > max_payload
                or not subject
                or (validate and INVALID_SUBJECT.search(subject) is not None)
            ):
                break
            block: bytes | None
            if type(headers) is WireHeaders:
                block = (
                    headers.wire
                )  # built with the headers, from the template of `outgoing`
            elif headers is None:
                block = None
            else:
                try:
                    block = header_block(headers, names)
                except (ValueError, UnicodeEncodeError):
                    break
            if block is None:
                parts.append(f"PUB {subject}  {size}\r\n".encode())
            else:
                length = len(block)
                parts.append(f"HPUB {subject}  {length} {length + size}\r\n".encode())
                parts.append(block)
            parts.append(payload)
            parts.append(_CRLF)
            sent += 1
            total += size
        if sent:
            await self._queued.send(b"".join(parts), sent, total)
        if sent < len(publishes):
            await self._public(publishes, sent)

    async def acknowledge(self, msg: Msg) -> None:
        """`msg.ack()`: the same bytes (an empty publish to the message's reply subject) queued
        beside its reply, without nats-py's `publish` and its coroutines (docs/benchmarks.md)."""
        client = self.client
        reply = msg.reply
        if (
            not self._fast
            or not reply
            or not client.is_connected
            or client.is_draining_pubs
            or INVALID_SUBJECT.search(reply) is not None
        ):
            await msg.ack()  # raises, or buffers while reconnecting, as it decides
            return
        if self._queued.queue(b"PUB %s  0\r\n\r\n" % reply.encode(), 1, 0):
            await self._queued.wake()

    async def _public(self, publishes: list[Publish], start: int) -> None:
        publish = self.client.publish
        for index in range(start, len(publishes)):
            subject, payload, headers = publishes[index]
            await publish(subject, payload, headers=headers)
