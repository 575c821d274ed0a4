"""An MCP server for the tests, written with the SDK's `MCPServer`; run as a subprocess.

    python mcp_probe_server.py                      serve over stdio
    python mcp_probe_server.py http PORT            serve streamable HTTP on 127.0.0.1:PORT (0: any free port)
    python mcp_probe_server.py http PORT sessions   the same, as a 2025 server: with sessions (`mcp_sessions`)

Environment: `PROBE_MARKER_DIR` receives `pid-<PROBE_NAME>-<pid>` at start, `port-<PROBE_NAME>`
(the port) once an HTTP server listens, `started-<tag>` when a slow call starts and `cancelled-<tag>`
when a slow call is cancelled.
"""

import asyncio
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextResourceContents,
)
from pydantic import BaseModel

MARKERS = Path(os.environ.get("PROBE_MARKER_DIR", "."))
NAME = os.environ.get("PROBE_NAME", "probe")
# What the leaky tool says: server text that must never reach an error message.
SECRET_TEXT = "token sk-live-0123456789abcdef at /srv/secrets/key.pem"
PIXEL = "iVBORw0KGgo="  # base64 of the PNG signature: enough for a data: URI

mcp = MCPServer("probe", version="1.0.0")


class Stats(BaseModel):
    count: int
    total: int


@mcp.tool(structured_output=False)
async def echo(text: str) -> str:
    """Text only: one text block, no structured content."""
    return text


@mcp.tool()
async def measure(values: list[int]) -> Stats:
    """Structured content (and its JSON as a text block)."""
    return Stats(count=len(values), total=sum(values))


@mcp.tool()
async def leak() -> str:
    """A tool error whose text looks like a secret."""
    raise ToolError(SECRET_TEXT)


@mcp.tool()
async def reject() -> str:
    """An error answer (JSON-RPC error), not an `isError` result."""
    raise MCPError(code=INVALID_PARAMS, message=SECRET_TEXT)


@mcp.tool()
async def media() -> CallToolResult:
    """One block of every other kind."""
    return CallToolResult(
        content=[
            ImageContent(data=PIXEL, mime_type="image/png"),
            ResourceLink(
                uri="file:///docs/a.md", name="a.md", mime_type="text/markdown"
            ),
            EmbeddedResource(
                resource=TextResourceContents(
                    uri="mem://note", mime_type="text/plain", text="hello"
                )
            ),
            EmbeddedResource(
                resource=BlobResourceContents(uri="mem://blob", blob=PIXEL)
            ),
        ]
    )


@mcp.tool()
async def slow(seconds: float, tag: str) -> str:
    """Sleeps; leaves `started-<tag>`, and `cancelled-<tag>` when the call is cancelled."""
    (MARKERS / f"started-{tag}").write_text(str(os.getpid()))
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        (MARKERS / f"cancelled-{tag}").write_text("1")
        raise
    return "finished"


async def serve_http(port: int, sessions: bool) -> None:
    import uvicorn
    from mcp_sessions import handshake_era
    from starlette.types import ASGIApp

    app: ASGIApp = mcp.streamable_http_app()
    if sessions:
        app = handshake_era(app)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            return
        await asyncio.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    (MARKERS / f".port-{NAME}").write_text(str(bound))
    (MARKERS / f".port-{NAME}").rename(MARKERS / f"port-{NAME}")
    await task


def main() -> None:
    (MARKERS / f"pid-{NAME}-{os.getpid()}").write_text("")
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        asyncio.run(serve_http(int(sys.argv[2]), sys.argv[3:] == ["sessions"]))
    else:
        mcp.run()


if __name__ == "__main__":
    main()
