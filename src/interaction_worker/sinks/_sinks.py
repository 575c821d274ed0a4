"""What the package knows of any sink: its name, its timeout, its start and close, one bounded call,
and the deliveries counted by sink and status (the metrics' `interaction_sink_deliveries_total`)."""

import asyncio
import inspect
from typing import Any

from nats.aio.client import Client

from ..contracts import OutputRequest
from ..nodes import DeliveryContext, OutputSink
from ._receipts import DEFAULT_TIMEOUT, check_timeout


class DeliveryCounts:
    """Deliveries counted by sink name and by the status that sink answered (`accepted`, `rejected`,
    `unknown`: a timeout, an exception, an invalid receipt, a shutdown), as its receipt would say.

    Counted by the sink that holds the others to their timeouts (a fan-out, or the lone sink's
    wrapper), once per sink and delivery; read by the metrics at scrape time.
    """

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}

    def count(self, sink: str, status: str) -> None:
        key = (sink, status)
        self.counts[key] = self.counts.get(key, 0) + 1


def sink_name(sink: object, index: int) -> str:
    """Its `name` attribute, else `<ClassName>#<index>` (docs/configuration.md 1)."""
    name = getattr(sink, "name", None)
    if isinstance(name, str) and name.strip():
        return name
    return f"{type(sink).__name__}#{index}"


def sink_timeout(sink: object) -> float:
    """Its `timeout` attribute (seconds), else 10 s."""
    timeout = getattr(sink, "timeout", None)
    return DEFAULT_TIMEOUT if timeout is None else check_timeout(timeout)


async def start_sink(sink: object, client: Client) -> None:
    start = getattr(sink, "start", None)
    if start is not None:
        await start(client)


async def close_sink(sink: object) -> None:
    close = getattr(sink, "aclose", None) or getattr(sink, "close", None)
    if close is not None:
        outcome = close()
        if inspect.isawaitable(outcome):
            await outcome


async def deliver_within(
    sink: OutputSink, seconds: float, request: OutputRequest, context: DeliveryContext
) -> Any:
    """The sink's receipt, or None when `seconds` passed first (the sink's call is cancelled).

    A TimeoutError the sink raises itself is an exception like any other.
    """
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            return await sink.deliver(request, context)
    except TimeoutError:
        if deadline.expired():
            return None
        raise
