"""Recording bus traffic on a real nats-server (replay.md 2): live, cut by a signal, bounded by count
and duration, from a JetStream stream, and ending honestly when it cannot keep up or loses the server."""

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext
from dataclasses import replace
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path

import anyio
import nats
import pytest
from bus_harness import Running, running_service, unique_prefix
from nats.aio.client import Client

from interaction_worker.app import serve_options
from interaction_worker.cli import main
from interaction_worker.client import InteractionClient, InteractionRequestError
from interaction_worker.config import parse_settings
from interaction_worker.recording import (
    Recording,
    RecordingHeader,
    parse_recording,
    read_recording,
    replay_requests,
)
from interaction_worker.recording.recorder import (
    Ending,
    LiveRecording,
    RecordingWriter,
)
from interaction_worker.testing import NatsServerFactory

pytest_plugins = ["bus_fixtures"]

CLI = [sys.executable, "-m", "interaction_worker.cli"]
# Every command names its configuration (an empty one: /dev/null), so no worker.yaml in a parent
# directory of the test's can change it.
NO_FILE = ["--config", os.devnull]
WAIT = 20.0


@asynccontextmanager
async def served(nats_url: str, workspace: Path) -> AsyncIterator[Running]:
    (workspace / "a.txt").write_text("alpha\n", encoding="utf-8")
    config = parse_settings(
        {
            "nats": {"url": nats_url},
            "subjects": {"prefix": unique_prefix()},
        },
        base_dir=workspace,
    )
    options = replace(serve_options(config, {}), shutdown_grace=0.2)
    async with running_service(config, options) as running:
        yield running


