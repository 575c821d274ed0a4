"""A discover of all servers over the bus (`P.mcp.call`) while some servers do not answer, with real MCP
servers (the paginating servers, over streamable HTTP in this process) and a port where nothing listens.

Optional servers (`required: false`) that are down, time out or answer a malformed page are named in the
reply's `unavailable`, and the others are listed; a required server that is down, or any server
discovered by name, still fails the request.
"""

import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from bus_harness import Bus, Serve, decode, running_service, unique_prefix
from mcp_harness import BACKOFF, START, pages_connection

from interaction_worker import InteractionWorker, McpRegistry, Sandbox
from interaction_worker.config import parse_settings
from interaction_worker.mcp import McpServerConnection, http_transport
from interaction_worker.service import ServeOptions

pytest_plugins = ["bus_fixtures", "mcp_fixtures"]

ALL = Sandbox(mcp=["*"])


@pytest.fixture
async def serve_one(nats_url: str) -> AsyncIterator[Serve]:
    starter = Serve("nats-py", nats_url)
    try:
        yield starter
    finally:
        await starter.close()


def free_url() -> str:
    """The URL of a port where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"


async def discover(bus: Bus, server: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"operation": "discover"}
    if server is not None:
        body["server"] = server
    reply = await bus.request("mcp", body)
    value: dict[str, Any] = decode(reply)
    if "error" in value:
        value["error"]["status"] = int((reply.headers or {})["Nats-Service-Error-Code"])
    return value


def refused(code: str, status: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status}}


def optional(name: str, url: str, *, timeout: float = 10.0) -> McpServerConnection:
    return McpServerConnection(
        name,
        http_transport(url, timeout=timeout),
        timeout=timeout,
        required=False,
        backoff=(5.0, 5.0),  # a server that is down stays down while the test runs
        connect_timeout=START,
    )


async def test_the_served_worker_lists_its_servers_and_names_the_optional_one_that_is_down(
    nats_url: str, tmp_path: Path, pages_urls: dict[str, str]
) -> None:
    servers = {
        "files": {"transport": "http", "url": pages_urls["pages"]},
        "web": {
            "transport": "http",
            "url": free_url(),
            "required": False,
            "restart_backoff": {"initial": "5s", "max": "5s"},
        },
    }
    settings = parse_settings(
        {
            "nats": {"url": nats_url},
            "sandbox": {"mcp": list(servers)},
            "mcp": {"servers": servers},
            "output": {"sinks": []},
        },
        base_dir=tmp_path,
    )
    prefix = unique_prefix()
    options = ServeOptions(url=nats_url, prefix=prefix, shutdown_grace=0.2)
    async with running_service(settings, options, start_bound=START) as served:
        every = await discover(served.bus)
        files = await discover(served.bus, "files")
        web = await discover(served.bus, "web")
    served.task.result()

    assert [c["name"] for c in files["capabilities"]] == [f"t{i}" for i in range(6)]
    assert every == {
        "operation": "discover",
        "capabilities": files["capabilities"],
        "unavailable": ["web"],
    }
    assert web == refused("UNAVAILABLE", 503, "MCP server is not connected: web")


async def test_optional_servers_down_timed_out_or_malformed_are_named_and_the_rest_listed(
    serve_one: Serve, pages_urls: dict[str, str]
) -> None:
    down = optional("down", free_url())
    sluggish = optional("sluggish", pages_urls["sluggish"], timeout=0.5)
    repeat = optional("repeat", pages_urls["repeat"])
    async with (
        pages_connection(pages_urls, "pages") as pages,
        down,
        sluggish,
        repeat,
    ):
        registry = McpRegistry()
        for name, client in [
            ("down", down),
            ("pages", pages),
            ("sluggish", sluggish),
            ("repeat", repeat),
        ]:
            registry.register(name, client)
        served = await serve_one(InteractionWorker(mcp=registry, sandbox=ALL))
        bus = served.bus

        every = await discover(bus)
        alone = await discover(bus, "pages")
        named = [await discover(bus, name) for name in ("down", "sluggish", "repeat")]

    assert every == {
        "operation": "discover",
        "capabilities": alone["capabilities"],
        "unavailable": ["down", "sluggish", "repeat"],
    }
    assert [c["name"] for c in alone["capabilities"]] == [f"t{i}" for i in range(6)]
    assert named == [
        refused("UNAVAILABLE", 503, "MCP server is not connected: down"),
        refused("TIMEOUT", 504, "MCP discovery timed out: sluggish"),
        refused("INVALID_RESULT", 502, "MCP server repeated a pagination cursor"),
    ]


async def test_a_required_server_that_is_down_still_fails_the_discover_of_all(
    serve_one: Serve, pages_urls: dict[str, str]
) -> None:
    down = optional("web", free_url())
    # Required, and gone: as a required server is while it reconnects.
    gone = McpServerConnection("files", http_transport(free_url()), backoff=BACKOFF)
    async with pages_connection(pages_urls, "pages") as pages, down:
        served = await serve_one(
            InteractionWorker(
                mcp={"pages": pages, "web": down, "files": gone}, sandbox=ALL
            )
        )
        every = await discover(served.bus)

    assert every == refused("UNAVAILABLE", 503, "MCP server is not connected: files")
