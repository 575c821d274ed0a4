"""`FlowClient`: what the flows need of `InteractionClient`."""

from typing import Protocol

from ..client import ToolOutcome
from ..contracts import McpDiscoverOutput, ToolCall


class FlowClient(Protocol):
    """The requests a flow sends; `InteractionClient` is one. Its errors are the client's:
    `InteractionRequestError` for an error reply, `NoWorkerError`, and `TimeoutError` for no reply."""

    async def call_tool(self, call_or_name: ToolCall, /) -> ToolOutcome: ...

    async def mcp_invoke(
        self, server: str, call_or_name: ToolCall, /
    ) -> ToolOutcome: ...

    async def mcp_discover(self, server: str | None = None) -> McpDiscoverOutput: ...
