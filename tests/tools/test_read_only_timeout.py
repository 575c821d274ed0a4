"""A command's time is bounded by `tools.commands.timeout` alone, whatever the worker's
`tool_timeout` (docs/configuration.md: `tool_timeout` is for any other tool). Served on a real
nats-server by either binding, a command outlives a shorter `tool_timeout` and a longer one leaves
COMMAND_TIMEOUT to the executor. In process: the handler arms no `tool_timeout` for any tool
declaring `bounds_own_time`, and a shutdown still cancels it."""

import asyncio
import errno
import json
import os
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import nats
import pytest
from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg

from interaction_worker import InteractionWorker, Sandbox
from interaction_worker.nodes import ToolContext
from interaction_worker.service import ServeOptions, serve
from interaction_worker.subscribers import Incoming, MessageHandler
from interaction_worker.tools import SubprocessExecutor, read_only_command_tools


@pytest.fixture(params=["nats-py", "faststream"])
def binding(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@asynccontextmanager
async def served(
    workspace: Path,
    nats_url: str,
    binding: str,
    *,
    command_timeout: float,
    tool_timeout: float,
) -> AsyncIterator[tuple[Client, str]]:
    """`cat` served under a fresh prefix by `run`'s own `serve` (nats-py) or by the worker's FastStream
    router; a client on the same server."""
    worker = InteractionWorker(
        tools=read_only_command_tools(),
        sandbox=Sandbox(
            tools=["cat"],
            execute=True,
            workspace=workspace,
            executor=SubprocessExecutor(timeout=command_timeout),
        ),
    )
    prefix = f"t-cmd-{uuid.uuid4().hex[:12]}"
    if binding == "faststream":
        async with routed(worker, nats_url, prefix, tool_timeout) as client:
            yield client, prefix
        return
    ready, stop = asyncio.Event(), asyncio.Event()
    options = ServeOptions(url=nats_url, prefix=prefix, tool_timeout=tool_timeout)
    serving = asyncio.create_task(
        serve(
            worker,
            options,
            ready=lambda _: ready.set(),
            stop=stop,
            install_signal_handlers=False,
        )
    )
    client = await nats.connect(nats_url, max_reconnect_attempts=1)
    try:
        async with asyncio.timeout(30):
            await ready.wait()
        yield client, prefix
    finally:
        await client.close()
        stop.set()
        async with asyncio.timeout(30):
            await serving


@asynccontextmanager
async def routed(
    worker: InteractionWorker, nats_url: str, prefix: str, tool_timeout: float
) -> AsyncIterator[Client]:
    broker = NatsBroker(nats_url, logger=None)
    broker.include_router(worker.router(prefix=prefix, tool_timeout=tool_timeout))
    await broker.start()
    try:
        # Twice: nats-py's first PING may overtake the SUBs still in its buffer.
        await broker.connection.flush()
        await broker.connection.flush()
        client = await nats.connect(nats_url, max_reconnect_attempts=1)
        try:
            yield client
        finally:
            await client.close()
    finally:
        await broker.stop()


def cat_fifo(client: Client, prefix: str) -> "asyncio.Task[Msg]":
    call = {"id": "cat-fifo", "name": "cat", "arguments": {"path": "fifo"}}
    body = json.dumps({"call": call}).encode()
    return asyncio.create_task(client.request(f"{prefix}.tool.call", body, timeout=30))


async def write_end(fifo: Path) -> int:
    """The FIFO's write end, once `cat` holds its read end: nothing signals that, so poll."""
    for _ in range(1500):
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as error:
            if error.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
        await asyncio.sleep(0.02)
    raise AssertionError("cat never opened the FIFO")


async def test_a_shorter_tool_timeout_does_not_cut_a_command_short(
    tmp_path: Path, nats_url: str, binding: str
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    worker = served(tmp_path, nats_url, binding, command_timeout=20, tool_timeout=0.2)
    async with worker as (client, prefix):
        reply = cat_fifo(client, prefix)
        writer = await write_end(fifo)
        try:
            # Four tool_timeouts: a call cut by it would have its TOOL_TIMEOUT reply by now.
            done, _ = await asyncio.wait({reply}, timeout=0.8)
            assert not done, json.loads(reply.result().data)
            os.write(writer, b"late\n")
        finally:
            os.close(writer)
        result = json.loads((await reply).data)
    assert (result["status"], result["content"]) == ("success", "late\n")


async def test_a_longer_tool_timeout_leaves_the_command_to_its_own_timeout(
    tmp_path: Path, nats_url: str, binding: str
) -> None:
    os.mkfifo(tmp_path / "fifo")  # nobody writes: cat waits until its own timeout
    worker = served(tmp_path, nats_url, binding, command_timeout=0.3, tool_timeout=30)
    async with worker as (client, prefix):
        result = json.loads((await cat_fifo(client, prefix)).data)
    assert (result["status"], result["error"]["code"]) == ("timeout", "COMMAND_TIMEOUT")


# --- the handler and tools that bound their own time ------------------------------------------------


class Slow:
    """Sleeps `seconds`, recording the deadline it was given and whether it was cancelled."""

    input_schema: Mapping[str, Any] = {"type": "object"}

    def __init__(self, name: str, seconds: float, **declared: Any) -> None:
        self.name = name
        self.seconds = seconds
        for attribute, value in declared.items():
            setattr(self, attribute, value)
        self.started = asyncio.Event()
        self.deadlines: list[float | None] = []
        self.cancelled = False

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.deadlines.append(context.deadline)
        self.started.set()
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return {"status": "success", "content": "done"}


def handler_of(*tools: Slow, tool_timeout: float | None) -> MessageHandler:
    worker = InteractionWorker(tools=tools, sandbox=Sandbox(tools=["*"]))
    return worker.message_handler(prefix="t", tool_timeout=tool_timeout)


async def reply_to(handler: MessageHandler, body: object) -> Any:
    msg = Incoming("t.tool.call", json.dumps(body).encode(), None, "_INBOX.r")
    async with asyncio.timeout(30):
        publishes = await handler.handle("tool", msg)
    target, payload, _ = publishes[0]
    assert target == "_INBOX.r"
    return json.loads(payload)


def call_of(name: str) -> dict[str, Any]:
    return {"call": {"id": f"{name}-1", "name": name, "arguments": {}}}


async def test_tool_timeout_does_not_cut_a_tool_that_bounds_its_own_time() -> None:
    own = Slow("own", 0.4, bounds_own_time=True)
    other = Slow("other", 0.4)
    handler = handler_of(own, other, tool_timeout=0.05)
    own_reply, other_reply = await asyncio.gather(
        reply_to(handler, call_of("own")), reply_to(handler, call_of("other"))
    )
    assert (own_reply["status"], own_reply["content"]) == ("success", "done")
    assert own.deadlines == [None] and not own.cancelled
    assert (other_reply["status"], other_reply["error"]["code"]) == (
        "timeout",
        "TOOL_TIMEOUT",
    )
    assert other.deadlines[0] is not None and other.cancelled


@pytest.mark.parametrize(
    "declared",
    [
        pytest.param({}, id="not-declared"),
        pytest.param({"bounds_own_time": False}, id="declared-false"),
    ],
)
async def test_a_tool_not_bounding_its_own_time_ends_in_tool_timeout(
    declared: dict[str, Any],
) -> None:
    tool = Slow("slow", 5, **declared)
    reply = await reply_to(handler_of(tool, tool_timeout=0.05), call_of("slow"))
    assert (reply["status"], reply["error"]["code"]) == ("timeout", "TOOL_TIMEOUT")
    assert tool.cancelled


async def test_a_shutdown_still_cancels_a_tool_that_bounds_its_own_time() -> None:
    tool = Slow("own", 5, bounds_own_time=True)
    handler = handler_of(tool, tool_timeout=0.05)
    call = asyncio.create_task(reply_to(handler, call_of("own")))
    async with asyncio.timeout(30):
        await tool.started.wait()
    handler.shutting_down = True
    call.cancel()
    reply = await call
    assert (reply["status"], reply["error"]["code"]) == ("cancelled", "WORKER_SHUTDOWN")
    assert tool.cancelled


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"call": ["own"]}, id="call-not-an-object"),
        pytest.param({"call": {"id": "c", "name": ["own"]}}, id="name-a-list"),
        pytest.param({"call": {"id": "c", "name": {"own": 1}}}, id="name-an-object"),
        pytest.param({"call": {"id": "c"}}, id="no-name"),
    ],
)
async def test_a_call_without_a_usable_name_is_still_refused_as_invalid_input(
    body: dict[str, Any],
) -> None:
    tool = Slow("own", 0, bounds_own_time=True)
    reply = await reply_to(handler_of(tool, tool_timeout=0.05), body)
    assert reply["error"]["code"] == "INVALID_INPUT"
    assert tool.deadlines == []


def test_the_worker_answers_for_its_registry() -> None:
    worker = InteractionWorker(
        tools=[Slow("own", 0, bounds_own_time=True), Slow("other", 0)]
    )
    assert worker.bounds_own_time("own") is True
    assert worker.bounds_own_time("other") is False
    assert worker.bounds_own_time("missing") is False
    unregister = worker.tools.register(Slow("later", 0, bounds_own_time=True))
    assert worker.bounds_own_time("later") is True
    unregister()
    assert worker.bounds_own_time("later") is False
