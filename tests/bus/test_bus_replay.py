"""Replaying recorded traffic on a real nats-server (replay.md 3-4): requests sent again to a served
worker and compared, with and without id suffixes against a ledger; events published again into a
subscriber; and the `replay` command in subprocesses: its difference lines, exit codes, refusal of
bad files, and its progress bar on a terminal only.

The recordings are made here, from what a raw client subscribed to `P.>` received while an
`InteractionClient` sent the calls, so they hold exactly what a worker publishes.
"""

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import nats
import pytest
from bus_harness import Running, running_service, settled, unique_prefix
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from interaction_worker.app import serve_options
from interaction_worker.client import InteractionClient, InteractionRequestError
from interaction_worker.config import parse_settings
from interaction_worker.recording import (
    RecordedMessage,
    Recording,
    RecordingHeader,
    publish_events,
    read_recording,
    replay_requests,
)
from interaction_worker.recording.format import encode_line

pytest_plugins = ["bus_fixtures"]

WAIT = 20.0  # seconds; generous for a loaded 2-core machine
CLI = Path(sys.executable).parent / "interaction-worker"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Tape:
    """What a raw client subscribed to a subject receives, kept as recorded messages."""

    def __init__(self) -> None:
        self.messages: list[RecordedMessage] = []
        self._changed = asyncio.Event()
        self._subscriptions: list[Subscription] = []

    async def start(self, client: Client, *subjects: str) -> None:
        for subject in subjects:
            subscription = await client.subscribe(subject, cb=self._on_message)
            self._subscriptions.append(subscription)
        await settled(client)

    async def stop(self) -> None:
        for subscription in self._subscriptions:
            await subscription.unsubscribe()

    async def _on_message(self, msg: Msg) -> None:
        seq = len(self.messages) + 1
        headers = dict(msg.headers) if msg.headers else None
        self.messages.append(
            RecordedMessage(seq, now(), msg.subject, msg.data, headers, bool(msg.reply))
        )
        self._changed.set()

    def subjects(self) -> list[str]:
        return [m.subject for m in self.messages]

    async def wait_for(self, *subjects: str) -> None:
        """Until every one of `subjects` came (a subject named twice: twice)."""
        with anyio.fail_after(WAIT):
            while True:
                seen = self.subjects()
                if all(seen.count(s) >= subjects.count(s) for s in subjects):
                    return
                self._changed.clear()
                await self._changed.wait()

    def write(self, path: Path, prefix: str) -> Path:
        header = RecordingHeader(prefix, now(), (f"{prefix}.>",), "test")
        lines = [encode_line(header.to_wire())]
        lines += [encode_line(m.to_wire()) for m in self.messages]
        path.write_bytes(b"".join(lines))
        return path


@dataclass
class Worker:
    running: Running
    prefix: str
    workspace: Path
    client: InteractionClient


def worker_settings(
    nats_url: str, prefix: str, workspace: Path, **more: Any
) -> dict[str, Any]:
    return {
        "nats": {"url": nats_url},
        "subjects": {"prefix": prefix},
        "workspace": str(workspace),
        "tools": {"read_text": {}},
        "sandbox": {"tools": ["read_text"], "read": True},
        "output": {"sinks": [{"type": "nats", "subject": f"{prefix}-ui.{{key}}"}]},
        **more,
    }


@asynccontextmanager
async def served(nats_url: str, tmp_path: Path, **more: Any) -> AsyncIterator[Worker]:
    """A worker serving read_text over a workspace of two files, and a client of it."""
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    (workspace / "a.txt").write_text("alpha\n", encoding="utf-8")
    (workspace / "b.txt").write_text("beta\n", encoding="utf-8")
    prefix = unique_prefix()
    config = parse_settings(
        worker_settings(nats_url, prefix, workspace, **more), base_dir=tmp_path
    )
    options = replace(serve_options(config, {}), shutdown_grace=0.2)
    async with running_service(config, options) as running:
        nc = await nats.connect(nats_url, max_reconnect_attempts=1)
        try:
            yield Worker(
                running, prefix, workspace, InteractionClient(nc, prefix=prefix)
            )
        finally:
            await nc.close()


