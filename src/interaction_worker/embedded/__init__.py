"""The embedded nats-server that `interaction-worker run` starts when no NATS URL is configured."""

from .data_dir import read_embedded_credentials
from .errors import DataDirInUse, EmbeddedServerError
from .process import find_nats_server
from .server import DEFAULT_PORT, EmbeddedNatsServer

__all__ = [
    "DEFAULT_PORT",
    "DataDirInUse",
    "EmbeddedNatsServer",
    "EmbeddedServerError",
    "find_nats_server",
    "read_embedded_credentials",
]
