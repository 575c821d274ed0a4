"""A stream's history read with batched direct gets (docs/console.md, "History"): read-only requests
answered by the stream itself, so a reader needs no right to create a consumer, a right that would
also let it aim a push consumer at a request subject (docs/operations.md, "Permissions").

nats-py 2.16 has no batched direct get, so the request is framed here: `$JS.API.DIRECT.GET.<stream>`
with a JSON body, answered on one inbox by each stored message (its own headers plus the stream's
`Nats-Subject`, `Nats-Sequence`, `Nats-Time-Stamp`, ...) and then a `204 EOB` status; `404` when
nothing matches. Through an account's service import the answers come back the same way.
"""

import datetime
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

# What the stream adds to a stored message's headers when it serves it.
_SERVED_HEADERS = frozenset(
    (
        "Nats-Stream",
        "Nats-Subject",
        "Nats-Sequence",
        "Nats-Time-Stamp",
        "Nats-Num-Pending",
        "Nats-Last-Sequence",
    )
)
_END_OF_BATCH = "204"
_NOT_FOUND = "404"
# Go's RFC 3339 with nanoseconds: Python reads at most microseconds.
_FRACTION = re.compile(r"(\.\d{6})\d+")


class HistoryError(Exception):
    """The stream refused a direct get (a status other than "found" or "end of batch")."""


@dataclass(frozen=True, slots=True)
class Stored:
    """A message as the stream holds it: its subject, body and own headers, its sequence in the
    stream and when the stream stored it (seconds since the epoch; None if unreadable)."""

    subject: str
    data: bytes
    headers: dict[str, str] | None
    sequence: int
    stored_at: float | None


class StreamHistory:
    """Reads `stream`'s messages on `subjects` (one subject, wildcards allowed).

    Args:
        idle: seconds without an answer after which a read is taken as complete (a server that
            never sends the end-of-batch status still ends the read).
    """

    def __init__(
        self, nc: Client, stream: str, subjects: str, *, idle: float = 1.0
    ) -> None:
        self._nc = nc
        self._api = f"$JS.API.DIRECT.GET.{stream}"
        self._subjects = subjects
        self._idle = idle

    async def last_sequence(self) -> int | None:
        """The sequence of the last message on the subjects; None when there is none.

        Raises:
            HistoryError: the stream refused the request.
            TimeoutError: no answer within `idle`.
        """
        async with self._answers({"last_by_subj": self._subjects}) as answers:
            answer = await answers.next_msg(timeout=self._idle)
        status = _status(answer)
        if status == _NOT_FOUND:
            return None
        if status is not None:
            raise HistoryError(_describe(answer))
        return int((answer.headers or {}).get("Nats-Sequence", "0")) or None

    async def read(
        self,
        *,
        until: int,
        batch: int,
        sequence: int | None = None,
        since: float | None = None,
    ) -> AsyncIterator[Stored]:
        """The messages from `sequence` (or stored from `since`, seconds since the epoch) up to
        sequence `until`, in order, `batch` per request.

        Raises:
            HistoryError: the stream refused a request.
        """
        start: dict[str, Any] = (
            {"seq": sequence or 1} if since is None else {"start_time": _rfc3339(since)}
        )
        while True:
            last = 0
            async with self._answers(
                {**start, "batch": batch, "next_by_subj": self._subjects}
            ) as answers:
                while True:
                    try:
                        answer = await answers.next_msg(timeout=self._idle)
                    except TimeoutError:
                        return
                    status = _status(answer)
                    if status == _NOT_FOUND:
                        return
                    if status == _END_OF_BATCH:
                        pending = (answer.headers or {}).get("Nats-Num-Pending", "0")
                        if pending == "0" or last == 0:
                            return
                        break
                    if status is not None:
                        raise HistoryError(_describe(answer))
                    stored = _stored(answer)
                    if stored.sequence > until:
                        return
                    yield stored
                    last = stored.sequence
                    if last >= until:
                        return
            start = {"seq": last + 1}

    def _answers(self, body: dict[str, Any]) -> "_Request":
        return _Request(self._nc, self._api, json.dumps(body).encode())


class _Request:
    """One direct-get request and the subscription its answers come on, for as long as the block."""

    def __init__(self, nc: Client, subject: str, body: bytes) -> None:
        self._nc = nc
        self._subject = subject
        self._body = body
        self._subscription: Subscription | None = None

    async def __aenter__(self) -> Subscription:
        inbox = self._nc.new_inbox()
        self._subscription = await self._nc.subscribe(inbox)
        await self._nc.publish(self._subject, self._body, reply=inbox)
        return self._subscription

    async def __aexit__(self, *exc: object) -> None:
        if self._subscription is not None and not self._nc.is_closed:
            await self._subscription.unsubscribe()


def _status(msg: Msg) -> str | None:
    """A status answer's code ("204", "404", ...); None for a stored message, which the stream
    always serves with its sequence."""
    headers = msg.headers or {}
    return None if "Nats-Sequence" in headers else headers.get("Status", "")


def _describe(msg: Msg) -> str:
    headers = msg.headers or {}
    return f"direct get answered {headers.get('Status')} {headers.get('Description', '')}".strip()


def _stored(msg: Msg) -> Stored:
    headers = msg.headers or {}
    own = {k: v for k, v in headers.items() if k not in _SERVED_HEADERS}
    return Stored(
        subject=headers.get("Nats-Subject", ""),
        data=msg.data,
        headers=own or None,
        sequence=int(headers.get("Nats-Sequence", "0")),
        stored_at=_epoch(headers.get("Nats-Time-Stamp")),
    )


def _epoch(text: str | None) -> float | None:
    if not text:
        return None
    try:
        moment = datetime.datetime.fromisoformat(_FRACTION.sub(r"\1", text))
    except ValueError:
        return None
    return moment.timestamp()


def _rfc3339(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.isoformat().replace("+00:00", "Z")