async def refused(call: Callable[[], Any]) -> str:
    with pytest.raises(InteractionRequestError) as error:
        await call()
    return error.value.code


async def record_session(worker: Worker, nc: Client) -> Tape:
    """Calls of each kind, as a recorder subscribed to `P.>` receives them."""
    tape = Tape()
    await tape.start(nc, f"{worker.prefix}.>")
    client, p = worker.client, worker.prefix
    first = await client.call_tool("read_text", path="a.txt", call_id="c-1")
    await client.call_tool("read_text", path="b.txt", call_id="c-2")
    await client.call_tool("read_text", path="a.txt", call_id="c-1")
    assert (
        await refused(lambda: client.call_tool("nope", call_id="c-3"))
        == "PERMISSION_DENIED"
    )
    blank = b'{"call": {"id": "", "name": "read_text", "arguments": {}}}'
    assert "Nats-Service-Error" in (
        (await client.send("tool.call", blank)).headers or {}
    )
    await client.call_tool("read_text", path="missing.txt", call_id="c-4")
    receipt = await client.deliver(
        {"deliveryId": "d-1", "message": {"role": "assistant", "content": "hi"}}
    )
    assert receipt.status == "accepted"
    await client.observe(first.result)
    # No MCP server is configured: the discover is refused, and its dead letter keyed `=` as the
    # blank call id's is; it must not be taken for that call's outcome.
    assert await refused(lambda: client.mcp_discover()) == "NOT_FOUND"
    await tape.wait_for(
        *[f"{p}.tool.observation.{k}" for k in ("c-1", "c-1", "c-2", "c-4")],
        f"{p}.dead.tool.c-3",
        f"{p}.dead.tool.=",
        f"{p}.output.receipt.d-1",
        f"{p}.observe",
        f"{p}.dead.mcp.=",
    )
    return tape


def seq_of(recording: Recording, subject_end: str, body_part: str) -> int:
    (seq,) = [
        m.seq
        for m in recording.messages
        if m.subject.endswith(subject_end) and body_part.encode() in m.data
    ]
    return seq


async def test_replayed_requests_compare_identical_and_a_changed_file_differs_where_it_changed(
    nats_url: str, nats_client: Client, tmp_path: Path
) -> None:
    async with served(nats_url, tmp_path) as worker:
        tape = await record_session(worker, nats_client)
        path = tape.write(tmp_path / "session.jsonl", worker.prefix)
        recording = read_recording(path)
        again = Tape()
        await again.start(nats_client, f"{worker.prefix}.tool.result.*")

        same = await replay_requests(worker.client, recording)
        (worker.workspace / "b.txt").write_text("BETA\n", encoding="utf-8")
        changed = await replay_requests(worker.client, recording)
        ignoring = await replay_requests(
            worker.client, recording, ignore=["content"], concurrency=1
        )

    assert same.summary() == (
        "replayed 9 requests: 7 identical, 0 different, 2 not compared, 0 errors"
    )
    same.assert_identical()
    # The replay reached the worker: each call's result was published again, twice more.
    assert again.subjects().count(f"{worker.prefix}.tool.result.c-1") == 6
    b_call = seq_of(recording, ".tool.call", '"b.txt"')
    assert [(d.seq, d.id, d.path) for d in changed.differences] == [
        (b_call, "c-2", "content")
    ]
    (difference,) = changed.differences
    assert (difference.recorded, difference.replayed) == ("beta\n", "BETA\n")
    assert difference.subject == f"{worker.prefix}.tool.call"
    assert (changed.identical, changed.different, changed.exit_code) == (6, 1, 1)
    with pytest.raises(AssertionError, match='id "c-2" path content'):
        changed.assert_identical()
    assert ignoring.exit_code == 0


