"""Replaying a recording's events (replay.md 3): what a downstream consumer saw, published again.

Requests are left out: a downstream test wants the worker's output, not a second run of its input.
Which subjects are events, and what happens to messages recorded outside the prefix, is
`families.py`'s to say.
"""

import asyncio
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import datetime

from nats.aio.client import Client

from .families import event_family, relative, rewrite_prefix
from .format import RecordedMessage, Recording, RecordingError

Sleep = Callable[[float], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class PlannedEvent:
    """One event as it will be published, after waiting `delay` seconds."""

    delay: float
    subject: str
    data: bytes
    headers: dict[str, str] | None


def plan_events(
    recording: Recording,
    *,
    prefix: str | None = None,
    speed: float | None = None,
    only: Collection[str] | None = None,
) -> list[PlannedEvent]:
    """The events `publish_events` publishes, in `seq` order: a check of the file made before
    connecting costs nothing when it fails.

    Raises:
        RecordingError: with `speed`, an event whose `at` is not an RFC 3339 time.
    """
    old = recording.header.prefix
    new = old if prefix is None else prefix
    events = [m for m in recording.messages if _selected(m.subject, old, only)]
    gaps = [0.0] * len(events)
    if speed is not None:
        gaps = _gaps(events, recording.name, speed)
    return [
        PlannedEvent(
            gap,
            rewrite_prefix(message.subject, old, new),
            message.data,
            message.single_headers(),
        )
        for gap, message in zip(gaps, events, strict=True)
    ]


async def publish_events(
    nc: Client,
    recording: Recording,
    *,
    prefix: str | None = None,
    speed: float | None = None,
    only: Collection[str] | None = None,
    sleep: Sleep = asyncio.sleep,
) -> int:
    """Publish the recording's events in `seq` order, byte for byte, and return how many.

    Args:
        prefix: publish under this prefix instead of the recording's.
        speed: keep the recorded gaps between events, divided by `speed`; None publishes as fast
            as possible.
        only: the event families to publish (`tool`, `mcp`, `output`, `command`, `dead`); None
            publishes them all, and the messages recorded outside the prefix too.
        sleep: waits out the gaps (injected so that a test need not).

    Raises:
        RecordingError: with `speed`, an event whose `at` is not an RFC 3339 time; raised before
            anything is published.
    """
    events = plan_events(recording, prefix=prefix, speed=speed, only=only)
    for event in events:
        if event.delay > 0:
            await sleep(event.delay)
        await nc.publish(event.subject, event.data, headers=event.headers)
    # publish() only buffers: the flush is what makes "returned" mean "the server has them all".
    await nc.flush()
    return len(events)


def _selected(subject: str, prefix: str, only: Collection[str] | None) -> bool:
    family = event_family(subject, prefix)
    if family is not None:
        return only is None or family in only
    return only is None and relative(subject, prefix) is None


def _gaps(events: list[RecordedMessage], name: str, speed: float) -> list[float]:
    """Seconds to wait before each event: its distance from the previous one, divided by `speed`.

    Measured from the previous event rather than from the start, so an injected `sleep` sees the
    recorded gaps themselves; the publishes in between only buffer, so nothing drifts in practice.
    A clock that went back gives no wait, never a negative one."""
    times = [_time(message, name) for message in events]
    return [
        max(0.0, (later - earlier).total_seconds() / speed)
        for earlier, later in zip(times[:1] + times[:-1], times, strict=True)
    ]


def _time(message: RecordedMessage, name: str) -> datetime:
    try:
        at = datetime.fromisoformat(message.at)
    except ValueError:
        at = None
    # RFC 3339 times carry their offset; a naive one could not be set against the others.
    if at is None or at.tzinfo is None:
        raise RecordingError(
            name,
            None,
            f'seq {message.seq}: "at" is not an RFC 3339 time, which --speed needs',
        )
    return at
