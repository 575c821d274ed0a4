"""The tool-call and MCP flows (flows.md 2): ACT → OBSERVE → context update, through the worker.

The worker applies OBSERVE itself, and the client takes the observation from the result it was
answered (docs/wire.md 7), so a flow is one request and a new `Context`. Only what is not an outcome raises: an error reply
(`InteractionRequestError`), no worker (`NoWorkerError`), no reply in time (`TimeoutError`).
"""

from dataclasses import dataclass
from typing import Literal, overload

from ..contracts import ExternalResult, McpCapability, Observation, ToolCall
from ._client import FlowClient
from .context import Context


@dataclass(frozen=True, slots=True)
class FlowStep:
    """One call's outcome and the context that now ends with its observation."""

    result: ExternalResult
    observation: Observation
    context: Context


@dataclass(frozen=True, slots=True)
class McpDiscovery:
    """What an MCP discover found; `context` is the input context, unchanged."""

    capabilities: tuple[McpCapability, ...]
    unavailable: tuple[str, ...]
    context: Context


async def run_tool_call_flow(
    client: FlowClient, *, context: Context, call: ToolCall
) -> FlowStep:
    """Call one tool and append its observation to a new context, whatever the result's status."""
    if not isinstance(call, ToolCall):
        raise TypeError(f"call must be a ToolCall, not {type(call).__name__}")
    outcome = await client.call_tool(call)
    return FlowStep(
        outcome.result,
        outcome.observation,
        context.with_observation(outcome.observation),
    )


@overload
async def run_mcp_flow(
    client: FlowClient,
    *,
    context: Context,
    operation: Literal["invoke"],
    server: str,
    call: ToolCall,
) -> FlowStep: ...


@overload
async def run_mcp_flow(
    client: FlowClient,
    *,
    context: Context,
    operation: Literal["discover"],
    server: str | None = None,
) -> McpDiscovery: ...


async def run_mcp_flow(
    client: FlowClient,
    *,
    context: Context,
    operation: Literal["discover", "invoke"],
    server: str | None = None,
    call: ToolCall | None = None,
) -> FlowStep | McpDiscovery:
    """`invoke`: call an MCP server's tool and append its observation to a new context.
    `discover`: list the capabilities of one server or all; the context is not updated.

    Raises:
        ValueError: an operation other than these two, `invoke` without a server or a call, or
            `discover` with a call.
    """
    if operation == "discover":
        if call is not None:
            raise ValueError("an MCP discover takes no call")
        if server is not None and not server:
            raise ValueError("server must not be empty")
        found = await client.mcp_discover(server)
        return McpDiscovery(
            tuple(found.capabilities), tuple(found.unavailable or ()), context
        )
    if operation != "invoke":
        raise ValueError(f"operation must be 'discover' or 'invoke', not {operation!r}")
    if not server:
        raise ValueError("an MCP invoke needs a server")
    if not isinstance(call, ToolCall):
        raise ValueError("an MCP invoke needs a ToolCall")
    outcome = await client.mcp_invoke(server, call)
    return FlowStep(
        outcome.result,
        outcome.observation,
        context.with_observation(outcome.observation),
    )