async def test_an_id_suffix_runs_every_call_afresh_on_a_ledger_and_compares_identical(
    nats_url: str, nats_client: Client, tmp_path: Path
) -> None:
    ledger = {
        "enabled": True,
        "bucket": f"ledger-{uuid.uuid4().hex[:12]}",
        "ttl": "60s",
    }
    async with served(nats_url, tmp_path, idempotency=ledger) as worker:
        client, p = worker.client, worker.prefix
        tape = Tape()
        await tape.start(nats_client, f"{p}.>")
        await client.call_tool("read_text", path="a.txt", call_id="c-1")
        await client.deliver(
            {"deliveryId": "d-1", "message": {"role": "user", "content": "x"}}
        )
        await tape.wait_for(f"{p}.tool.observation.c-1", f"{p}.output.receipt.d-1")
        recording = read_recording(tape.write(tmp_path / "ledger.jsonl", p))
        seen = Tape()
        await seen.start(nats_client, f"{p}.tool.result.>", f"{p}.output.receipt.>")

        fresh = await replay_requests(client, recording, id_suffix="-r1")
        await seen.wait_for(f"{p}.tool.result.c-1-r1", f"{p}.output.receipt.d-1-r1")
        (worker.workspace / "a.txt").write_text("changed\n", encoding="utf-8")
        kept = await replay_requests(client, recording)
        rerun = await replay_requests(client, recording, id_suffix="-r2")

    fresh.assert_identical()
    assert fresh.identical == 2
    # Without a suffix the ledger answers with the recorded outcome, however the file changed...
    kept.assert_identical()
    # ...and with a new one the call runs again, and reads the file as it is now.
    assert [(d.id, d.path, d.replayed) for d in rerun.differences] == [
        ("c-1", "content", "changed\n")
    ]


EVENTS_PREFIX = "rec"


def events_recording(path: Path, outside: str) -> Path:
    """A recording of each kind of subject: events, requests and replies to skip, and a nats
    sink's delivery recorded outside the prefix."""
    lines: list[tuple[str, bytes, Mapping[str, str | list[str]] | None]] = [
        ("rec.tool.call", b'{"call": {}}', {"Interaction-Reply-To": "_INBOX.x"}),
        ("rec.tool.result.c-1", b'{"callId": "c-1"}', {"Interaction-Key": "c-1"}),
        ("rec.tool.observation.c-1", b'{ "spaced" : 1 }', {"Multi": ["a", "b"]}),
        ("rec.tool.list", b"{}", None),
        ("rec.mcp.result.m-1", b'{"callId": "m-1"}', None),
        (f"{outside}.d-1", b"\xffnot utf-8", None),
        ("rec.output.receipt.d-1", b'{"deliveryId": "d-1"}', None),
        ("rec.command.done.reply.k", b'{"id": "reply"}', None),
        ("rec.reply.1", b"{}", None),
        ("rec.dead.tool.=", b'{"error": {"code": "INVALID_JSON"}}', {"A": "1"}),
    ]
    header = RecordingHeader(EVENTS_PREFIX, now(), ("rec.>",), "test")
    messages = [
        RecordedMessage(seq, f"2026-11-30T12:00:00.{seq:03d}Z", s, d, h)
        for seq, (s, d, h) in enumerate(lines, start=1)
    ]
    encoded = [encode_line(m.to_wire()) for m in messages]
    path.write_bytes(encode_line(header.to_wire()) + b"".join(encoded))
    return path


