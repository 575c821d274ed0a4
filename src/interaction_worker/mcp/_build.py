"""Connections from the configuration file's `mcp.servers` (docs/configuration.md 1)."""

import os
from collections.abc import Mapping
from typing import TextIO

from ..config.model import McpServerSettings
from ..errors import ConfigurationError
from .auth import ServerAuth, TokenPlace
from .connection import McpServerConnection
from .transports import TransportFactory, http_transport, stdio_transport


def connection_from_settings(
    name: str,
    settings: McpServerSettings,
    environ: Mapping[str, str] | None = None,
    *,
    errlog: TextIO | None = None,
    tokens: TokenPlace | None = None,
) -> McpServerConnection:
    """The connection one `mcp.servers.<name>` entry describes; nothing is started yet. A server
    with `auth:` keeps its tokens in `tokens` (default: the key-value bucket of the worker's NATS
    server, docs/configuration.md).

    Raises:
        ConfigurationError: a `headers_env` or `auth:` variable is not set (the message names it,
            not its value), or the `auth:` key file cannot be read.
    """
    environ = os.environ if environ is None else environ
    transport: TransportFactory
    auth: ServerAuth | None = None
    if settings.transport == "stdio":
        transport = stdio_transport(
            settings.command or "",
            settings.args,
            env=settings.env,
            cwd=settings.cwd,
            errlog=errlog,
        )
    else:
        headers: dict[str, str] = {}
        for header, variable in settings.headers_env.items():
            value = environ.get(variable)
            if value is None:
                raise ConfigurationError(
                    f"mcp.servers.{name}.headers_env.{header}: the environment variable {variable} is not set"
                )
            headers[header] = value
        if settings.auth is not None:
            auth = ServerAuth(
                name, settings.url or "", settings.auth, tokens or TokenPlace(), environ
            )
        transport = http_transport(
            settings.url or "",
            headers=headers,
            timeout=settings.timeout,
            auth=None if auth is None else auth.provider,
        )
    backoff = settings.restart_backoff
    return McpServerConnection(
        name,
        transport,
        timeout=settings.timeout,
        required=settings.required,
        connect_timeout=settings.connect_timeout,
        backoff=(backoff.initial, backoff.max),
        auth=auth,
    )
