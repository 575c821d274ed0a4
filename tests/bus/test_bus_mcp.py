"""MCP over the bus with real MCP servers (`P.mcp.call` on a real nats-server): the probe over stdio and
over streamable HTTP (subprocesses), and the paginating servers over streamable HTTP in this process.

Discover and invoke on both transports, the registry's rules as real servers show them, timeouts that
cancel the server-side handler, servers killed mid-call and restarted, servers with sessions restarted
while the worker is idle (the SDK's and the reference server-everything, marked slow), optional
servers that cannot be reached, and the served worker that leaves no child process behind.
"""

import os
import signal
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from bus_harness import Bus, Serve, Served, decode, running_service, unique_prefix
from mcp_harness import (
    BACKOFF,
    PROBE,
    START,
    HttpProbe,
    pages_connection,
    probe_env,
    probe_pids,
    running,
    stdio_probe,
    wait_for,
)
from mcp_npm import Everything
from mcp_pages_server import SECRET, serving
from mcp_probe_server import PIXEL, SECRET_TEXT
from nats.aio.msg import Msg

from interaction_worker import InteractionWorker, McpClient, McpRegistry, Sandbox
from interaction_worker.app import build_worker
from interaction_worker.config import parse_settings
from interaction_worker.errors import ServeError
from interaction_worker.mcp import McpServerConnection, http_transport
from interaction_worker.service import ServeOptions, serve

pytest_plugins = ["bus_fixtures", "mcp_fixtures"]

ALL = Sandbox(mcp=["*"])
PROBE_TOOLS = ["echo", "measure", "leak", "reject", "media", "slow"]
PAGES_TOOLS = [f"t{i}" for i in range(6)]


@pytest.fixture
async def serve_one(nats_url: str) -> AsyncIterator[Serve]:
    """Workers served by the nats-py binding only (both bindings run the same handler)."""
    starter = Serve("nats-py", nats_url)
    try:
        yield starter
    finally:
        await starter.close()


def worker(
    servers: Mapping[str, McpClient],
    sandbox: Sandbox = ALL,
    *,
    limits: Mapping[str, int] | None = None,
) -> InteractionWorker:
    registry = McpRegistry(**(limits or {}))
    for name, client in servers.items():
        registry.register(name, client)
    return InteractionWorker(mcp=registry, sandbox=sandbox)


def invoke_body(
    server: str, name: str, arguments: dict[str, Any], call_id: str
) -> dict[str, Any]:
    return {
        "operation": "invoke",
        "server": server,
        "call": {"id": call_id, "name": name, "arguments": arguments},
    }


async def invoke(
    served: Served,
    server: str,
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    within: float = 10.0,
) -> tuple[dict[str, Any], list[Msg]]:
    """Invoke through the bus: the reply's result, and the result and observation events."""
    call_id = f"m-{uuid.uuid4().hex[:12]}"
    bus = served.bus
    sent = await bus.send("mcp", invoke_body(server, name, arguments or {}, call_id))
    reply = decode(await bus.reply(sent, within))
    assert reply["operation"] == "invoke"
    p = served.prefix
    subjects = [f"{p}.mcp.result.{call_id}", f"{p}.mcp.observation.{call_id}"]
    events = await bus.wait(lambda m: m.subject in subjects, 2)
    assert [m.subject for m in events] == subjects
    assert decode(events[0]) == reply["result"]
    return reply["result"], events


async def discover(bus: Bus, server: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"operation": "discover"}
    if server is not None:
        body["server"] = server
    reply = await bus.request("mcp", body)
    value: dict[str, Any] = decode(reply)
    if "error" in value:
        headers = reply.headers or {}
        value["error"]["status"] = int(headers["Nats-Service-Error-Code"])
    return value


def names(discovered: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["server"], c["name"]) for c in discovered["capabilities"]]


