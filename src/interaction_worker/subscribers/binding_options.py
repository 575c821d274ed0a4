"""How a worker is bound to NATS, in one frozen object: every default written once (those the file
shares come from `config/defaults.py`), and the seams a test or an embedding application fills with
its own parts: the ledger's key-value store and the durable events' writer (docs/architecture.md)."""

from dataclasses import dataclass
from typing import Any, Protocol

from ..config import IdempotencySettings, defaults
from ..ledger import KeyValueStore
from .dispatcher import Publisher
from .event_writer import EventWriter
from .handler import MessageHandler
from .requests import Nodes


class Tracing(Protocol):
    """Spans around a binding's requests (docs/tracing.md): a handler that opens a request's span,
    and a publish that sends its messages under it."""

    def handler(self, nodes: Nodes, **options: Any) -> MessageHandler: ...

    def traced(self, publish: Publisher) -> Publisher: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class BindingOptions:
    """What every binding of a worker takes.

    Attributes:
        queue: the queue group (durable mode: the consumers' names too); None: `<prefix>-workers`.
        max_payload: the FastStream router's assumption until its broker connects; a binding on a
            connection takes the server's own.
        idempotency: the ledger (wire.md 8) when enabled; durable mode has it on unless disabled.
        tracing: spans around every request, when given.
        ledger_store: the ledger's store; None: the JetStream bucket `idempotency` names.
        events: where durable mode stores the events and dead letters; None: its streams, through
            acknowledged publishes on the binding's connection.
    """

    prefix: str = defaults.PREFIX
    queue: str | None = None
    reply_prefixes: tuple[str, ...] = defaults.REPLY_PREFIXES
    account_inboxes: bool = False
    tool_timeout: float | None = defaults.TOOL_TIMEOUT
    max_pending: int = defaults.MAX_PENDING
    max_payload: int = defaults.MAX_PAYLOAD
    idempotency: IdempotencySettings | None = None
    tracing: Tracing | None = None
    ledger_store: KeyValueStore | None = None
    events: EventWriter | None = None

    @property
    def queue_group(self) -> str:
        return defaults.queue_group(self.prefix, self.queue)
