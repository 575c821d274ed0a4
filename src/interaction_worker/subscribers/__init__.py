"""The bus: the subject table, the handling of one message (`handler` and the modules it calls), the
dispatcher and the two bindings (nats-py and FastStream), the counters of each request subject
(`endpoints`) and the NATS services discovery that reports them (`discovery`)."""

from ..contracts.keys import NO_KEY, is_safe_header_value, subject_key
from ..contracts.wire import KINDS, Kind, Subjects
from .binding_options import BindingOptions
from .discovery import SERVICE_NAME, Discovery, ServedEndpoint, package_version
from .dispatcher import Dispatcher
from .durable_binding import DurableBinding
from .endpoints import DURATION_BUCKETS, Durations, Endpoint, Measures
from .faststream_router import build_router
from .handler import MessageHandler
from .incoming import Incoming
from .ledger_store import JetStreamStore
from .nats_binding import NatsBinding
from .outgoing import Publish
from .requests import Nodes

__all__ = [
    "BindingOptions",
    "DURATION_BUCKETS",
    "KINDS",
    "NO_KEY",
    "SERVICE_NAME",
    "Discovery",
    "Dispatcher",
    "DurableBinding",
    "Durations",
    "Endpoint",
    "Incoming",
    "JetStreamStore",
    "Kind",
    "Measures",
    "MessageHandler",
    "NatsBinding",
    "Nodes",
    "Publish",
    "ServedEndpoint",
    "Subjects",
    "build_router",
    "is_safe_header_value",
    "package_version",
    "subject_key",
]
