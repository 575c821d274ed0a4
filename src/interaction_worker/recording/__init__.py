"""Recorded bus traffic (replay.md): the file format, the recorder and the two replays."""

from .events import publish_events
from .format import (
    FORMAT,
    VERSION,
    RecordedMessage,
    Recording,
    RecordingError,
    RecordingHeader,
    parse_recording,
    read_recording,
)
from .report import Difference, FailedRequest, ReplayReport
from .requests import replay_requests

__all__ = [
    "FORMAT",
    "VERSION",
    "Difference",
    "FailedRequest",
    "RecordedMessage",
    "Recording",
    "RecordingError",
    "RecordingHeader",
    "ReplayReport",
    "parse_recording",
    "publish_events",
    "read_recording",
    "replay_requests",
]
