"""The gateway served for a test over HTTP, in front of a worker served on a real nats-server, and a
worker whose tools answer what the gateway's tests ask of them."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway_tools import conformance_tools

from interaction_worker import (
    InteractionWorker,
    McpRegistry,
    McpToolPage,
    McpToolResult,
    Sandbox,
    ToolContext,
)
from interaction_worker.client import InteractionClient
from interaction_worker.gateway import (
    BusLink,
    Gateway,
    GatewayOptions,
    HttpOptions,
    serve_http,
)

CLIENT_NAME = "interaction-worker-gateway-test"
WAIT = 10.0
LONG_NAME = "x" * 70


@dataclass
class Echo:
    """Answers its `text` as content and as structured content; remembers each call's id."""

    name: str = "echo"
    description: str = "Echo the text"
    input_schema: dict[str, Any] = field(
        default_factory=lambda: {
            "type": "object",
            "properties": {"text": {"type": "string"}},
        }
    )
    call_ids: list[str] = field(default_factory=list)

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.call_ids.append(context.call_id)
        text = arguments.get("text", "")
        return {
            "status": "success",
            "content": text,
            "structuredContent": {"echo": text},
        }


@dataclass
class Slow:
    """Sleeps `seconds`, then answers; `finished` is set when a call ended on its own."""

    name: str = "slow"
    description: str = "Take a while"
    input_schema: dict[str, Any] = field(
        default_factory=lambda: {
            "type": "object",
            "properties": {"seconds": {"type": "number"}},
        }
    )
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        await asyncio.sleep(float(arguments.get("seconds", 0)))
        self.finished.set()
        return {"status": "success", "content": "done"}


class Docs:
    """An MCP server behind the fleet, in process: `lookup` declares an output schema; a tool whose
    gateway name would be too long, and one whose schema is not an object's, are left out."""

    async def list_tools(self, cursor: str | None = None) -> McpToolPage:
        return McpToolPage(
            tools=[
                {
                    "name": "lookup",
                    "description": "Look a word up",
                    "inputSchema": {
                        "type": "object",
                        "properties": {"word": {"type": "string"}},
                    },
                    "outputSchema": {
                        "type": "object",
                        "properties": {"meaning": {"type": "string"}},
                    },
                },
                {"name": LONG_NAME, "inputSchema": {"type": "object"}},
                # Not an object's schema: a worker refuses such a tool, an MCP server may send it.
                {"name": "bare", "inputSchema": {"type": "string"}},
            ]
        )

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> McpToolResult:
        meaning = f"the meaning of {arguments.get('word')}"
        return McpToolResult(
            content=[{"type": "text", "text": meaning}],
            structured_content={"meaning": meaning},
        )


@dataclass
class Fleet:
    """The worker's tools a test looks at."""

    echo: Echo
    slow: Slow
    worker: InteractionWorker


def fleet() -> Fleet:
    echo, slow = Echo(), Slow()
    tools: list[Any] = [echo, slow, *conformance_tools()]
    registry = McpRegistry()
    registry.register("docs", Docs())
    worker = InteractionWorker(
        tools=tools,
        mcp=registry,
        sandbox=Sandbox(tools=["*"], mcp=["docs"]),
    )
    return Fleet(echo, slow, worker)


def connector(nats_url: str, prefix: str, data_dir: Path) -> BusLink:
    async def connect() -> InteractionClient:
        return await InteractionClient.connect(
            nats_url, prefix=prefix, data_dir=data_dir, env={}, name=CLIENT_NAME
        )

    return BusLink(connect)


@contextlib.asynccontextmanager
async def serving(
    gateway: Gateway, options: HttpOptions | None = None
) -> AsyncIterator[str]:
    """The gateway over HTTP on a free loopback port; yields the URL of `/mcp`."""
    stop = asyncio.Event()
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve_http(gateway, options or HttpOptions(), ready=ready.set_result, stop=stop)
    )
    try:
        waiting: set[asyncio.Future[Any]] = {task, ready}
        done, _ = await asyncio.wait(
            waiting, timeout=WAIT, return_when="FIRST_COMPLETED"
        )
        if task in done:
            task.result()
        yield await ready
    finally:
        stop.set()
        await asyncio.wait({task})
        await gateway.link.aclose()


def gateway(nats_url: str, prefix: str, data_dir: Path, **options: Any) -> Gateway:
    return Gateway(
        connector(nats_url, prefix, data_dir),
        GatewayOptions(**{"servers": ("docs",), "poll_interval": 0.2, **options}),
    )
