"""A command's time is bounded by `tools.commands.timeout` alone, whatever the worker's `tool_timeout`
(config.md: `tool_timeout` is for any other tool). Served on a real nats-server, a command outlives a
shorter `tool_timeout` and a longer one leaves COMMAND_TIMEOUT to the executor; in process, any
cancellation that is not the deadline's still stops the command."""

import asyncio
import errno
import json
import os
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from interaction_worker import InteractionWorker, Sandbox
from interaction_worker.nodes import CommandResult, ToolContext
from interaction_worker.service import ServeOptions, serve
from interaction_worker.tools import SubprocessExecutor, read_only_command_tools


@asynccontextmanager
async def served(
    workspace: Path, nats_url: str, *, command_timeout: float, tool_timeout: float
) -> AsyncIterator[tuple[Client, str]]:
    """`cat` served by `run`'s own `serve` under a fresh prefix; a client on the same server."""
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
    tmp_path: Path, nats_url: str
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    worker = served(tmp_path, nats_url, command_timeout=20, tool_timeout=0.2)
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
    tmp_path: Path, nats_url: str
) -> None:
    os.mkfifo(tmp_path / "fifo")  # nobody writes: cat waits until its own timeout
    worker = served(tmp_path, nats_url, command_timeout=0.3, tool_timeout=30)
    async with worker as (client, prefix):
        result = json.loads((await cat_fifo(client, prefix)).data)
    assert (result["status"], result["error"]["code"]) == ("timeout", "COMMAND_TIMEOUT")


# --- which cancellations stop a command ---------------------------------------------------------------


class HeldExecutor:
    """Runs nothing: holds each run until `release` is set, and records whether it was cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False

    async def run(
        self, command: str, args: Sequence[str], workspace: Path
    ) -> CommandResult:
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return CommandResult("done\n", "", 0)


async def start_cat(
    tmp_path: Path, deadline_in: float | None
) -> tuple["asyncio.Task[Any]", HeldExecutor]:
    executor = HeldExecutor()
    sandbox = Sandbox(
        tools=["cat"], execute=True, workspace=tmp_path, executor=executor
    )
    (cat,) = (tool for tool in read_only_command_tools() if tool.name == "cat")
    now = asyncio.get_running_loop().time()
    deadline = None if deadline_in is None else now + deadline_in
    context = ToolContext("c", sandbox, deadline=deadline)
    task = asyncio.create_task(cat.execute({"path": "a"}, context))
    async with asyncio.timeout(30):
        await executor.started.wait()
    return task, executor


async def test_the_deadline_s_cancellation_leaves_the_command_running(
    tmp_path: Path,
) -> None:
    task, executor = await start_cat(tmp_path, deadline_in=-1)  # already past it
    task.cancel()
    await asyncio.sleep(0)  # let the cancellation arrive
    assert not task.done() and not executor.cancelled
    executor.release.set()
    async with asyncio.timeout(30):
        outcome = await task
    assert (outcome["status"], outcome["content"]) == ("success", "done\n")


@pytest.mark.parametrize(
    ("deadline_in", "cancellations"),
    [
        pytest.param(60, 1, id="before-the-deadline"),
        pytest.param(None, 1, id="no-deadline"),
        pytest.param(-1, 2, id="a-second-one-past-the-deadline"),
    ],
)
async def test_any_other_cancellation_stops_the_command(
    tmp_path: Path, deadline_in: float | None, cancellations: int
) -> None:
    task, executor = await start_cat(tmp_path, deadline_in)
    for _ in range(cancellations):
        task.cancel()
        await asyncio.sleep(0)
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(30):
            await task
    assert executor.cancelled