async def test_events_are_published_again_as_recorded_under_the_prefix_asked_for(
    nats_url: str, nats_client: Client, tmp_path: Path
) -> None:
    prefix, outside = unique_prefix(), unique_prefix()
    recording = read_recording(events_recording(tmp_path / "e.jsonl", outside))
    received: list[Msg] = []

    async def on(msg: Msg) -> None:
        if msg.subject.startswith((f"{prefix}.", f"{outside}.", "rec.")):
            received.append(msg)

    # One subscription: nats-py runs each subscription's callbacks apart, in no common order.
    await nats_client.subscribe(">", cb=on)
    await settled(nats_client)
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    async with await nats.connect(nats_url) as publisher:
        count = await publish_events(
            publisher, recording, prefix=prefix, speed=0.5, sleep=sleep
        )
        only = await publish_events(
            publisher, recording, prefix=prefix, only=["dead", "mcp"]
        )
    await settled(nats_client)

    assert count == 7
    assert [(m.subject, m.data, m.headers) for m in received] == [
        (f"{prefix}.tool.result.c-1", b'{"callId": "c-1"}', {"Interaction-Key": "c-1"}),
        (f"{prefix}.tool.observation.c-1", b'{ "spaced" : 1 }', {"Multi": "a, b"}),
        (f"{prefix}.mcp.result.m-1", b'{"callId": "m-1"}', None),
        (f"{outside}.d-1", b"\xffnot utf-8", None),
        (f"{prefix}.output.receipt.d-1", b'{"deliveryId": "d-1"}', None),
        (f"{prefix}.command.done.reply.k", b'{"id": "reply"}', None),
        (f"{prefix}.dead.tool.=", b'{"error": {"code": "INVALID_JSON"}}', {"A": "1"}),
        (f"{prefix}.mcp.result.m-1", b'{"callId": "m-1"}', None),
        (f"{prefix}.dead.tool.=", b'{"error": {"code": "INVALID_JSON"}}', {"A": "1"}),
    ]
    assert only == 2
    # The recorded gaps between the events (seqs 2 3 5 6 7 8 10, 1 ms apart) doubled.
    assert delays == pytest.approx([0.002, 0.004, 0.002, 0.002, 0.002, 0.004])


# --- the command ----------------------------------------------------------------------------------


@dataclass
class Done:
    code: int
    out: str
    err: str


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERACTION_")}
    env["COLUMNS"] = "120"  # a pseudo-terminal from openpty() has no size
    # An empty configuration, named: never a worker.yaml found in a parent directory.
    env["INTERACTION_CONFIG"] = os.devnull
    return env


def run_cli(args: Sequence[str], cwd: Path, *, terminal: bool = False) -> Done:
    """`interaction-worker ARGS` in a subprocess; with `terminal`, its stderr is a pseudo-terminal."""
    if not terminal:
        finished = subprocess.run(
            [str(CLI), *args],
            cwd=cwd,
            env=child_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return Done(finished.returncode, finished.stdout, finished.stderr)
    main, child = os.openpty()
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read)
    try:
        with subprocess.Popen(
            [str(CLI), *args],
            cwd=cwd,
            env=child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=child,
            text=True,
        ) as proc:
            os.close(child)
            child = -1
            reader.start()
            out, _ = proc.communicate(timeout=60)
        reader.join(timeout=10)
    finally:
        if child != -1:
            os.close(child)
        os.close(main)
    return Done(proc.returncode, out, b"".join(chunks).decode("utf-8", "replace"))


async def run_all(*jobs: tuple[Sequence[str], bool], cwd: Path) -> list[Done]:
    """The commands side by side: each costs about a second of imports."""
    results: list[Done | None] = [None] * len(jobs)

    async def one(index: int, args: Sequence[str], terminal: bool) -> None:
        results[index] = await anyio.to_thread.run_sync(
            lambda: run_cli(args, cwd, terminal=terminal)
        )

    async with anyio.create_task_group() as group:
        for index, (args, terminal) in enumerate(jobs):
            group.start_soon(one, index, args, terminal)
    return [done for done in results if done is not None]


def doctored(source: Path, target: Path, seq: int, old: bytes, new: bytes) -> Path:
    """`source` with one recorded message's body changed, as if the worker had said `new`."""
    recording = read_recording(source)
    lines = [encode_line(recording.header.to_wire())]
    for message in recording.messages:
        if message.seq == seq:
            assert old in message.data
            message = replace(message, data=message.data.replace(old, new))
        lines.append(encode_line(message.to_wire()))
    target.write_bytes(b"".join(lines))
    return target