@contextmanager
def recorder(*args: str) -> Iterator[subprocess.Popen[str]]:
    """`interaction-worker record ARGS`, once it says it is recording; killed if the test fails."""
    proc = subprocess.Popen(
        [*CLI, "record", *args, *NO_FILE],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first.startswith("recording "), first + proc.stderr.read()
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def finish(proc: subprocess.Popen[str], signum: int | None = None) -> tuple[int, str]:
    if signum is not None:
        proc.send_signal(signum)
    _, err = proc.communicate(timeout=WAIT)
    return proc.returncode, err


def header(prefix: str) -> RecordingHeader:
    return RecordingHeader(prefix, "2026-12-01T00:00:00.000Z", (f"{prefix}.>",), "test")


async def session(client: InteractionClient, nc: Client, prefix: str) -> None:
    """Calls (one succeeding, one failing), a refusal, a delivery, and two messages no client would
    send well: one with credentials in its headers, one whose body is not UTF-8."""
    await client.call_tool("read_text", path="a.txt", call_id="ok-1")
    await client.call_tool("read_text", path="missing.txt", call_id="failed-1")
    try:
        await client.call_tool("no_such_tool", call_id="refused-1")
    except InteractionRequestError as error:
        assert error.code == "PERMISSION_DENIED"
    else:
        raise AssertionError("the unknown tool was not refused")
    await client.deliver(
        {"deliveryId": "d-1", "message": {"role": "assistant", "content": "hi"}}
    )
    await nc.publish(
        f"{prefix}.tool.call",
        b'{"call": {"id": "secret-1", "name": "no_such_tool", "arguments": {}}}',
        headers={"Authorization": "Bearer s3cr3t", "X-Api-Key": "k3y", "X-Trace": "t"},
    )
    await nc.publish(f"{prefix}.tool.call", b"\xff\xfe not utf-8")
    await nc.flush()


async def test_a_recording_cut_by_sigterm_holds_the_session_exactly_and_is_valid(
    nats_url: str, nats_client: Client, tmp_path: Path
) -> None:
    out = tmp_path / "session.jsonl"
    async with served(nats_url, tmp_path) as running:
        prefix = running.bus.prefix
        client = InteractionClient(nats_client, prefix=prefix, timeout=WAIT)
        with recorder(
            "--out", str(out), "--nats-url", nats_url, "--prefix", prefix
        ) as proc:
            await session(client, nats_client, prefix)
            # Every message of the session, seen by a client subscribed since the start.
            await running.bus.wait(lambda m: m.subject.startswith(f"{prefix}.dead."), 3)
            seen = list(running.bus.messages)
            await asyncio.sleep(0.3)  # the recorder is another client: let it catch up
            code, err = finish(proc, signal.SIGTERM)
        # The recording, as made, is the fixture: its requests again, to the same worker.
        report = await replay_requests(client, read_recording(out))
        await client.close()

    assert (report.identical, report.total) == (6, 6), report.summary()
    assert code == 0, err
    recording = read_recording(out)
    assert err.strip().splitlines()[-1] == (
        f"recorded {len(recording.messages)} messages to {out}"
    )
    assert recording.header.prefix == prefix
    assert recording.header.subjects == (f"{prefix}.>",)
    expected = [m for m in seen if not m.subject.startswith(f"{prefix}.reply.")]
    assert [m.subject for m in recording.messages] == [m.subject for m in expected]
    assert [m.data for m in recording.messages] == [m.data for m in expected]
    assert [m.seq for m in recording.messages] == list(range(1, len(expected) + 1))
    requests = [m for m in recording.messages if m.subject == f"{prefix}.tool.call"]
    assert [m.reply for m in requests] == [True, True, True, False, False]
    secret = requests[3]
    assert secret.headers == {
        "Authorization": "[redacted]",
        "X-Api-Key": "[redacted]",
        "X-Trace": "t",
    }
    assert b"s3cr3t" not in out.read_bytes() and b"k3y" not in out.read_bytes()
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    not_text = next(line for line in lines if "body_b64" in line)
    assert base64.b64decode(not_text["body_b64"]) == b"\xff\xfe not utf-8"
    assert "body" not in not_text
    stamps = [datetime.fromisoformat(m.at) for m in recording.messages]
    assert stamps == sorted(stamps) and all(s.tzinfo == UTC for s in stamps)


async def test_record_stops_after_count_messages_and_after_its_duration(
    nats_url: str, nats_client: Client, tmp_path: Path
) -> None:
    prefix = unique_prefix()
    counted, timed = tmp_path / "counted.jsonl", tmp_path / "timed.jsonl"
    where = ["--nats-url", nats_url, "--prefix", prefix]
    with (
        recorder("--out", str(counted), "--count", "3", *where) as by_count,
        recorder("--out", str(timed), "--duration", "1500ms", *where) as by_time,
    ):
        started = time.monotonic()
        for n in range(5):
            await nats_client.publish(f"{prefix}.tool.result.c{n}", str(n).encode())
        await nats_client.flush()
        count_code, _ = finish(by_count)
        time_code, _ = finish(by_time)
        elapsed = time.monotonic() - started

    assert (count_code, time_code) == (0, 0)
    assert [m.data for m in read_recording(counted).messages] == [b"0", b"1", b"2"]
    assert len(read_recording(timed).messages) == 5
    assert 1.0 < elapsed < 10.0


async def test_a_slow_consumer_ends_the_recording_before_the_first_lost_message(
    nats_url: str, nats_client: Client
) -> None:
    prefix = unique_prefix()
    out = BytesIO()
    writer = RecordingWriter(out, header(prefix))
    live = LiveRecording(writer, [f"{prefix}.>"], pending_messages=4)
    listener = await nats.connect(nats_url, error_cb=live.on_error)
    ready = asyncio.Event()
    try:
        task = asyncio.create_task(listener_run(live, listener, ready))
        await ready.wait()
        total = 2_000
        for n in range(total):  # one burst: the recorder's queue of 4 overflows
            await nats_client.publish(f"{prefix}.tool.result.c{n}", str(n).encode())
        await nats_client.flush()
        with anyio.fail_after(WAIT):
            ending = await task
    finally:
        await listener.close()

    assert ending is Ending.SLOW_CONSUMER
    recording = parse(out)
    kept = [int(m.data) for m in recording.messages]
    assert 0 < len(kept) < total
    assert kept == list(range(len(kept))), "a recording with a hole in it"


async def listener_run(live: LiveRecording, nc: Client, ready: asyncio.Event) -> Ending:
    return await live.run(nc, on_ready=ready.set)


def parse(out: BytesIO) -> Recording:
    return parse_recording(out.getvalue().split(b"\n"))


async def test_a_lost_server_ends_the_recording_with_exit_1_and_a_valid_file(
    nats_server_factory: NatsServerFactory, tmp_path: Path
) -> None:
    server = nats_server_factory()
    prefix = unique_prefix()
    out = tmp_path / "cut.jsonl"
    with recorder(
        "--out", str(out), "--nats-url", server.url, "--prefix", prefix
    ) as proc:
        publisher = await nats.connect(server.url)
        await publisher.publish(f"{prefix}.tool.result.c1", b"before")
        await publisher.flush()
        await asyncio.sleep(0.3)
        await publisher.close()
        nats_server_factory.stop(server)
        code, err = finish(proc)

    assert code == 1
    assert "connection to NATS was lost" in err
    assert [m.data for m in read_recording(out).messages] == [b"before"]


async def test_record_reads_a_streams_history_from_a_time_and_stops_at_its_last_message(
    nats_client: Client, nats_url: str, tmp_path: Path
) -> None:
    prefix = unique_prefix()
    stream = f"REC_{prefix}"
    js = nats_client.jetstream()
    await js.add_stream(name=stream, subjects=[f"{prefix}.>"])
    for n in range(3):
        await js.publish(f"{prefix}.tool.result.early{n}", f"early {n}".encode())
    await asyncio.sleep(
        1.1
    )  # stored times are to the nanosecond; a clear gap to cut at
    middle = datetime.now(UTC)
    for n in range(4):
        await js.publish(
            f"{prefix}.tool.result.late{n}",
            f"late {n}".encode(),
            headers={"X-Token": "t0k", "X-N": str(n)},
        )
    where = ["--nats-url", nats_url, "--prefix", prefix, "--stream", stream]

    def run(out: Path, *more: str) -> tuple[int, str]:
        done = subprocess.run(
            [*CLI, "record", "--out", str(out), *where, *more, *NO_FILE],
            capture_output=True,
            text=True,
            timeout=WAIT,
            stdin=subprocess.DEVNULL,
        )
        return done.returncode, done.stderr

    everything, later, future = (
        tmp_path / f"{n}.jsonl" for n in ("all", "late", "future")
    )
    results = await asyncio.gather(
        asyncio.to_thread(run, everything),
        asyncio.to_thread(run, later, "--since", middle.isoformat()),
        asyncio.to_thread(run, future, "--since", "2999-01-01T00:00:00Z"),
        asyncio.to_thread(run, tmp_path / "x.jsonl", "--since", "yesterday"),
        asyncio.to_thread(
            subprocess.run,
            [
                *CLI,
                "record",
                "--out",
                str(tmp_path / "y.jsonl"),
                "--nats-url",
                nats_url,
                "--stream",
                "NO_SUCH_STREAM",
                *NO_FILE,
            ],
            capture_output=True,
            text=True,
            timeout=WAIT,
        ),
    )
    # Published after the recordings: a recording of history stops at the last message at start.
    await js.publish(f"{prefix}.tool.result.after", b"after")
    await js.delete_stream(stream)

    assert [code for code, _ in results[:3]] == [0, 0, 0], results
    assert [m.data for m in read_recording(everything).messages] == [
        *(f"early {n}".encode() for n in range(3)),
        *(f"late {n}".encode() for n in range(4)),
    ]
    late = read_recording(later).messages
    assert [m.data for m in late] == [f"late {n}".encode() for n in range(4)]
    assert late[0].headers == {"X-Token": "[redacted]", "X-N": "0"}
    assert all(
        datetime.fromisoformat(m.at) >= middle.replace(microsecond=0) for m in late
    )
    assert read_recording(future).messages == ()
    assert results[3][0] == 2 and "--since 'yesterday'" in results[3][1]
    assert results[4].returncode == 2
    assert "no stream named 'NO_SUCH_STREAM'" in results[4].stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--since", "15m"), "--since needs --stream"),
        (("--stream", "S", "--duration", "5s"), "--duration is for live recordings"),
        (
            ("--duration", "soon"),
            "argument --duration: must be a duration such as 500ms",
        ),
        (("--duration", "15"), "argument --duration: must be a duration such as 500ms"),
        (("--count", "0"), "at least 1"),
        (
            ("--stream", "S", "--subject", "a", "--subject", "b"),
            "at most one --subject",
        ),
    ],
)
def test_record_usage_errors_are_one_line_and_exit_2(
    args: tuple[str, ...],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with (
        pytest.raises(SystemExit)
        if args[0] in ("--duration", "--count")
        else nullcontext()
    ):
        code = main(["record", "--out", str(tmp_path / "r.jsonl"), *args, *NO_FILE])
        assert code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "r.jsonl").exists()


def test_record_to_a_path_that_cannot_be_written_is_a_usage_error(
    nats_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "no" / "dir" / "r.jsonl"
    code = main(["record", "--out", str(out), "--nats-url", nats_url, *NO_FILE])

    assert code == 2
    err = capsys.readouterr().err
    assert "cannot write" in err and "No such file" in err
