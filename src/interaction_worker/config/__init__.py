"""The configuration: the YAML file (`worker.yaml`) and the environment (docs/configuration.md 1).

`load_settings` finds the file (`discovery`: the nearest safe `worker.yaml` upwards) and reads it
(`loading`), `parse_settings` validates parsed data (`parsing`, with the `mcp` and `output` sections
in modules of their own, and the value rules in `values`) into the `model`, and
`nats_connect_options` turns the environment's credentials and TLS files into `nats.connect` options
(`environment`). Invalid configuration raises `ConfigurationError` with one line per problem, each
naming its key; no message carries a value from the file or the environment.
"""

from .directories import directory_problem, directory_problems
from .discovery import SearchBounds, UnsafeFile, find_upwards
from .environment import credential_files, nats_connect_options, websocket_tls
from .loading import (
    CONFIG_ENV,
    DEFAULT_FILE,
    NATS_URL_ENV,
    config_path,
    load_settings,
)
from .model import (
    COMMAND_NAMES,
    DEFAULT_SANDBOX,
    DEFAULT_TOOLS,
    BackoffSettings,
    CommandSettings,
    ConsoleSettings,
    DurableSettings,
    IdempotencySettings,
    McpServerSettings,
    McpSettings,
    MetricsSettings,
    NatsSettings,
    OutputSettings,
    SandboxSettings,
    Settings,
    SinkSettings,
    SubjectSettings,
    ToolSettings,
    TracingSettings,
    WebSearchSettings,
)
from .output import browser_subjects, history_streams
from .parsing import NATS_URL_EXAMPLE, NATS_URL_SCHEMES, parse_settings
from .values import (
    format_duration,
    listen_address,
    parse_duration,
    url_problem,
)

__all__ = [
    "COMMAND_NAMES",
    "CONFIG_ENV",
    "DEFAULT_FILE",
    "DEFAULT_SANDBOX",
    "DEFAULT_TOOLS",
    "NATS_URL_ENV",
    "NATS_URL_EXAMPLE",
    "NATS_URL_SCHEMES",
    "BackoffSettings",
    "CommandSettings",
    "ConsoleSettings",
    "DurableSettings",
    "IdempotencySettings",
    "McpServerSettings",
    "McpSettings",
    "MetricsSettings",
    "NatsSettings",
    "OutputSettings",
    "SandboxSettings",
    "SearchBounds",
    "Settings",
    "SinkSettings",
    "SubjectSettings",
    "ToolSettings",
    "TracingSettings",
    "UnsafeFile",
    "WebSearchSettings",
    "browser_subjects",
    "config_path",
    "credential_files",
    "directory_problem",
    "directory_problems",
    "find_upwards",
    "format_duration",
    "history_streams",
    "listen_address",
    "load_settings",
    "nats_connect_options",
    "parse_duration",
    "parse_settings",
    "url_problem",
    "websocket_tls",
]
