"""Tools, sinks and MCP servers for the bus tests: plain objects that record what the worker did with them."""

import asyncio
from collections import Counter
from collections.abc import Mapping
from typing import Any

import anyio

from interaction_worker import (
    DeliveryContext,
    InteractionWorker,
    McpRegistry,
    McpTimeout,
    McpToolPage,
    McpToolResult,
    McpUnavailable,
    OutputRequest,
    Sandbox,
    ToolContext,
)

OBJECT_SCHEMA: Mapping[str, Any] = {"type": "object"}
# A message that breaks the safety rule twice over (a secret marker and an absolute path).
SECRET_TEXT = "token sk-live1234 leaked from /srv/app/settings.py"


class Echo:
    """Answers its `text` argument; its `validate` wants a string `text`."""

    name = "echo"
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
    }

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def validate(self, arguments: dict[str, Any]) -> None:
        if "unsafe" in arguments:
            raise ValueError(SECRET_TEXT)
        if not isinstance(arguments.get("text"), str):
            raise ValueError("text must be a string")

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.calls[context.call_id] += 1
        return {"status": "success", "content": arguments["text"]}


class Slow:
    """Sleeps `seconds` (argument or default) and records how many run at once, and cancellations."""

    name = "slow"
    input_schema = OBJECT_SCHEMA

    def __init__(self, seconds: float = 0.2) -> None:
        self.seconds = seconds
        self.active = 0
        self.peak = 0
        self.started: list[str] = []
        self.finished: list[str] = []
        self.cancelled: list[str] = []
        self.calls: Counter[str] = Counter()
        self._changed = asyncio.Event()

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.calls[context.call_id] += 1
        self.active += 1
        self.peak = max(self.peak, self.active)
        self.started.append(context.call_id)
        self._changed.set()
        try:
            await asyncio.sleep(float(arguments.get("seconds", self.seconds)))
        except asyncio.CancelledError:
            self.cancelled.append(context.call_id)
            raise
        finally:
            self.active -= 1
            self._changed.set()
        self.finished.append(context.call_id)
        return {"status": "success", "content": f"slept {context.call_id}"}

    async def wait_started(self, count: int, within: float = 10.0) -> None:
        with anyio.fail_after(within):
            while len(self.started) < count:
                self._changed.clear()
                await self._changed.wait()


class Boom:
    """Raises an exception whose text must never reach a client."""

    name = "boom"
    input_schema = OBJECT_SCHEMA

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        raise RuntimeError(SECRET_TEXT)


class Invalid:
    """Returns something that is not an ExternalResult."""

    name = "invalid"
    input_schema = OBJECT_SCHEMA

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return {"status": "bogus"}


class Fails:
    """A business failure: an ordinary `failed` result, not an error."""

    name = "fails"
    input_schema = OBJECT_SCHEMA

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return {
            "status": "failed",
            "error": {
                "code": "UPSTREAM_DOWN",
                "message": "Upstream is down",
                "retryable": True,
            },
        }


class Big:
    """Returns `size` characters of text; with `twice`, the same text as structuredContent too, as
    servers that duplicate their content do."""

    name = "big"
    input_schema = OBJECT_SCHEMA

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        text = "x" * int(arguments["size"])
        if arguments.get("twice"):
            return {
                "status": "success",
                "content": text,
                "structuredContent": {"text": text},
            }
        return {"status": "success", "content": text}


class Secret(Echo):
    """Registered, but the sandbox does not allow it."""

    name = "secret"


class ListSink:
    """Appends every delivery; its answer depends on the message's content."""

    def __init__(self) -> None:
        self.deliveries: list[OutputRequest] = []

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        self.deliveries.append(request)
        content = request.message.content
        if content == "reject":
            return {
                "deliveryId": request.delivery_id,
                "status": "rejected",
                "error": {"code": "POLICY", "message": "Rejected by policy"},
            }
        if content == "bad-receipt":
            return {"deliveryId": "someone-else", "status": "accepted"}
        if content == "crash":
            raise RuntimeError(SECRET_TEXT)
        return {"deliveryId": request.delivery_id, "status": "accepted"}


class McpDouble:
    """An MCP server: `behaviour` selects a failure, otherwise one `search` tool that answers."""

    def __init__(self, behaviour: str = "ok", tools: int = 1, pad: int = 0) -> None:
        self.behaviour = behaviour
        self.tools = tools
        self.pad = pad
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def list_tools(self, cursor: str | None = None) -> Any:
        if self.behaviour == "unavailable":
            raise McpUnavailable()
        if self.behaviour == "timeout":
            raise McpTimeout()
        tools: list[Mapping[str, Any]] = [
            {
                "name": "search" if i == 0 else f"search{i}",
                "description": "Search the docs" + " " * self.pad,
                "inputSchema": {"type": "object"},
            }
            for i in range(self.tools)
        ]
        return McpToolPage(tools=tools)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        self.calls.append((name, arguments))
        if self.behaviour == "crash":
            raise RuntimeError(SECRET_TEXT)
        if self.behaviour == "weird":
            return {"content": [], "isError": "yes"}
        return McpToolResult(
            content=[{"type": "text", "text": f"found {arguments.get('q')}"}],
            structured_content={"hits": 1},
        )


class Kit:
    """One of each double, and workers built from them."""

    TOOLS = ("echo", "slow", "boom", "invalid", "fails", "big", "ghost")
    SERVERS = ("docs", "ghost", "flaky", "slowpoke", "weird", "crashy", "huge")

    def __init__(self, slow_seconds: float = 0.2) -> None:
        self.echo = Echo()
        self.slow = Slow(slow_seconds)
        self.sink = ListSink()
        self.docs = McpDouble()
        self.servers: dict[str, McpDouble] = {
            "docs": self.docs,
            "private": McpDouble(),
            "flaky": McpDouble("unavailable"),
            "slowpoke": McpDouble("timeout"),
            "weird": McpDouble("weird"),
            "crashy": McpDouble("crash"),
            # Its discover reply (about 16 KB) only fits a server with the default max_payload.
            "huge": McpDouble(tools=40, pad=300),
        }

    def tools(self) -> list[Any]:
        return [self.echo, self.slow, Boom(), Invalid(), Fails(), Big(), Secret()]

    def sandbox(self) -> Sandbox:
        return Sandbox(tools=self.TOOLS, mcp=self.SERVERS)

    def worker(
        self,
        *,
        concurrency: int | None = 1,
        mcp: bool = True,
        output: bool = True,
        servers: tuple[str, ...] | None = None,
    ) -> InteractionWorker:
        """The full worker; `mcp=False` / `output=False` leave those nodes out, `servers` picks some."""
        registry = None
        if mcp:
            registry = McpRegistry()
            for name, client in self.servers.items():
                if servers is None or name in servers:
                    registry.register(name, client)
        return InteractionWorker(
            tools=self.tools(),
            mcp=registry,
            output=self.sink if output else None,
            sandbox=self.sandbox(),
            concurrency=concurrency,
        )
