"""MCP servers that paginate `tools/list`, written with the SDK's low-level `Server` (`MCPServer` never
paginates), one per scenario, and a runner that serves one over streamable HTTP on loopback in the
test's own event loop (uvicorn on port 0).

Every scenario answers `tools/call` with `<name>:<x>` and `{"tool", "x"}`, and the tool `whoami` with
`{"auth": <the request's Authorization header>}`. Scenarios (what `tools/list` answers):
    pages       3 pages of 2 tools (`t0` … `t5`), cursors "2" and "4"
    repeat      page 1 leads to cursor "again", which leads to "again" once more
    blank       one page whose next cursor is ""
    unnamed     a tool named ""
    broken      an error answer whose message looks like a secret
    sluggish    one page, after 30 s (the client's timeout cancels it first)
"""

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from mcp import types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from starlette.types import ASGIApp

SCENARIOS = ("pages", "repeat", "blank", "unnamed", "broken", "sluggish")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"x": {"type": "integer"}},
    "required": ["x"],
}
SECRET = "password=hunter2 in /srv/pages/config.toml"
TOOLS = [
    types.Tool(name=f"t{i}", description=f"tool {i}", input_schema=SCHEMA)
    for i in range(6)
]


def _page(scenario: str, cursor: str | None) -> types.ListToolsResult:
    if scenario == "pages":
        start = int(cursor or 0)
        end = start + 2
        return types.ListToolsResult(
            tools=TOOLS[start:end], next_cursor=str(end) if end < len(TOOLS) else None
        )
    if scenario == "repeat":
        return types.ListToolsResult(tools=TOOLS[:1], next_cursor="again")
    if scenario == "blank":
        return types.ListToolsResult(tools=TOOLS[:1], next_cursor="")
    if scenario == "unnamed":
        return types.ListToolsResult(tools=[types.Tool(name="", input_schema=SCHEMA)])
    # An SDK server validates what it sends, so an invalid schema never leaves it: it can only
    # answer with an error.
    raise MCPError(code=types.INTERNAL_ERROR, message=SECRET)


def build(scenario: str) -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if scenario == "sluggish":
            await asyncio.sleep(30)
            return types.ListToolsResult(tools=TOOLS[:1])
        return _page(scenario, params.cursor if params else None)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name == "whoami":  # what the HTTP request carried
            request: Any = ctx.request
            auth = request.headers.get("authorization") if request else None
            return types.CallToolResult(content=[], structured_content={"auth": auth})
        x = (params.arguments or {}).get("x")
        return types.CallToolResult(
            content=[types.TextContent(text=f"{params.name}:{x}")],
            structured_content={"tool": params.name, "x": x},
        )

    return Server(
        f"pages-{scenario}",
        version="1.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


@asynccontextmanager
async def serving(
    scenario: str,
    port: int = 0,
    *,
    wrap: Callable[[ASGIApp], ASGIApp] | None = None,
) -> AsyncIterator[str]:
    """Serve `scenario` over streamable HTTP on 127.0.0.1 (its app wrapped by `wrap`, as with
    `mcp_sessions`); yields its URL."""
    app: ASGIApp = build(scenario).streamable_http_app()
    if wrap is not None:
        app = wrap(app)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("uvicorn stopped before it started")
            await asyncio.sleep(0.01)
        bound = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{bound}/mcp"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
