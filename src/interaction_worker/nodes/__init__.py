"""Transport-free semantics of the four nodes: tool call, MCP call, observe, output."""

from .context import CommandContext, DeliveryContext, ToolContext
from .descent import Descent, Hidden
from .executor import CommandExecutor, CommandResult
from .mcp_answers import McpToolPage, McpToolResult
from .mcp_registry import McpClient, McpRegistry
from .observe import (
    EVENT_HEADERS_ROOM,
    observation_document,
    observation_json,
    observe_external_result,
    observe_request,
    observe_validated_result,
    shortened_json,
    shortened_observation,
    wire_json,
    wire_observation,
)
from .output import (
    OutputSink,
    cancelled_receipt,
    check_sink,
    deliver_output,
    output_receipt,
    output_request,
)
from .protected import ProtectedPaths
from .sandbox import PermissionKind, Sandbox
from .tool_registry import RegisteredTool, ToolRegistry, is_rerunnable, tool_definition

__all__ = [
    "EVENT_HEADERS_ROOM",
    "CommandContext",
    "CommandExecutor",
    "CommandResult",
    "DeliveryContext",
    "Descent",
    "Hidden",
    "McpClient",
    "McpRegistry",
    "McpToolPage",
    "McpToolResult",
    "OutputSink",
    "PermissionKind",
    "ProtectedPaths",
    "RegisteredTool",
    "Sandbox",
    "ToolContext",
    "ToolRegistry",
    "cancelled_receipt",
    "check_sink",
    "deliver_output",
    "is_rerunnable",
    "observation_document",
    "observation_json",
    "observe_external_result",
    "observe_request",
    "observe_validated_result",
    "output_receipt",
    "output_request",
    "shortened_json",
    "shortened_observation",
    "tool_definition",
    "wire_json",
    "wire_observation",
]
