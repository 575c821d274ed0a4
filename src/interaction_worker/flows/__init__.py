"""The flows a client runs over the bus (docs/flows.md): the tool-call and MCP flows, and ReAct with
its model providers."""

from ._client import FlowClient
from .actions import ActionDescriptor, ActionRequest, McpTarget, ToolTarget
from .context import Context
from .model_provider import ModelError, ModelProvider, SampleOutput, Usage
from .openai_compatible import OpenAICompatibleModel
from .react import run_react_flow
from .react_types import (
    ActionStep,
    FlowError,
    FlowStatus,
    ReactConstraints,
    ReactFlowInput,
    ReactFlowResult,
    StopReason,
)
from .scripted import SampleCall, ScriptedModel
from .tool_flows import FlowStep, McpDiscovery, run_mcp_flow, run_tool_call_flow

__all__ = [
    "ActionDescriptor",
    "ActionRequest",
    "ActionStep",
    "Context",
    "FlowClient",
    "FlowError",
    "FlowStatus",
    "FlowStep",
    "McpDiscovery",
    "McpTarget",
    "ModelError",
    "ModelProvider",
    "OpenAICompatibleModel",
    "ReactConstraints",
    "ReactFlowInput",
    "ReactFlowResult",
    "SampleCall",
    "SampleOutput",
    "ScriptedModel",
    "StopReason",
    "ToolTarget",
    "Usage",
    "run_mcp_flow",
    "run_react_flow",
    "run_tool_call_flow",
]
