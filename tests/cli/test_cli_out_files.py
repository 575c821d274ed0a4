"""Nothing the user has is destroyed by a command that writes files (docs/cli.md, docs/replay.md 2).

`record --out FILE` replaces FILE only with a recording that ended as asked: one that fails (an
unknown stream, a server gone) leaves an existing FILE as it was, and keeps what it recorded beside
it; `--out -` is stdout, and a FILE that is not a regular file is written, never replaced.
`schema --out DIR` replaces only the files it wrote before, and removes none.
"""

import asyncio
import json
import os
import stat
import time
from pathlib import Path

import nats
import pytest
from test_cli import finish, spawn
from test_cli_first_hour import in_process

from interaction_worker.testing import NatsServer, NatsServerFactory

OLD = '{"format": "interaction-recording", "version": 1, "prefix": "earlier"}\n'
BOUND = 30.0


def recording_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def record(
    argv: list[str], capsys: pytest.CaptureFixture[str], cwd: Path
) -> tuple[int, str, str]:
    """`record ARGV` in process, reading `cwd`'s (empty) worker.yaml."""
    (cwd / "worker.yaml").write_text("", encoding="utf-8")
    done = in_process(["record", *argv], capsys, cwd=cwd)
    return done.code, done.out, done.err


def test_a_recording_that_fails_leaves_the_earlier_file_as_it_was(
    nats_server: NatsServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    earlier = tmp_path / "session.jsonl"
    earlier.write_text(OLD, encoding="utf-8")

    code, _, err = record(
        ["--out", str(earlier), "--nats-url", nats_server.url, "--stream", "NOPE"],
        capsys,
        tmp_path,
    )

    assert code == 2, err
    assert "no stream named 'NOPE'" in err
    assert earlier.read_text(encoding="utf-8") == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "session.jsonl",
        "worker.yaml",
    ]


async def publish(url: str, subjects: list[str], stream: str | None = None) -> None:
    """A message on each subject; with `stream`, a stream capturing them is made first."""
    nc = await nats.connect(url)
    try:
        if stream is not None:
            await nc.jetstream().add_stream(name=stream, subjects=subjects)
        for subject in subjects:
            await nc.publish(subject, b'{"status": "success"}')
        await nc.flush()
    finally:
        await nc.close()


def partial_lines(directory: Path) -> int:
    kept = list(directory.glob("session.jsonl.*.partial"))
    return kept[0].read_text(encoding="utf-8").count("\n") if kept else 0


@pytest.mark.slow  # a server killed under a recorder in a subprocess: a few seconds
def test_a_recording_cut_by_a_lost_server_is_kept_beside_the_earlier_file(
    nats_server_factory: NatsServerFactory, tmp_path: Path
) -> None:
    server = nats_server_factory()
    earlier = tmp_path / "session.jsonl"
    earlier.write_text(OLD, encoding="utf-8")
    recorder = spawn(
        ["record", "--out", str(earlier), "--nats-url", server.url], tmp_path
    )
    try:
        assert recorder.stderr is not None
        first = (
            recorder.stderr.readline()
        )  # bounded by COMMAND_BOUND in `finish`, else pytest's
        assert first.startswith("recording interaction.> to "), first
        asyncio.run(
            publish(server.url, [f"interaction.tool.result.r-{n}" for n in range(2)])
        )
        # Flushed at least every second: the header and both messages, beside FILE.
        deadline = time.monotonic() + BOUND
        while partial_lines(tmp_path) < 3:
            assert time.monotonic() < deadline, "the recorder never wrote the messages"
            time.sleep(0.05)
        server.process.kill()
        done = finish(recorder)
    finally:
        if recorder.poll() is None:
            recorder.kill()
            recorder.communicate()

    assert done.code == 1, done.err
    assert earlier.read_text(encoding="utf-8") == OLD
    (kept,) = tmp_path.glob("session.jsonl.*.partial")
    header, *messages = recording_lines(kept.read_text(encoding="utf-8"))
    assert header["prefix"] == "interaction"
    assert [m["subject"] for m in messages] == [
        "interaction.tool.result.r-0",
        "interaction.tool.result.r-1",
    ]
    assert f"recorded 2 messages to {kept}" in done.err
    assert f"{earlier} was left as it was; this recording is in {kept}" in done.err
    assert "Traceback" not in done.err


def test_out_dash_is_stdout_and_a_device_is_written_not_replaced(
    nats_server: NatsServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = f"OUT{os.getpid()}x{time.monotonic_ns()}"
    subject = f"{stream.lower()}.tool.result.r-1"
    asyncio.run(publish(nats_server.url, [subject], stream))
    where = ["--nats-url", nats_server.url, "--stream", stream]

    code, out, err = record(["--out", "-", *where], capsys, tmp_path)
    device = record(["--out", os.devnull, *where], capsys, tmp_path)

    assert code == 0, err
    header, message = recording_lines(out)
    assert header["format"] == "interaction-recording"
    assert message["subject"] == subject
    assert "recorded 1 messages to stdout" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "worker.yaml"
    ]  # no file named -
    assert device[0] == 0, device[2]
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_schema_out_replaces_only_the_files_it_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs = {"asyncapi": "3.0.0", "info": {"title": "orders", "version": "2"}}
    (tmp_path / "asyncapi.json").write_text(json.dumps(theirs), encoding="utf-8")
    own = (
        '{"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Order"}'
    )
    (tmp_path / "Order.schema.json").write_text(own, encoding="utf-8")

    refused = in_process(["schema", "--out", str(tmp_path)], capsys)
    untouched = sorted(p.name for p in tmp_path.iterdir())
    (tmp_path / "asyncapi.json").unlink()
    written = in_process(["schema", "--out", str(tmp_path)], capsys)
    again = in_process(["schema", "--out", str(tmp_path)], capsys)

    assert refused.code == 2
    assert refused.err == (
        f"interaction-worker: --out {tmp_path}: asyncapi.json there is not a file this command "
        "wrote; it is left as it is (choose another directory, or move it away)\n"
    )
    assert untouched == ["Order.schema.json", "asyncapi.json"]  # nothing written either
    assert written.code == again.code == 0, written.err + again.err
    assert (tmp_path / "Order.schema.json").read_text(encoding="utf-8") == own
    assert json.loads((tmp_path / "asyncapi.json").read_text())["info"]["title"] == (
        "interaction-worker"
    )
    assert not [
        p for p in tmp_path.iterdir() if p.name.startswith(".")
    ]  # nothing left aside
