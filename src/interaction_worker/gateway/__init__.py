"""The MCP gateway (docs/gateway.md): the tools the serving workers offer over the bus, as an MCP
server that any MCP host can use, over stdio or streamable HTTP. A client of the bus: it runs no tool
itself and holds no sandbox; the workers' sandboxes decide."""

from ..monitoring.http import ListenError, RemoteNotAllowed
from .access import (
    check_remote,
    gateway_token,
    gateway_token_path,
    transport_security,
)
from .catalog import Listing, Route, ToolCatalog
from .link import BusLink, BusUnreachable
from .outcome import call_result, tool_error
from .server import Gateway, GatewayOptions
from .serving import HttpOptions, check_tls, serve_http, serve_stdio

__all__ = [
    "BusLink",
    "BusUnreachable",
    "Gateway",
    "GatewayOptions",
    "HttpOptions",
    "ListenError",
    "Listing",
    "RemoteNotAllowed",
    "Route",
    "ToolCatalog",
    "call_result",
    "check_remote",
    "check_tls",
    "gateway_token",
    "gateway_token_path",
    "serve_http",
    "serve_stdio",
    "tool_error",
    "transport_security",
]
