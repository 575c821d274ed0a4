"""A sink served alone, held to its timeout."""

from typing import Any

from nats.aio.client import Client

from ..contracts import OutputRequest
from ..errors import InvalidResult
from ..nodes import DeliveryContext, OutputSink, output_receipt
from ._receipts import timed_out
from ._sinks import (
    DeliveryCounts,
    close_sink,
    deliver_within,
    sink_name,
    sink_timeout,
    start_sink,
)
from .fanout import FanoutSink


class LoneSink:
    """One sink without a fan-out: past its timeout the receipt is `unknown` SINK_TIMEOUT; an
    exception propagates, as the reference's "sink exceptions propagate" (the bus answers it with
    an error reply and a dead letter)."""

    def __init__(self, sink: OutputSink) -> None:
        self.sink = sink
        self.name = sink_name(sink, 0)
        self.timeout = sink_timeout(sink)
        self.deliveries = DeliveryCounts()

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        status = "unknown"  # unless the sink answers a valid receipt in time
        try:
            receipt = await deliver_within(self.sink, self.timeout, request, context)
            if receipt is None:
                return timed_out(request, self.timeout)
            try:
                # Checked here only to count it as the node will see it; the node checks it again.
                status = output_receipt(receipt, request.delivery_id).status
            except InvalidResult:
                pass
            return receipt
        finally:
            self.deliveries.count(self.name, status)

    async def start(self, client: Client) -> None:
        await start_sink(self.sink, client)

    async def aclose(self) -> None:
        await close_sink(self.sink)


def bounded(sink: OutputSink) -> OutputSink:
    """`sink` held to its `timeout`; a fan-out already holds each of its sinks to theirs."""
    return sink if isinstance(sink, FanoutSink | LoneSink) else LoneSink(sink)


def delivery_counts(sink: object) -> DeliveryCounts | None:
    """The deliveries counted by the worker's sink: a fan-out's, or a lone sink's held to its
    timeout (as `app` builds them); None for a sink given in code and served as it is."""
    if isinstance(sink, FanoutSink | LoneSink):
        return sink.deliveries
    return None
