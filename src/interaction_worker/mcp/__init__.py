"""Adapters from the official `mcp` SDK to our McpClient protocol: stdio and streamable-HTTP servers,
each connected by a supervised `McpServerConnection`, and `SdkMcpClient` over any SDK `Client`."""

from ._build import connection_from_settings
from .adapter import SdkMcpClient, content_part, tool_page, tool_result
from .connection import McpServerConnection
from .transports import TransportFactory, http_transport, stdio_transport

__all__ = [
    "McpServerConnection",
    "SdkMcpClient",
    "TransportFactory",
    "connection_from_settings",
    "content_part",
    "http_transport",
    "stdio_transport",
    "tool_page",
    "tool_result",
]
