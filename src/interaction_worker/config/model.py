"""The settings the configuration file describes, as frozen dataclasses (docs/configuration.md 1).

Each class's defaults are what an absent key means. `Settings.effective()` writes them back as plain
data that `parse_settings` reads again.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..contracts.serving import SERVE_NAMES, ServeName
from . import defaults

COMMAND_NAMES: tuple[str, ...] = (
    "grep",
    "ls",
    "cat",
    "find",
    "head",
    "tail",
    "wc",
    "sort",
    "uniq",
    "cut",
    "stat",
    "file",
    "du",
    "pwd",
)
SINK_TYPES: tuple[str, ...] = ("console", "nats", "jetstream", "http", "file")

SinkType = Literal["console", "nats", "jetstream", "http", "file"]
McpTransport = Literal["stdio", "http"]
OutputPolicy = Literal["all", "any"]


@dataclass(frozen=True)
class NatsSettings:
    url: str | None = None  # None: the embedded server
    name: str = "interaction-worker"
    # HOST:PORT of the embedded server's WebSocket listener for browsers; None: none.
    websocket: str | None = None
    # Where this package's clients take their reply inboxes; under subjects.reply_prefixes.
    inbox_prefix: str = "_INBOX"


@dataclass(frozen=True)
class SubjectSettings:
    prefix: str = defaults.PREFIX
    queue: str | None = None
    reply_prefixes: tuple[str, ...] = defaults.REPLY_PREFIXES
    # A core request that came through an account's service import may ask for its reply only under
    # its own account's inbox slice, `_INBOX.<account>.` (docs/operations.md, "Permissions").
    account_inboxes: bool = False

    @property
    def queue_group(self) -> str:
        return defaults.queue_group(self.prefix, self.queue)


@dataclass(frozen=True)
class SandboxSettings:
    """A `sandbox:` block; every field left out denies, as in the seed's Sandbox."""

    tools: tuple[str, ...] = ()
    mcp: tuple[str, ...] = ()
    network: tuple[str, ...] = ()
    read: bool = False
    write: bool = False
    execute: bool = False
    # All granted unless listed: the dispatcher bound in code is the commands' allow-list.
    command_ids: tuple[str, ...] = ("*",)


@dataclass(frozen=True)
class CommandSettings:
    enabled: tuple[str, ...] = COMMAND_NAMES
    max_entries: int = 1000
    max_output_bytes: int = 65536
    max_error_bytes: int = 8192
    timeout: float = 5.0
    max_memory: int = 268_435_456  # bytes of address space per command (RLIMIT_AS)


@dataclass(frozen=True)
class WebSearchSettings:
    provider: Literal["brave"] = "brave"
    timeout: float = 30.0
    max_response_bytes: int = 1_048_576


@dataclass(frozen=True)
class ToolSettings:
    """A `tools:` block: only what it lists is registered."""

    read_text: bool = False
    commands: CommandSettings | None = None
    web_search: WebSearchSettings | None = None


@dataclass(frozen=True)
class BackoffSettings:
    initial: float = 0.5
    max: float = 30.0


McpAuthType = Literal["oauth", "client_credentials"]
TokenEndpointAuth = Literal[
    "client_secret_basic", "client_secret_post", "private_key_jwt", "none"
]


@dataclass(frozen=True)
class McpAuthSettings:
    """An HTTP server's `auth:` block (docs/configuration.md, MCP servers behind OAuth). Secrets are
    named by their environment variables and files, never held here."""

    type: McpAuthType
    client_id_env: str | None = None
    client_secret_env: str | None = None
    client_metadata_url: str | None = None
    scopes: tuple[str, ...] | None = None
    redirect: str = "127.0.0.1:0"
    token_endpoint_auth: TokenEndpointAuth | None = None  # None: from the other keys
    private_key_file: Path | None = None
    signing_algorithm: str | None = (
        None  # None: from the key (EC P-256 ES256, RSA RS256)
    )
    issuer: str | None = None


@dataclass(frozen=True)
class McpServerSettings:
    """One MCP server: `command`/`args`/`env`/`cwd` for stdio, `url`/`headers_env`/`auth` for http."""

    transport: McpTransport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict, repr=False)  # may hold secrets
    cwd: Path | None = None
    url: str | None = None
    headers_env: dict[str, str] = field(default_factory=dict)  # header -> variable name
    timeout: float = 30.0
    # Its own bound, not `timeout`: a server's start may take longer than any one call should.
    connect_timeout: float = 30.0
    required: bool = True
    restart_backoff: BackoffSettings = field(default_factory=BackoffSettings)
    auth: McpAuthSettings | None = None