async def test_the_command_prints_each_difference_and_the_summary_and_draws_a_bar_on_a_terminal(
    nats_url: str, nats_client: Client, tmp_path: Path
) -> None:
    async with served(nats_url, tmp_path) as worker:
        tape = await record_session(worker, nats_client)
        same = tape.write(tmp_path / "same.jsonl", worker.prefix)
        b_call = seq_of(read_recording(same), ".tool.call", '"b.txt"')
        b_result = seq_of(read_recording(same), ".tool.result.c-2", "beta")
        other = doctored(same, tmp_path / "other.jsonl", b_result, b"beta", b"gamma")
        target = ["--nats-url", nats_url, "--prefix", worker.prefix]
        compare = ["--requests", "--compare", *target]
        different, identical, on_terminal, quiet_terminal, uncompared = await run_all(
            (["replay", str(other), *compare, "--no-progress"], False),
            (["replay", str(same), *compare], False),
            (["replay", str(same), *compare], True),
            (["replay", str(other), *compare, "--no-progress"], True),
            # No --prefix: the recording's own, not the default `interaction`.
            (["replay", str(other), "--requests", "--nats-url", nats_url], False),
            cwd=tmp_path,
        )

    summary = (
        "replayed 9 requests: {} identical, {} different, {} not compared, 0 errors"
    )
    line = {
        "seq": b_call,
        "subject": f"{worker.prefix}.tool.call",
        "id": "c-2",
        "path": "content",
        "recorded": "gamma\n",
        "replayed": "beta\n",
    }
    assert different.code == 1, different.err
    assert [json.loads(x) for x in different.out.splitlines()] == [line]
    assert different.err.splitlines() == [summary.format(6, 1, 2)]
    assert (identical.code, identical.out) == (0, "")
    assert identical.err.splitlines() == [summary.format(7, 0, 2)]  # piped: no bar
    assert on_terminal.code == 0, on_terminal.err
    assert "replaying" in on_terminal.err and "9/9" in on_terminal.err
    assert "req/s" in on_terminal.err and "0 different" in on_terminal.err
    shown = re.sub(
        r"\x1b\[[0-9;?]*[A-Za-z]", "", on_terminal.err
    )  # rich's cursor codes
    assert shown.splitlines()[-1] == summary.format(7, 0, 2)
    assert quiet_terminal.code == 1
    assert quiet_terminal.err.splitlines() == [summary.format(6, 1, 2)]
    assert [json.loads(x) for x in quiet_terminal.out.splitlines()] == [line]
    assert (uncompared.code, uncompared.out) == (0, "")
    assert uncompared.err.splitlines() == [summary.format(0, 0, 9)]


def corrupted(valid: Path, tmp_path: Path) -> dict[str, tuple[Path, str, list[str]]]:
    """Broken copies of `valid`, each with the start of the one line the command must print (the
    file, the line, the reason), and the options that make the fault matter."""
    lines = valid.read_bytes().splitlines(keepends=True)
    header = json.loads(lines[0])
    message = json.loads(lines[4])

    def broken(name: str, at: int, line: bytes | None) -> Path:
        copy = list(lines)
        if line is None:
            del copy[at]
        else:
            copy[at] = line
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(b"".join(copy))
        return path

    no_body = {k: v for k, v in message.items() if k not in ("body", "body_b64")}
    event = json.loads(lines[5])  # seq 5, an MCP result
    undated = broken("time", 5, encode_line({**event, "at": "yesterday"}))
    return {
        "bad json": (
            broken("json", 4, b'{"seq": 4, "at": \n'),
            ":5: not valid JSON",
            [],
        ),
        "gap": (broken("gap", 3, None), ":4: seq 4 where 3 was expected", []),
        "version": (
            broken("version", 0, encode_line({**header, "version": 2})),
            ":1: unknown version 2",
            [],
        ),
        "no body": (
            broken("body", 4, encode_line(no_body)),
            ':5: neither "body" nor "body_b64"',
            [],
        ),
        "missing": (tmp_path / "nothing.jsonl", ": No such file or directory", []),
        # Not a fault of the format, but of what --speed needs: found before the first publish too.
        "time": (undated, ': seq 5: "at" is not an RFC 3339 time', ["--speed", "1"]),
    }


