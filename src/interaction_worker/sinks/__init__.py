"""Output sinks: where deliveries go."""

from ._lone import delivery_counts
from .console import ConsoleSink
from .fanout import FanoutSink
from .file import FileSink
from .http import HttpSink
from .jetstream import JetStreamSink, StreamTemplate
from .nats import NatsSink

__all__ = [
    "ConsoleSink",
    "FanoutSink",
    "FileSink",
    "HttpSink",
    "JetStreamSink",
    "NatsSink",
    "StreamTemplate",
    "delivery_counts",
]
