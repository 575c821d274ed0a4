"""`interaction-worker record`: the bus traffic of a prefix to a recording file (replay.md 2)."""

import argparse
import asyncio
import os
import signal
import sys
from datetime import UTC, datetime, timedelta

from nats.aio.client import Client

from ..client.target import Target, connect, find_project, resolve_target
from ..config.values import parse_duration
from ..recording import RecordingHeader
from ..recording.recorder import (
    Ending,
    LiveRecording,
    NoSuchStream,
    RecordingWriter,
    record_stream,
    started_at,
)
from .out_file import OutFile
from .output import UsageError
from .parser import EXIT_FAILED, EXIT_OK, package_version

CLIENT_NAME = "interaction-worker-record"


def record(args: argparse.Namespace) -> int:
    since = _since(args)
    if args.stream is None and args.since is not None:
        raise UsageError("--since needs --stream (a live recording starts now)")
    if args.stream is not None and args.duration is not None:
        raise UsageError("--duration is for live recordings; --stream stops by itself")
    if args.stream is not None and len(args.subject) > 1:
        raise UsageError("--stream takes at most one --subject (the consumer's filter)")
    project = find_project(args.config, env=os.environ, data_dir=args.data_dir)
    target = resolve_target(
        project, os.environ, nats_url=args.nats_url, prefix=args.prefix
    )
    subjects = args.subject or [f"{target.prefix}.>"]
    header = RecordingHeader(
        prefix=target.prefix,
        started_at=started_at(),
        subjects=tuple(subjects),
        recorder=f"interaction-worker {package_version()}",
    )
    out = OutFile(args.out)
    ending, count, where = asyncio.run(
        _record(args, out, target, header, subjects, since)
    )
    print(f"recorded {count} messages to {where}", file=sys.stderr)
    if ending.failed and where != out.name:
        _say(f"{out.name} was left as it was; this recording is in {where}")
    if ending is Ending.SLOW_CONSUMER:
        _say(
            "recording stopped: the recorder could not keep up (slow consumer); the file holds "
            "every message received before the first one lost"
        )
    elif ending is Ending.DISCONNECTED:
        _say(
            "recording stopped: the connection to NATS was lost; the file holds every message "
            "received before"
        )
    return EXIT_FAILED if ending.failed else EXIT_OK


async def _record(
    args: argparse.Namespace,
    out: OutFile,
    target: Target,
    header: RecordingHeader,
    subjects: list[str],
    since: datetime | None,
) -> tuple[Ending, int, str]:
    """Connect, then create the file: a server that cannot be reached leaves no file behind.

    The recording replaces `--out` when it ends as asked (`--count`, `--duration`, a signal, the
    end of the stream); one that fails is kept without replacing it (`OutFile.keep`), and one that
    fails before it is a recording (an unknown stream) is not kept at all."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    live: LiveRecording | None = None

    async def on_error(error: Exception) -> None:
        if live is not None:
            await live.on_error(error)

    async def on_disconnected() -> None:
        if live is not None:
            await live.on_disconnected()

    nc = await connect(
        target, name=CLIENT_NAME, error_cb=on_error, disconnected_cb=on_disconnected
    )
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        try:
            writer = RecordingWriter(out.open(), header, limit=args.count)
            try:
                if args.stream is not None:
                    ending = await _from_stream(args, nc, writer, since, stop)
                else:
                    live = LiveRecording(writer, subjects)
                    ending = await live.run(
                        nc,
                        duration=args.duration,
                        stop=stop,
                        on_ready=lambda: print(
                            f"recording {' '.join(subjects)} to {out.name} (Ctrl-C stops)",
                            file=sys.stderr,
                            flush=True,
                        ),
                    )
            finally:
                writer.flush()
        except BaseException:
            out.abandon()
            raise
        if ending.failed:
            return ending, writer.count, out.keep()
        out.commit()
        return ending, writer.count, out.name
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        await nc.close()


async def _from_stream(
    args: argparse.Namespace,
    nc: Client,
    writer: RecordingWriter,
    since: datetime | None,
    stop: asyncio.Event,
) -> Ending:
    try:
        return await record_stream(
            nc,
            writer,
            args.stream,
            since=since,
            subject=args.subject[0] if args.subject else None,
            stop=stop,
        )
    except NoSuchStream as error:
        raise UsageError(str(error)) from None
    except TimeoutError:
        raise TimeoutError(
            f"the stream {args.stream} stopped sending with messages still to come"
        ) from None


def _since(args: argparse.Namespace) -> datetime | None:
    """RFC 3339 (`2026-11-30T12:00:00Z`), or a duration ago (`15m`)."""
    if args.since is None:
        return None
    text = str(args.since).strip()
    seconds = parse_duration(text)
    if isinstance(seconds, float):
        return datetime.now(UTC) - timedelta(seconds=seconds)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"--since {text!r} is neither a time such as 2026-11-30T12:00:00Z nor a "
            "duration such as 15m"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _say(line: str) -> None:
    print(f"interaction-worker: {line}", file=sys.stderr)
