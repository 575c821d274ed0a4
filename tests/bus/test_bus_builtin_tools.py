"""The built-in tools over a real nats-server, through both bindings: read-only commands on real
programs, path attacks as error replies with dead letters, and web search on an injected transport."""

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from bus_harness import Bus, Serve, Served, decode
from nats.aio.msg import Msg

from interaction_worker import InteractionWorker, Sandbox
from interaction_worker.app import build_worker
from interaction_worker.config import parse_settings
from interaction_worker.contracts import validation as check
from interaction_worker.nodes import observe_external_result
from interaction_worker.tools import (
    BraveSearch,
    SubprocessExecutor,
    WebSearchTool,
    read_only_command_tools,
)

pytest_plugins = ["bus_fixtures"]

BRAVE = "https://api.search.brave.com"
KEY = "bus-brave-key-42"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """src/{a,b}.py, a readme in docs/, notes.txt, `out`: a symlink to a directory outside, and the
    data directory `.interaction` with its token."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("needle secret\n", encoding="utf-8")
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    (root / "src" / "a.py").write_text("needle = 1\n", encoding="utf-8")
    (root / "src" / "b.py").write_text("other = 2\n", encoding="utf-8")
    (root / "docs" / "readme.md").write_text("# title\nneedle here\n", encoding="utf-8")
    (root / "out").symlink_to(outside)
    (root / ".interaction").mkdir()
    (root / ".interaction" / "token").write_text("needle secret\n", encoding="utf-8")
    return root


def command_worker(workspace: Path) -> InteractionWorker:
    sandbox = Sandbox(
        tools=["*"],
        read=True,
        execute=True,
        workspace=workspace,
        executor=SubprocessExecutor(timeout=10),
    )
    sandbox.protected.add(workspace / ".interaction")
    return InteractionWorker(
        tools=read_only_command_tools(), sandbox=sandbox, concurrency=1
    )


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> bytes:
    return json.dumps(
        {"call": {"id": call_id, "name": name, "arguments": arguments}}
    ).encode()


async def call(
    served: Served, call_id: str, name: str, arguments: dict[str, Any]
) -> tuple[Msg, Msg, Msg]:
    """Send one call; its reply, then its result and observation events."""
    bus: Bus = served.bus
    sent = await bus.send("tool", tool_call(call_id, name, arguments))
    reply = await bus.reply(sent)
    result, observation = await bus.wait(
        lambda m: bus.is_event(m) and m.subject.endswith(f".{call_id}"), 2
    )
    p = served.prefix
    assert [result.subject, observation.subject] == [
        f"{p}.tool.result.{call_id}",
        f"{p}.tool.observation.{call_id}",
    ]
    assert decode(result) == decode(reply)
    expected = observe_external_result(check.external_result(decode(reply)))
    assert decode(observation) == expected.to_wire()
    return reply, result, observation


async def test_cat_through_the_bus(serve: Serve, workspace: Path) -> None:
    served = await serve(command_worker(workspace))
    reply, result, observation = await call(
        served, "cat-1", "cat", {"path": "notes.txt"}
    )
    assert decode(reply) == {
        "callId": "cat-1",
        "source": "cat",
        "status": "success",
        "content": "alpha\nbeta\n",
        "structuredContent": {
            "command": "cat",
            "args": ["--", "notes.txt"],
            "stdout": "alpha\nbeta\n",
            "stderr": "",
            "exitCode": 0,
            "truncated": False,
        },
    }
    assert (result.headers or {})["Interaction-Status"] == "success"
    assert decode(observation)["message"]["name"] == "cat"
    assert served.bus.dead_letters() == []


async def test_grep_and_find_through_the_bus(serve: Serve, workspace: Path) -> None:
    served = await serve(command_worker(workspace))
    grep, _, _ = await call(
        served,
        "grep-1",
        "grep",
        {"pattern": "needle", "paths": ["."], "recursive": True},
    )
    body = decode(grep)
    assert body["status"] == "success"
    # The link to the outside is not followed while recursing, the data directory is skipped.
    assert sorted(body["content"].splitlines()) == [
        "./docs/readme.md:2:needle here",
        "./src/a.py:1:needle = 1",
    ]
    find, _, _ = await call(served, "find-1", "find", {"type": "file", "name": "*.py"})
    assert sorted(decode(find)["content"].splitlines()) == ["./src/a.py", "./src/b.py"]
    assert served.bus.dead_letters() == []


async def test_a_nonzero_exit_is_a_failed_result_not_an_error(
    serve: Serve, workspace: Path
) -> None:
    served = await serve(command_worker(workspace))
    reply, result, _ = await call(served, "miss-1", "cat", {"path": "missing.txt"})
    body = decode(reply)
    assert body["status"] == "failed"
    assert body["error"] == {
        "code": "COMMAND_EXIT_NONZERO",
        "message": "Command exited with code 1",
    }
    headers = result.headers or {}
    assert headers["Interaction-Error-Code"] == "COMMAND_EXIT_NONZERO"
    assert "Nats-Service-Error" not in (reply.headers or {})
    assert served.bus.dead_letters() == []


@pytest.mark.parametrize(
    ("arguments", "code", "status", "message"),
    [
        pytest.param(
            {"path": "../outside/secret.txt"},
            "INVALID_INPUT",
            "400",
            "path must be a workspace-relative POSIX path",
            id="dotdot",
        ),
        pytest.param(
            {"path": "out/secret.txt"},
            "PERMISSION_DENIED",
            "403",
            "Permission denied: workspace path",
            id="symlink-out",
        ),
        pytest.param(
            {"path": ".interaction/token"},
            "PERMISSION_DENIED",
            "403",
            "Permission denied: protected path",
            id="protected",
        ),
    ],
)
async def test_a_path_attack_gets_an_error_reply_and_a_dead_letter(
    serve: Serve,
    workspace: Path,
    arguments: dict[str, Any],
    code: str,
    status: str,
    message: str,
) -> None:
    served = await serve(command_worker(workspace))
    bus, p = served.bus, served.prefix
    sent = await bus.send("tool", tool_call("evil-1", "cat", arguments))
    reply = await bus.reply(sent)
    (dead,) = await bus.wait(bus.is_dead)
    assert decode(reply) == {"error": {"code": code, "message": message}}
    assert (reply.headers or {})["Nats-Service-Error-Code"] == status
    assert dead.subject == f"{p}.dead.tool.evil-1"
    letter = decode(dead)
    assert letter["error"] == {"code": code, "message": message}
    assert letter["callId"] == "evil-1"
    assert letter["payload"] == sent.data.decode()
    await bus.settle("tool")
    assert bus.events() == []
    assert all(b"needle secret" not in m.data for m in bus.messages)


async def test_a_sandbox_given_in_code_works_in_the_file_s_workspace(
    serve: Serve, workspace: Path, tmp_path: Path
) -> None:
    """A `Sandbox` given in code replaces the file's `sandbox:` block, not its `workspace:`; one
    with a workspace of its own keeps it."""
    settings = parse_settings(
        {"workspace": str(workspace), "data_dir": str(tmp_path / "data")},
        base_dir=tmp_path,
    )

    async def reply(served: Served, name: str, arguments: dict[str, Any]) -> Any:
        sent = tool_call(f"{name}-1", name, arguments)
        return decode(await served.bus.request("tool", sent))

    code = InteractionWorker(sandbox=Sandbox(tools=["*"], read=True, execute=True))
    served = await serve(build_worker(settings, code))
    assert await reply(served, "cat", {"path": "notes.txt"}) == {
        "callId": "cat-1",
        "source": "cat",
        "status": "success",
        "content": "alpha\nbeta\n",
        "structuredContent": {
            "command": "cat",
            "args": ["--", "notes.txt"],
            "stdout": "alpha\nbeta\n",
            "stderr": "",
            "exitCode": 0,
            "truncated": False,
        },
    }
    read = await reply(served, "read_text", {"path": "src/a.py"})
    assert read.get("content") == "needle = 1\n", read
    pwd = await reply(served, "pwd", {})
    assert pwd.get("content") == f"{workspace}\n", pwd

    own = InteractionWorker(
        sandbox=Sandbox(tools=["*"], execute=True, workspace=workspace / "docs")
    )
    served = await serve(build_worker(settings, own))
    listing = await reply(served, "ls", {})
    assert listing.get("content") == "readme.md\n", listing


async def test_web_search_through_the_bus_on_an_injected_transport(
    serve: Serve,
) -> None:
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        results = [
            {
                "title": "NATS  docs",
                "url": "https://docs.nats.io",
                "description": "Docs",
            },
            {"title": "NATS", "url": "https://nats.io/"},
        ]
        return httpx.Response(200, json={"web": {"results": results}})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    tool = WebSearchTool(BraveSearch(KEY, client=client))
    worker = InteractionWorker(
        tools=[tool], sandbox=Sandbox(tools=["web_search"], network=[BRAVE])
    )
    try:
        served = await serve(worker)
        reply, result, _ = await call(
            served, "ws-1", "web_search", {"query": "nats worker", "limit": 2}
        )
    finally:
        await client.aclose()
    assert decode(reply) == {
        "callId": "ws-1",
        "source": "web_search",
        "status": "success",
        "structuredContent": {
            "query": "nats worker",
            "results": [
                {
                    "title": "NATS docs",
                    "url": "https://docs.nats.io/",
                    "snippet": "Docs",
                },
                {"title": "NATS", "url": "https://nats.io/", "snippet": ""},
            ],
            "truncated": False,
        },
        "references": [{"uri": "https://docs.nats.io/"}, {"uri": "https://nats.io/"}],
    }
    (request,) = requests
    assert request.url.params["q"] == "nats worker"
    assert request.headers["x-subscription-token"] == KEY
    everything = b"".join(m.data for m in served.bus.messages)
    assert KEY.encode() not in everything


async def test_web_search_without_the_network_permission_is_denied_on_the_bus(
    serve: Serve,
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("the provider must not be called")

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    tool = WebSearchTool(BraveSearch(KEY, client=client))
    served = await serve(
        InteractionWorker(tools=[tool], sandbox=Sandbox(tools=["web_search"]))
    )
    bus = served.bus
    reply = await bus.request("tool", tool_call("ws-2", "web_search", {"query": "q"}))
    await client.aclose()
    assert decode(reply) == {
        "error": {
            "code": "PERMISSION_DENIED",
            "message": f"Permission denied: network:{BRAVE}",
        }
    }
    (dead,) = await bus.wait(bus.is_dead)
    assert decode(dead)["callId"] == "ws-2"