def refused(code: str, status: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_invoke_over_stdio_replies_then_publishes_the_result_and_observation(
    serve: Serve, probe: McpServerConnection
) -> None:
    served = await serve(worker({"probe": probe}))

    result, (_, observation) = await invoke(served, "probe", "echo", {"text": "hi"})

    assert result == {
        "callId": result["callId"],
        "source": "probe:echo",
        "status": "success",
        "content": [{"type": "text", "text": "hi"}],
    }
    assert decode(observation)["message"] == {
        "role": "tool",
        "name": "probe:echo",
        "content": "hi",
    }
    assert served.bus.dead_letters() == []


async def test_structured_content_and_every_kind_of_content_block_are_kept(
    serve_one: Serve, probe: McpServerConnection
) -> None:
    served = await serve_one(worker({"probe": probe}))

    measured, _ = await invoke(served, "probe", "measure", {"values": [1, 2, 3]})
    media, (_, observation) = await invoke(served, "probe", "media")

    assert measured["structuredContent"] == {"count": 3, "total": 6}
    assert measured["status"] == "success"
    assert media["content"] == [
        {"type": "reference", "reference": {"uri": f"data:image/png;base64,{PIXEL}", "mediaType": "image/png"}},
        {"type": "reference", "reference": {"uri": "file:///docs/a.md", "mediaType": "text/markdown", "name": "a.md"}},
        {"type": "reference", "reference": {"uri": "mem://note", "mediaType": "text/plain", "text": "hello"}},
        {"type": "reference", "reference": {"uri": "mem://blob", "blob": PIXEL}},
    ]  # fmt: skip
    assert decode(observation)["message"]["content"] == media["content"]


async def test_an_is_error_result_is_failed_with_mcp_tool_error_and_server_text_stays_out_of_errors(
    serve_one: Serve, probe: McpServerConnection
) -> None:
    served = await serve_one(worker({"probe": probe}))

    leak, events = await invoke(served, "probe", "leak")
    rejected, _ = await invoke(served, "probe", "reject")

    assert leak["status"] == "failed"
    assert leak["error"] == {
        "code": "MCP_TOOL_ERROR",
        "message": "MCP tool reported an execution error",
    }
    assert SECRET_TEXT in leak["content"][0]["text"]  # the tool's own output stays
    for event in events:
        assert (event.headers or {})["Interaction-Error-Code"] == "MCP_TOOL_ERROR"
    assert rejected == {
        "callId": rejected["callId"],
        "source": "probe:reject",
        "status": "failed",
        "error": {
            "code": "MCP_ERROR",
            "message": "MCP server returned an error",
            "retryable": False,
        },
    }
    rejected_messages = served.bus.messages[-3:]
    assert all(b"sk-live" not in m.data for m in rejected_messages)
    assert served.bus.dead_letters() == []


async def test_discover_one_server_or_all_over_both_transports(
    serve_one: Serve, probe: McpServerConnection, pages: McpServerConnection
) -> None:
    served = await serve_one(worker({"probe": probe, "pages": pages}))
    bus = served.bus

    one = await discover(bus, "probe")
    every = await discover(bus)
    await bus.settle("mcp")

    assert names(one) == [("probe", name) for name in PROBE_TOOLS]
    measure = one["capabilities"][1]
    assert measure["inputSchema"]["required"] == ["values"]
    assert measure["outputSchema"]["properties"]["total"] == {
        "title": "Total",
        "type": "integer",
    }
    assert names(every) == names(one) + [("pages", name) for name in PAGES_TOOLS]
    assert every["capabilities"][6] == {
        "server": "pages",
        "name": "t0",
        "description": "tool 0",
        "inputSchema": {
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
        },
    }
    assert bus.events() == []
    assert bus.dead_letters() == []


async def test_invoke_over_streamable_http(
    serve_one: Serve, pages: McpServerConnection
) -> None:
    served = await serve_one(worker({"pages": pages}))

    result, _ = await invoke(served, "pages", "t3", {"x": 7})

    assert result["content"] == [{"type": "text", "text": "t3:7"}]
    assert result["structuredContent"] == {"tool": "t3", "x": 7}


@pytest.mark.parametrize(
    ("scenario", "limits", "message"),
    [
        pytest.param("pages", {"max_discovery_pages": 2}, "MCP discovery page limit exceeded", id="page-limit"),
        pytest.param("pages", {"max_capabilities": 5}, "MCP capability limit exceeded", id="capability-limit"),
        pytest.param("repeat", {}, "MCP server repeated a pagination cursor", id="repeated-cursor"),
        pytest.param("blank", {}, "MCP cursor must be a nonempty string", id="blank-cursor"),
        pytest.param("unnamed", {}, "MCP tool name must be a nonempty string", id="unnamed-tool"),
        pytest.param("broken", {}, "MCP server returned an error", id="error-answer"),
    ],
)  # fmt: skip
async def test_a_server_breaking_a_discovery_rule_gets_invalid_result(
    serve_one: Serve,
    pages_urls: dict[str, str],
    scenario: str,
    limits: dict[str, int],
    message: str,
) -> None:
    async with pages_connection(pages_urls, scenario, "odd") as odd:
        served = await serve_one(worker({"odd": odd}, limits=limits))
        bus = served.bus

        reply = await discover(bus, "odd")
        await bus.settle("mcp")

    assert reply == refused("INVALID_RESULT", 502, message)
    (dead,) = bus.dead_letters()
    assert dead.subject == f"{served.prefix}.dead.mcp.odd"
    assert all(SECRET.encode() not in m.data for m in bus.messages)


async def test_exactly_the_page_limit_succeeds_and_the_budget_is_shared_across_servers(
    serve_one: Serve, probe: McpServerConnection, pages: McpServerConnection
) -> None:
    # pages has 3 pages of 2 tools; probe 1 page of 6 tools.
    exact = await serve_one(worker({"pages": pages}, limits={"max_discovery_pages": 3}))
    by_pages = await serve_one(
        worker({"probe": probe, "pages": pages}, limits={"max_discovery_pages": 3})
    )
    by_tools = await serve_one(
        worker({"probe": probe, "pages": pages}, limits={"max_capabilities": 11})
    )

    assert names(await discover(exact.bus, "pages")) == [
        ("pages", name) for name in PAGES_TOOLS
    ]
    assert names(await discover(by_pages.bus, "pages")) == names(
        await discover(exact.bus, "pages")
    )
    assert await discover(by_pages.bus) == refused(
        "INVALID_RESULT", 502, "MCP discovery page limit exceeded"
    )
    assert await discover(by_tools.bus) == refused(
        "INVALID_RESULT", 502, "MCP capability limit exceeded"
    )


async def test_permission_is_checked_before_existence(
    serve_one: Serve, probe: McpServerConnection, pages: McpServerConnection
) -> None:
    only_probe = await serve_one(
        worker({"probe": probe, "pages": pages}, Sandbox(mcp=["probe"]))
    )
    everything = await serve_one(worker({"probe": probe}))

    assert await discover(only_probe.bus, "ghost") == refused(
        "PERMISSION_DENIED", 403, "Permission denied: mcp:ghost"
    )
    # All servers: a denied one is refused, not silently left out.
    assert await discover(only_probe.bus) == refused(
        "PERMISSION_DENIED", 403, "Permission denied: mcp:pages"
    )
    reply = await only_probe.bus.request(
        "mcp", invoke_body("ghost", "echo", {"text": "x"}, "m-ghost")
    )
    assert decode(reply)["error"]["code"] == "PERMISSION_DENIED"
    assert await discover(everything.bus, "ghost") == refused(
        "NOT_FOUND", 404, "Unknown MCP server: ghost"
    )


async def test_a_call_past_its_timeout_is_a_timeout_and_the_server_side_handler_is_cancelled(
    serve_one: Serve, markers: Path, pages_urls: dict[str, str]
) -> None:
    dir = markers / "slowpoke"
    sluggish = McpServerConnection(
        "sluggish", http_transport(pages_urls["sluggish"]), timeout=0.5
    )
    async with stdio_probe(dir, "slowpoke", timeout=1.0) as slowpoke, sluggish:
        served = await serve_one(worker({"slowpoke": slowpoke, "sluggish": sluggish}))

        result, _ = await invoke(
            served, "slowpoke", "slow", {"seconds": 30, "tag": "late"}
        )
        await wait_for((dir / "cancelled-late").exists, "the handler's cancellation")
        again, _ = await invoke(served, "slowpoke", "echo", {"text": "still here"})
        listing = await discover(served.bus, "sluggish")

    assert result["status"] == "timeout"
    assert result["error"] == {
        "code": "MCP_TIMEOUT",
        "message": "MCP call timed out",
        "retryable": False,
    }
    assert again["status"] == "success"
    assert listing == refused("TIMEOUT", 504, "MCP discovery timed out: sluggish")


async def test_a_stdio_server_killed_mid_call_leaves_the_call_unknown_and_comes_back(
    serve_one: Serve,
    markers: Path,
    probe: McpServerConnection,
    pages: McpServerConnection,
) -> None:
    dir = markers / "victim"
    async with stdio_probe(dir, "victim") as victim:
        served = await serve_one(
            worker({"victim": victim, "probe": probe, "pages": pages})
        )
        sent = await served.bus.send(
            "mcp", invoke_body("victim", "slow", {"seconds": 30, "tag": "k"}, "m-k")
        )
        await wait_for((dir / "started-k").exists, "the slow call to start")
        (first,) = probe_pids(dir, "victim")
        os.kill(first, signal.SIGKILL)

        lost = decode(await served.bus.reply(sent))["result"]
        others = [
            await invoke(served, "probe", "echo", {"text": "fine"}),
            await invoke(served, "pages", "t0", {"x": 1}),
        ]
        with anyio.fail_after(START):
            await victim.wait_connected(after=1)
        back, _ = await invoke(served, "victim", "echo", {"text": "back"})

    assert lost == {
        "callId": "m-k",
        "source": "victim:slow",
        "status": "unknown",
        "error": {
            "code": "MCP_CONNECTION_LOST",
            "message": "MCP connection lost during the call",
            "retryable": False,
        },
    }
    assert [result["status"] for result, _ in others] == ["success", "success"]
    assert back["content"] == [{"type": "text", "text": "back"}]
    assert len(probe_pids(dir, "victim")) == 2
    assert not any(running(pid) for pid in probe_pids(dir, "victim"))


async def test_an_http_server_killed_mid_call_leaves_the_call_unknown_and_comes_back(
    serve_one: Serve, markers: Path, probe: McpServerConnection
) -> None:
    web = HttpProbe(markers / "web")
    await web.start()
    try:
        async with web.connection() as connection:
            served = await serve_one(worker({"web": connection, "probe": probe}))
            sent = await served.bus.send(
                "mcp", invoke_body("web", "slow", {"seconds": 30, "tag": "h"}, "m-h")
            )
            await wait_for((web.markers / "started-h").exists, "the slow call")
            await web.kill()

            lost = decode(await served.bus.reply(sent))["result"]
            await wait_for(lambda: not connection.connected, "the loss to be seen")
            down, _ = await invoke(served, "web", "echo", {"text": "anyone?"})
            fine, _ = await invoke(served, "probe", "echo", {"text": "fine"})
            await web.start()
            with anyio.fail_after(START):
                await connection.wait_connected(after=1)
            back, _ = await invoke(served, "web", "echo", {"text": "back"})
    finally:
        await web.kill()

    assert (lost["status"], lost["error"]["code"]) == ("unknown", "MCP_CONNECTION_LOST")
    assert down["status"] == "failed"
    assert down["error"] == {
        "code": "MCP_UNAVAILABLE",
        "message": "MCP server is not connected",
        "retryable": True,
    }
    assert fine["status"] == "success"
    assert back["content"] == [{"type": "text", "text": "back"}]


async def test_an_optional_server_that_cannot_be_reached_is_unavailable_until_it_comes(
    serve_one: Serve, probe: McpServerConnection
) -> None:
    port = free_port()
    later = McpServerConnection(
        "later",
        http_transport(f"http://127.0.0.1:{port}/mcp"),
        required=False,
        backoff=(0.1, 0.5),
    )
    async with later:
        served = await serve_one(worker({"probe": probe, "later": later}))
        bus = served.bus

        alone = await discover(bus, "later")
        every = await discover(bus)
        result, _ = await invoke(served, "later", "t0", {"x": 1})
        async with serving("pages", port):
            with anyio.fail_after(START):
                await later.wait_connected()
            arrived = await discover(bus, "later")
            await later.aclose()  # before its server stops

    assert alone == refused("UNAVAILABLE", 503, "MCP server is not connected: later")
    assert names(every) == [("probe", name) for name in PROBE_TOOLS]
    assert every["unavailable"] == ["later"]
    assert result == {
        "callId": result["callId"],
        "source": "later:t0",
        "status": "failed",
        "error": {
            "code": "MCP_UNAVAILABLE",
            "message": "MCP server is not connected",
            "retryable": True,
        },
    }
    assert names(arrived) == [("later", name) for name in PAGES_TOOLS]


def served_settings(nats_url: str, servers: dict[str, Any]) -> Any:
    return parse_settings(
        {
            "nats": {"url": nats_url},
            "sandbox": {"mcp": list(servers)},
            "mcp": {"servers": servers},
            "output": {"sinks": []},
        },
        base_dir=Path.cwd(),
    )


async def test_the_served_worker_connects_the_files_servers_and_leaves_no_child_process(
    nats_url: str, tmp_path: Path
) -> None:
    stdio = {
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(PROBE)],
        "env": probe_env(tmp_path, "files"),
        "restart_backoff": {"initial": "100ms", "max": "500ms"},
    }
    settings = served_settings(nats_url, {"files": stdio})
    prefix = unique_prefix()
    options = ServeOptions(url=nats_url, prefix=prefix, shutdown_grace=0.2)
    async with running_service(settings, options, start_bound=START) as served:
        bus = served.bus
        listing = await discover(bus, "files")
        sent = await bus.send(
            "mcp", invoke_body("files", "slow", {"seconds": 30, "tag": "s"}, "m-s")
        )
        await wait_for((tmp_path / "started-s").exists, "the slow call")
        served.stop.set()
        cancelled = decode(await bus.reply(sent))["result"]
        with anyio.fail_after(START):
            await served.task

    assert names(listing) == [("files", name) for name in PROBE_TOOLS]
    assert (cancelled["status"], cancelled["error"]["code"]) == (
        "cancelled",
        "WORKER_SHUTDOWN",
    )
    assert (tmp_path / "cancelled-s").exists()
    (pid,) = probe_pids(tmp_path, "files")
    assert not running(pid)


