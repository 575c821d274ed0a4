"""Connections from the configuration file's `mcp.servers` (docs/configuration.md 1)."""

import os
from collections.abc import Mapping
from typing import TextIO

from ..config.model import McpServerSettings
from ..errors import ConfigurationError
from .connection import McpServerConnection
from .transports import TransportFactory, http_transport, stdio_transport


def connection_from_settings(
    name: str,
    settings: McpServerSettings,
    environ: Mapping[str, str] | None = None,
    *,
    errlog: TextIO | None = None,
) -> McpServerConnection:
    """The connection one `mcp.servers.<name>` entry describes; nothing is started yet.

    Raises:
        ConfigurationError: a `headers_env` variable is not set (the message names it, not its value).
    """
    environ = os.environ if environ is None else environ
    transport: TransportFactory
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
        transport = http_transport(
            settings.url or "", headers=headers, timeout=settings.timeout
        )
    backoff = settings.restart_backoff
    return McpServerConnection(
        name,
        transport,
        timeout=settings.timeout,
        required=settings.required,
        connect_timeout=settings.connect_timeout,
        backoff=(backoff.initial, backoff.max),
    )
