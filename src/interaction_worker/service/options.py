"""What `serve` is told (docs/configuration.md): the server, the subjects and bounds of the binding,
and what the process serves beside it (metrics, tracing, the embedded server's browsers)."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import DurableSettings, IdempotencySettings, defaults
from ..embedded import BrowserAccess, WebSocketListener


@dataclass(frozen=True)
class ServeOptions:
    """How to connect and serve; `url=None` starts the embedded server in `data_dir`."""

    url: str | None = None
    name: str = "interaction-worker"
    prefix: str = defaults.PREFIX
    queue: str | None = None
    reply_prefixes: tuple[str, ...] = defaults.REPLY_PREFIXES
    # `subjects.account_inboxes` (docs/operations.md, "Permissions").
    account_inboxes: bool = False
    data_dir: Path = Path(".interaction")
    port: int | None = None
    tool_timeout: float | None = defaults.TOOL_TIMEOUT
    max_pending: int = defaults.MAX_PENDING
    shutdown_grace: float = 15.0
    connect_timeout: float = 10.0
    connect_options: dict[str, Any] = field(default_factory=dict)
    # The ledger (wire.md 8) and durable mode (wire.md 7), when enabled.
    idempotency: IdempotencySettings | None = None
    durable: DurableSettings | None = None
    # `metrics.listen`: HOST:PORT for /metrics, /healthz and /readyz; None: not served.
    metrics_listen: str | None = None
    # `tracing.enabled` (docs/tracing.md): spans, exported as the OTEL_* variables say.
    tracing: bool = False
    # The embedded server's WebSocket listener (`nats.websocket`) and what its `ui` user may read.
    websocket: WebSocketListener | None = None
    browsers: BrowserAccess = field(default_factory=BrowserAccess)
