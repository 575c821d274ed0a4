"""The operator console (docs/console.md): a web page of the worker's live events, dead letters and
deliveries, fed over Server-Sent Events, with a form that sends a call and a delivery."""

from ..monitoring.http import ListenError, RemoteNotAllowed, is_loopback
from .access import check_listen, console_token
from .bus import BusFeed, Connector, FeedOptions, NotConnected
from .events import ConsoleEvent, build_event, event_subjects, sink_subject
from .hub import Hub
from .server import Console

__all__ = [
    "BusFeed",
    "Connector",
    "Console",
    "ConsoleEvent",
    "FeedOptions",
    "Hub",
    "ListenError",
    "NotConnected",
    "RemoteNotAllowed",
    "build_event",
    "check_listen",
    "console_token",
    "event_subjects",
    "is_loopback",
    "sink_subject",
]
