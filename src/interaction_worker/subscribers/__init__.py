"""The bus: the subject table, the handling of one message (`handler` and the modules it calls), the
dispatcher and the two bindings (nats-py and FastStream)."""

from ..contracts.keys import NO_KEY, is_safe_header_value, subject_key
from .dispatcher import Dispatcher
from .durable_binding import DurableBinding
from .faststream_router import build_router
from .handler import MessageHandler
from .incoming import Incoming
from .ledger_store import JetStreamStore
from .nats_binding import NatsBinding
from .outgoing import Publish
from .requests import Nodes
from .subjects import KINDS, Kind, Subjects

__all__ = [
    "KINDS",
    "NO_KEY",
    "Dispatcher",
    "DurableBinding",
    "Incoming",
    "JetStreamStore",
    "Kind",
    "MessageHandler",
    "NatsBinding",
    "Nodes",
    "Publish",
    "Subjects",
    "build_router",
    "is_safe_header_value",
    "subject_key",
]
