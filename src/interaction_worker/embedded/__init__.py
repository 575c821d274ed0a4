"""The embedded nats-server that `interaction-worker run` starts when no NATS URL is configured."""

from .accounts import (
    UI_INBOX_PREFIX,
    UI_USER,
    WORKER_USER,
    BrowserAccess,
    worker_credentials,
)
from .data_dir import read_embedded_credentials, token_path, ui_token_path
from .errors import DataDirInUse, EmbeddedServerError, ForeignDataDir
from .process import find_nats_server
from .server import DEFAULT_PORT, EmbeddedNatsServer
from .websocket import WebSocketListener, is_loopback, remote_problem

__all__ = [
    "DEFAULT_PORT",
    "UI_INBOX_PREFIX",
    "UI_USER",
    "WORKER_USER",
    "BrowserAccess",
    "DataDirInUse",
    "EmbeddedNatsServer",
    "EmbeddedServerError",
    "ForeignDataDir",
    "WebSocketListener",
    "find_nats_server",
    "is_loopback",
    "read_embedded_credentials",
    "remote_problem",
    "token_path",
    "ui_token_path",
    "worker_credentials",
]