async def test_the_command_publishes_a_files_events_and_nothing_from_a_bad_file(
    nats_url: str, nats_client: Client, tmp_path: Path
) -> None:
    outside, good, bad = unique_prefix(), unique_prefix(), unique_prefix()
    valid = events_recording(tmp_path / "valid.jsonl", outside)
    broken = corrupted(valid, tmp_path)
    received: list[Msg] = []

    async def on(msg: Msg) -> None:
        received.append(msg)

    await nats_client.subscribe(f"{good}.>", cb=on)
    await nats_client.subscribe(f"{bad}.>", cb=on)
    await settled(nats_client)
    at = ["--nats-url", nats_url, "--prefix"]
    done = await run_all(
        (["replay", str(valid), *at, good, "--only", "tool,dead"], False),
        *[
            (["replay", str(path), *at, bad, *options], False)
            for path, _, options in broken.values()
        ],
        cwd=tmp_path,
    )
    await settled(nats_client)

    published, *refused = done
    assert published.code == 0, published.err
    assert published.err == f"replayed 3 events from {valid}\n"
    assert [m.subject for m in received] == [
        f"{good}.tool.result.c-1",
        f"{good}.tool.observation.c-1",
        f"{good}.dead.tool.=",
    ]
    for (name, (path, reason, _)), outcome in zip(broken.items(), refused, strict=True):
        assert outcome.code == 2, (name, outcome.err)
        (line,) = outcome.err.splitlines()
        assert line.startswith(f"interaction-worker: {path}{reason}"), name


LOAD = int(os.environ.get("REPLAY_LOAD_REQUESTS", "2000"))
RAW = "client.send, 16 in flight, replies not judged"


async def raw_sends(
    client: InteractionClient, recording: Recording, concurrency: int
) -> float:
    """Seconds to send the recording's requests with nothing but `client.send`: the baseline the
    replay's own cost (planning, judging) is measured against, in the same run."""
    requests = [m for m in recording.messages if m.subject.endswith(".tool.call")]
    flight = asyncio.Semaphore(concurrency)

    async def one(message: RecordedMessage) -> None:
        async with flight:
            await client.send("tool.call", message.data)

    started = time.perf_counter()
    await asyncio.gather(*(one(m) for m in requests))
    return time.perf_counter() - started


async def test_thousands_of_recorded_requests_replay_and_report_their_rate(
    nats_url: str, nats_client: Client, tmp_path: Path
) -> None:
    async with served(nats_url, tmp_path) as worker:
        p = worker.prefix
        tape = Tape()
        await tape.start(nats_client, f"{p}.tool.result.>")
        await worker.client.call_tool("read_text", path="a.txt", call_id="load-0")
        await tape.wait_for(f"{p}.tool.result.load-0")
        await tape.stop()
        result = json.loads(tape.messages[0].data)
        messages: list[tuple[str, dict[str, Any]]] = []
        for i in range(LOAD):
            call_id = f"load-{i}"
            body = {
                "call": {
                    "id": call_id,
                    "name": "read_text",
                    "arguments": {"path": "a.txt"},
                }
            }
            messages.append((f"{p}.tool.call", body))
            messages.append(
                (f"{p}.tool.result.{call_id}", {**result, "callId": call_id})
            )
        recording = Recording(
            RecordingHeader(p, now(), (f"{p}.>",), "test"),
            [
                RecordedMessage(seq, now(), subject, json.dumps(body).encode())
                for seq, (subject, body) in enumerate(messages, start=1)
            ],
        )
        started = time.perf_counter()
        report = await replay_requests(worker.client, recording)
        seconds = time.perf_counter() - started
        baseline = await raw_sends(worker.client, recording, concurrency=16)

    report.assert_identical()
    assert report.identical == LOAD
    print(
        f"\nreplayed {LOAD} requests in {seconds:.2f} s: {LOAD / seconds:,.0f} requests/s; "
        f"sent raw ({RAW}): {LOAD / baseline:,.0f} requests/s; "
        f"replay / raw = {baseline / seconds:.2f}"
    )
