"""A sink served alone, held to its timeout."""

from typing import Any

from nats.aio.client import Client

from ..contracts import OutputRequest
from ..nodes import DeliveryContext, OutputSink
from ._receipts import timed_out
from ._sinks import close_sink, deliver_within, sink_name, sink_timeout, start_sink
from .fanout import FanoutSink


class LoneSink:
    """One sink without a fan-out: past its timeout the receipt is `unknown` SINK_TIMEOUT; an
    exception propagates, as the reference's "sink exceptions propagate" (the bus answers it with
    an error reply and a dead letter)."""

    def __init__(self, sink: OutputSink) -> None:
        self.sink = sink
        self.name = sink_name(sink, 0)
        self.timeout = sink_timeout(sink)

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        receipt = await deliver_within(self.sink, self.timeout, request, context)
        return timed_out(request, self.timeout) if receipt is None else receipt

    async def start(self, client: Client) -> None:
        await start_sink(self.sink, client)

    async def aclose(self) -> None:
        await close_sink(self.sink)


def bounded(sink: OutputSink) -> OutputSink:
    """`sink` held to its `timeout`; a fan-out already holds each of its sinks to theirs."""
    return sink if isinstance(sink, FanoutSink | LoneSink) else LoneSink(sink)
