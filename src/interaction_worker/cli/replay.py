"""`replay`: a recording's events published again, or with `--requests` its requests sent to the
serving worker and their outcomes compared (replay.md 3-4).

The whole file is checked before connecting, so a bad file publishes nothing. The target prefix is
`--prefix`, else the recording's own: a recording is replayed where it was made unless told
otherwise, whatever prefix the nearest worker.yaml names.
"""

import argparse
import asyncio
import json
import sys

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from ..client import InteractionClient
from ..recording import ReplayReport
from ..recording.compare import Ignored
from ..recording.events import plan_events, publish_events
from ..recording.families import request_kind
from ..recording.format import Recording, RecordingError, read_recording
from ..recording.requests import replay_requests
from .output import UsageError

CLIENT_NAME = "interaction-worker-replay"
# Options of one mode given in the other: refused rather than silently ignored.
_EVENTS_ONLY = {"speed": "--speed", "only": "--only"}
_REQUESTS_ONLY = {
    "compare": "--compare",
    "id_suffix": "--id-suffix",
    "ignore": "--ignore",
}


def replay(args: argparse.Namespace) -> int:
    recording = _checked(args)
    prefix = args.prefix or recording.header.prefix
    if args.requests:
        return asyncio.run(_requests(args, recording, prefix))
    count = asyncio.run(_events(args, recording, prefix))
    print(f"replayed {count} events from {args.file}", file=sys.stderr, flush=True)
    return 0


def _checked(args: argparse.Namespace) -> Recording:
    """The recording, and the options, checked before connecting: a mistake sends nothing."""
    other = _EVENTS_ONLY if args.requests else _REQUESTS_ONLY
    misplaced = [flag for name, flag in other.items() if getattr(args, name)]
    if misplaced:
        mode = "the events replay" if args.requests else "--requests"
        raise UsageError(f"{', '.join(misplaced)}: only with {mode}")
    if args.id_suffix == "":
        raise UsageError("--id-suffix must not be empty")
    try:
        Ignored(args.ignore)
    except ValueError as error:
        raise UsageError(f"--ignore: {error}") from None
    try:
        recording = read_recording(args.file)
        if not args.requests:
            plan_events(recording, speed=args.speed, only=args.only)
    except RecordingError as error:
        raise UsageError(str(error)) from None
    return recording


async def _connect(args: argparse.Namespace, prefix: str) -> InteractionClient:
    return await InteractionClient.connect(
        args.nats_url,
        args.config,
        data_dir=args.data_dir,
        prefix=prefix,
        timeout=args.timeout,
        name=CLIENT_NAME,
    )


async def _events(args: argparse.Namespace, recording: Recording, prefix: str) -> int:
    async with await _connect(args, prefix) as client:
        return await publish_events(
            client.nc, recording, prefix=prefix, speed=args.speed, only=args.only
        )


async def _requests(args: argparse.Namespace, recording: Recording, prefix: str) -> int:
    bar = _bar() if sys.stderr.isatty() and not args.no_progress else None
    printed = 0

    def on_progress(report: ReplayReport) -> None:
        nonlocal printed
        for difference in report.differences[printed:]:
            _print_line(json.dumps(difference.to_wire(), ensure_ascii=False), bar)
        printed = len(report.differences)
        if bar is not None:
            bar.update(
                bar.task_ids[0],
                total=report.total,
                completed=report.done,
                different=report.different,
            )

    async with await _connect(args, prefix) as client:
        if bar is not None:
            requests = sum(
                request_kind(m.subject, recording.header.prefix) is not None
                for m in recording.messages
            )
            bar.add_task("replay", total=requests, different=0)
            bar.start()
        try:
            report = await replay_requests(
                client,
                recording,
                compare=args.compare,
                id_suffix=args.id_suffix,
                concurrency=args.concurrency,
                ignore=args.ignore,
                on_progress=on_progress,
            )
        finally:
            if bar is not None:
                bar.stop()
    print(report.summary(), file=sys.stderr, flush=True)
    return report.exit_code


def _print_line(line: str, bar: Progress | None) -> None:
    if bar is not None and sys.stdout.isatty():
        # The live bar redraws over the terminal's last lines: a line bound for the same screen
        # goes through its console, above it, or the next redraw would wipe it.
        bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
        return
    print(line, flush=True)


class _Rate(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("- req/s" if speed is None else f"{speed:,.0f} req/s")


def _bar() -> Progress:
    return Progress(
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        _Rate(),
        TextColumn("{task.fields[different]} different"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        # Differences are the command's output: stdout stays stdout, not the bar's console.
        redirect_stdout=False,
        redirect_stderr=False,
    )