async def test_a_required_server_that_cannot_be_reached_stops_the_start_naming_it(
    nats_url: str, tmp_path: Path
) -> None:
    missing = {"transport": "stdio", "command": str(tmp_path / "no-server")}
    settings = served_settings(nats_url, {"files": missing})
    options = ServeOptions(url=nats_url, prefix=unique_prefix())

    with anyio.fail_after(START), pytest.raises(ServeError) as caught:
        await serve(build_worker(settings), options, install_signal_handlers=False)

    assert str(caught.value) == (
        "cannot connect to MCP server files: the command cannot be started"
    )


RESTARTS = [
    pytest.param(signal.SIGTERM, id="sigterm"),
    pytest.param(signal.SIGKILL, id="sigkill"),
]
UNAVAILABLE = {
    "code": "MCP_UNAVAILABLE",
    "message": "MCP server is not connected",
    "retryable": True,
}


async def invoke_until_served(
    served: Served, server: str, name: str, arguments: dict[str, Any]
) -> list[dict[str, Any]]:
    """Invoke until a call succeeds, within the connect bound: the results. Any other answer than
    MCP_UNAVAILABLE (the call was not run, it can be retried) ends the loop too."""
    results: list[dict[str, Any]] = []
    with anyio.fail_after(START):
        while True:
            result, _ = await invoke(served, server, name, arguments)
            results.append(result)
            if result["status"] != "failed" or result["error"] != UNAVAILABLE:
                return results
            await anyio.sleep(BACKOFF[0])


