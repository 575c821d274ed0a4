"""How the streams' answers to acknowledged writes reach their writers (docs/wire.md 7).

An `AckedPublisher`'s reply subscription is nats-py's own (`subscribe(subject, future=...)`: its
messages are handed to the future's `set_result` as they are read, and it is subscribed again after
a reconnect); what it is given as a future is an `AnswerTable` of the writes waiting for their
answer. The answers are taken before nats-py builds a message object for them: the connection's
`_process_msg`, which nats-py's parser calls for every message, is wrapped (`answered_early`) so
that the subscription's pass straight to the table, the others going on as they did. Without that
non-public method, every answer goes through the subscription.
"""

import asyncio
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

# The server's status for a publish that nothing subscribes to: no stream captures the subject
# (none exists, or it has no leader while its replicas elect one).
_NO_RESPONDERS = "503"
_NO_RESPONDERS_LINE = b"NATS/1.0 503"


class WriteFailed(Exception):
    """A write that was not acknowledged: the caller writes it again.

    Attributes:
        sent: False when it certainly did not reach a stream (not connected, nothing captured its
            subject); True when it may have been stored (no answer in time).
    """

    def __init__(self, reason: str, *, sent: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.sent = sent


class AnswerTable:
    """The writes waiting for their answer, by reply token: what nats-py's subscription takes for
    its future, so that each answer is handed over as the read loop reads it."""

    __slots__ = ("cut", "writes")

    def __init__(self, cut: int) -> None:
        self.cut = cut  # where a reply subject's token starts
        # reply token -> its answer's future, in the order sent.
        self.writes: dict[int, asyncio.Future[bytes]] = {}

    def cancelled(self) -> bool:
        return False

    def set_result(self, msg: Msg) -> None:
        """An answer as nats-py's subscription hands it over (when `_Answers` is not in place)."""
        headers = msg.headers
        status = headers.get("Status") if headers else None
        self.answer(msg.subject.encode(), msg.data, status == _NO_RESPONDERS)

    def answer(self, subject: bytes, data: bytes, unanswered: bool) -> None:
        try:
            future = self.writes.pop(int(subject[self.cut :]), None)
        except ValueError:
            return  # not a reply subject of these writes
        if future is None:
            return  # answered after it timed out: its writer has been told already
        if future.done():
            return  # its waiter was cancelled
        if unanswered and not data:
            future.set_exception(no_stream())
        else:
            future.set_result(data)


class _Answers:
    """What nats-py's parser calls for each message it reads (`Client._process_msg`, wrapped, by
    `process`): the answers of the publishers' subscriptions go to their tables at once, the rest on
    to nats-py. A plain call, not a coroutine, so that the other messages pay one call, not a frame
    more."""

    __slots__ = ("client", "done", "original", "tables")

    def __init__(self, client: Any, original: Any) -> None:
        self.client = client
        self.original = original
        self.tables: dict[int, AnswerTable] = {}
        # What the parser awaits for an answer: done already.
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.done.set_result(None)

    def process(
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: Any
    ) -> Any:
        table = self.tables.get(sid)
        if table is None:
            return self.original(sid, subject, reply, data, headers)
        try:
            future = table.writes.pop(int(subject[table.cut :]), None)
        except ValueError:
            future = None  # not a reply subject of these writes
        if future is not None:
            if future.done():
                pass  # its waiter was cancelled
            elif data or headers is None or not headers.startswith(_NO_RESPONDERS_LINE):
                future.set_result(data)
            else:
                future.set_exception(no_stream())
        return self.done


def no_stream() -> WriteFailed:
    return WriteFailed("no stream answered (no leader, or none)", sent=False)


def answered_early(client: Client, sid: int, table: AnswerTable) -> None:
    """Have nats-py's parser hand the answers on `sid` to `table` (left to the subscription when
    the connection has no `_process_msg` to wrap)."""
    current = client.__dict__.get("_process_msg")
    answers = getattr(current, "__self__", None)
    if isinstance(answers, _Answers):
        answers.tables[sid] = table
        return
    original = getattr(client, "_process_msg", None)
    if current is not None or not callable(original):
        return
    answers = _Answers(client, original)
    answers.tables[sid] = table
    client.__dict__["_process_msg"] = answers.process
