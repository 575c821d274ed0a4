"""The history and the pages: every event goes into a bounded history and into each page's queue.

Memory is bounded whatever the pages do: the history keeps the last `history` events, and each page
has a queue of `queue_size` frames. A page that does not read (a slow browser, a stalled network)
loses events once its queue is full, rather than growing the console; it is told how many it missed
(a `gap` frame) when it reads again, and reloading shows the history.
"""

import asyncio
import collections
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from .events import ConsoleEvent

DEFAULT_QUEUE_SIZE = 512
_CLOSE = b""


@dataclass(eq=False)
class _Page:
    queue: asyncio.Queue[bytes]
    dropped: int = 0
    closed: bool = field(default=False)


class Hub:
    """Fan-out of events to the pages, with the history a page opened late starts from.

    Args:
        history: how many events the history keeps (and a new page receives first).
        queue_size: how many frames one page may have waiting.
    """

    def __init__(self, history: int, *, queue_size: int = DEFAULT_QUEUE_SIZE) -> None:
        # Tells a page that reconnects to another console process that its ids mean nothing here.
        self.instance = uuid.uuid4().hex[:12]
        self.history: collections.deque[ConsoleEvent] = collections.deque(
            maxlen=history
        )
        self.queue_size = queue_size
        self._pages: set[_Page] = set()
        self._seq = 0
        self._msg_ids: dict[str, int] = {}
        self._status = self._status_frame(connected=False, detail="connecting")
        self.closed = False

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    @property
    def pages(self) -> int:
        return len(self._pages)

    def seen(self, msg_id: str | None) -> bool:
        """Whether an event with this `Nats-Msg-Id` is in the history (read from the stream, say)."""
        return msg_id is not None and msg_id in self._msg_ids

    def publish(self, event: ConsoleEvent) -> None:
        if self.history.maxlen and len(self.history) == self.history.maxlen:
            oldest = self.history[0]
            if (
                oldest.msg_id is not None
                and self._msg_ids.get(oldest.msg_id) == oldest.seq
            ):
                del self._msg_ids[oldest.msg_id]
        self.history.append(event)
        if event.msg_id is not None:
            self._msg_ids[event.msg_id] = event.seq
        self._send(event.frame)

    def set_status(self, *, connected: bool, detail: str) -> None:
        """The console's own connection to NATS, as the pages show it."""
        self._status = self._status_frame(connected=connected, detail=detail)
        self._send(self._status)

    def _status_frame(self, *, connected: bool, detail: str) -> bytes:
        payload = json.dumps(
            {"nats": "connected" if connected else "disconnected", "detail": detail}
        )
        return f"event: status\ndata: {payload}\n\n".encode()

    def _send(self, frame: bytes) -> None:
        for page in self._pages:
            try:
                page.queue.put_nowait(frame)
            except asyncio.QueueFull:
                page.dropped += 1

    async def stream(self, last_event_id: str | None = None) -> AsyncIterator[bytes]:
        """The frames of one page: a hello, the history it has not seen, then live events.

        `last_event_id` is the `Last-Event-ID` of a reconnecting page: from this process, only the
        events after it are sent again; from another one, the page starts over."""
        page = _Page(asyncio.Queue(self.queue_size))
        after = self._after(last_event_id)
        # Taken as the page joins, with nothing awaited in between: every later event reaches the
        # page through its queue, none through both.
        backlog = [e.frame for e in self.history if after is None or e.seq > after]
        status = self._status
        self._pages.add(page)
        try:
            hello = json.dumps({"instance": self.instance, "resume": after is not None})
            yield f"retry: 1000\nevent: hello\ndata: {hello}\n\n".encode()
            yield status
            for frame in backlog:
                yield frame
            while not self.closed:
                frame = await page.queue.get()
                if frame is _CLOSE:
                    return
                if page.dropped:
                    missed, page.dropped = page.dropped, 0
                    yield f"event: gap\ndata: {json.dumps({'missed': missed})}\n\n".encode()
                yield frame
        finally:
            self._pages.discard(page)

    def ping(self) -> None:
        """A comment to every page, so a proxy keeps the stream open and a gone page is noticed."""
        self._send(b": ping\n\n")

    def close(self) -> None:
        """End every page's stream (the console stops); the browsers will reconnect."""
        self.closed = True
        for page in self._pages:
            while True:
                try:
                    page.queue.put_nowait(_CLOSE)
                    break
                except asyncio.QueueFull:
                    page.queue.get_nowait()

    def _after(self, last_event_id: str | None) -> int | None:
        instance, _, seq = (last_event_id or "").partition(":")
        if instance != self.instance or not seq.isdigit():
            return None
        return int(seq)