def served_after_unavailable(results: list[dict[str, Any]]) -> bool:
    *before, last = results
    return last["status"] == "success" and all(
        (result["status"], result["error"]) == ("failed", UNAVAILABLE)
        for result in before
    )


@pytest.mark.slow
@pytest.mark.parametrize("how", RESTARTS)
async def test_an_idle_worker_opens_a_new_session_with_an_sdk_server_that_restarted(
    serve_one: Serve, markers: Path, how: signal.Signals
) -> None:
    web = HttpProbe(markers / f"sessions-{how.name}", sessions=True)
    await web.start()
    try:
        async with web.connection() as connection:
            served = await serve_one(worker({"web": connection}))
            before, _ = await invoke(served, "web", "echo", {"text": "before"})
            await web.kill(how)
            await web.start()
            after = await invoke_until_served(served, "web", "echo", {"text": "after"})
            listing = await discover(served.bus, "web")
    finally:
        await web.kill()

    assert before["status"] == "success"
    assert served_after_unavailable(after), after
    assert after[-1]["content"] == [{"type": "text", "text": "after"}]
    assert names(listing) == [("web", name) for name in PROBE_TOOLS]
    assert connection.sessions >= 2


@pytest.mark.slow
@pytest.mark.parametrize("how", RESTARTS)
async def test_an_idle_worker_opens_a_new_session_with_server_everything_that_restarted(
    serve_one: Serve, how: signal.Signals
) -> None:
    everything = Everything()
    await everything.start()
    try:
        connection = McpServerConnection(
            "everything",
            http_transport(everything.url),
            backoff=BACKOFF,
            connect_timeout=START,
        )
        async with connection:
            served = await serve_one(worker({"everything": connection}))
            before, _ = await invoke(
                served, "everything", "echo", {"message": "before"}
            )
            await everything.kill(how)
            await everything.start()
            after = await invoke_until_served(
                served, "everything", "echo", {"message": "after"}
            )
            listing = await discover(served.bus, "everything")
    finally:
        await everything.kill()

    assert before["content"] == [{"type": "text", "text": "Echo: before"}]
    assert served_after_unavailable(after), after
    assert after[-1]["content"] == [{"type": "text", "text": "Echo: after"}]
    assert ("everything", "echo") in names(listing)
    assert connection.sessions >= 2
