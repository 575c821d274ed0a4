"""interaction-worker: run an agent's tool calls, MCP requests and deliveries over NATS."""

import importlib
import typing

if typing.TYPE_CHECKING:
    from .contracts import (
        Artifact,
        ExternalResult,
        InteractionError,
        McpCapability,
        Message,
        Observation,
        OutputReceipt,
        OutputRequest,
        Reference,
        ToolCall,
        ToolDefinition,
    )
    from .errors import (
        ConfigurationError,
        InteractionWorkerError,
        McpClientError,
        McpConnectionLost,
        McpProtocolError,
        McpTimeout,
        McpUnavailable,
        RegistrationError,
    )
    from .nodes import (
        DeliveryContext,
        McpClient,
        McpRegistry,
        McpToolPage,
        McpToolResult,
        OutputSink,
        RegisteredTool,
        Sandbox,
        ToolContext,
        ToolRegistry,
        observe_external_result,
    )
    from .worker import (
        InteractionWorker,
    )

# Where each public name lives. Loaded on first use (PEP 562): importing the package, which every
# `interaction_worker.*` import does first (the pytest plugin in every test run of a project that
# installs it, each CLI command), must not load pydantic's models or the bus bindings.
_EXPORTS: dict[str, str] = {
    "Artifact": ".contracts",
    "ConfigurationError": ".errors",
    "DeliveryContext": ".nodes",
    "ExternalResult": ".contracts",
    "InteractionError": ".contracts",
    "InteractionWorker": ".worker",
    "InteractionWorkerError": ".errors",
    "McpCapability": ".contracts",
    "McpClient": ".nodes",
    "McpClientError": ".errors",
    "McpConnectionLost": ".errors",
    "McpProtocolError": ".errors",
    "McpRegistry": ".nodes",
    "McpTimeout": ".errors",
    "McpToolPage": ".nodes",
    "McpToolResult": ".nodes",
    "McpUnavailable": ".errors",
    "Message": ".contracts",
    "Observation": ".contracts",
    "OutputReceipt": ".contracts",
    "OutputRequest": ".contracts",
    "OutputSink": ".nodes",
    "Reference": ".contracts",
    "RegisteredTool": ".nodes",
    "RegistrationError": ".errors",
    "Sandbox": ".nodes",
    "ToolCall": ".contracts",
    "ToolContext": ".nodes",
    "ToolDefinition": ".contracts",
    "ToolRegistry": ".nodes",
    "observe_external_result": ".nodes",
}


def __getattr__(name: str) -> typing.Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [
    "Artifact",
    "ConfigurationError",
    "DeliveryContext",
    "ExternalResult",
    "InteractionError",
    "InteractionWorker",
    "InteractionWorkerError",
    "McpCapability",
    "McpClient",
    "McpClientError",
    "McpConnectionLost",
    "McpProtocolError",
    "McpRegistry",
    "McpTimeout",
    "McpToolPage",
    "McpToolResult",
    "McpUnavailable",
    "Message",
    "Observation",
    "OutputReceipt",
    "OutputRequest",
    "OutputSink",
    "Reference",
    "RegisteredTool",
    "RegistrationError",
    "Sandbox",
    "ToolCall",
    "ToolContext",
    "ToolDefinition",
    "ToolRegistry",
    "observe_external_result",
]