@dataclass(frozen=True)
class McpSettings:
    max_discovery_pages: int = 100
    max_capabilities: int = 1000
    servers: dict[str, McpServerSettings] = field(default_factory=dict)


@dataclass(frozen=True)
class SinkSettings:
    """One output sink: `subject` (nats, jetstream), `stream` (jetstream), `url` (http), `path` (file)."""

    type: SinkType
    name: str
    timeout: float = 10.0
    subject: str | None = None
    stream: str | None = None
    url: str | None = None
    path: Path | None = None


DEFAULT_SINKS: tuple[SinkSettings, ...] = (
    SinkSettings(type="console", name="console#0"),
)


@dataclass(frozen=True)
class OutputSettings:
    """`sinks_given` is False when `output.sinks` was absent: `sinks` is then the default console,
    which sinks given in code replace (docs/configuration.md 2)."""

    policy: OutputPolicy = "all"
    sinks: tuple[SinkSettings, ...] = DEFAULT_SINKS
    sinks_given: bool = False


@dataclass(frozen=True)
class DurableSettings:
    enabled: bool = False
    calls_stream: str = "INTERACTION_CALLS"
    events_stream: str = "INTERACTION_EVENTS"
    events_max_age: float = 86400.0
    ack_wait: float = 30.0
    dead_stream: str = "INTERACTION_DEAD"
    replicas: int = 1
    max_deliver: int = 5
    max_ack_pending: int = 1000
    nak_backoff: tuple[float, ...] = (1.0, 5.0, 30.0)
    duplicate_window: float = 120.0


@dataclass(frozen=True)
class IdempotencySettings:
    enabled: bool | None = None  # None: on in durable mode, off otherwise
    bucket: str = "interaction_ledger"
    replicas: int = 1
    ttl: float = 86400.0
    lease: float = 30.0
    wait: float = 30.0


@dataclass(frozen=True)
class MetricsSettings:
    """`metrics:` (docs/configuration.md, "Metrics and health"): where /metrics, /healthz and
    /readyz are served; None: not."""

    listen: str | None = None  # HOST:PORT; port 0 takes a free one


@dataclass(frozen=True)
class ConsoleSettings:
    """`console:` (docs/console.md): where `interaction-worker console` serves its page, and how
    many events a page opened late is shown; the command line's options win."""

    listen: str = "127.0.0.1:8765"
    history: int = 200


@dataclass(frozen=True)
class TracingSettings:
    """`tracing:` (docs/tracing.md): OpenTelemetry spans, exported as the standard `OTEL_*` variables
    say; needs the `otel` extra."""

    enabled: bool = False


DEFAULT_SANDBOX = SandboxSettings(
    tools=("read_text", *COMMAND_NAMES), read=True, execute=True
)
DEFAULT_TOOLS = ToolSettings(read_text=True, commands=CommandSettings())


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The whole file. `sandbox` and `tools` are None when their key was absent (the defaults apply)."""

    nats: NatsSettings = field(default_factory=NatsSettings)
    subjects: SubjectSettings = field(default_factory=SubjectSettings)
    data_dir: Path
    workspace: Path
    sandbox: SandboxSettings | None = None
    tools: ToolSettings | None = None
    tool_timeout: float = defaults.TOOL_TIMEOUT
    # The kinds served (`serve:`); `command` when the code binds a command protocol.
    serve: tuple[ServeName, ...] = SERVE_NAMES
    mcp: McpSettings = field(default_factory=McpSettings)
    output: OutputSettings = field(default_factory=OutputSettings)
    concurrency: int | None = None
    max_pending: int = defaults.MAX_PENDING
    shutdown_grace: float = 15.0
    durable: DurableSettings = field(default_factory=DurableSettings)
    idempotency: IdempotencySettings = field(default_factory=IdempotencySettings)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    tracing: TracingSettings = field(default_factory=TracingSettings)
    console: ConsoleSettings = field(default_factory=ConsoleSettings)

    def effective(self) -> dict[str, Any]:
        """The configuration in effect, as YAML-able data that `parse_settings` reads back.

        Absent `sandbox`, `tools` and `output.sinks` are written out as the defaults they stand
        for, so what the file alone configures is visible; `null`s keep their documented meaning.
        """
        # Imported here: the written-out form is its own module, which imports this one.
        from .effective import effective_settings

        return effective_settings(self)
