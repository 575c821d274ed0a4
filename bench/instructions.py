"""`make bench-instructions`: CPU instructions per call, counted by `valgrind --tool=callgrind`.

Timing on a shared machine swings with its neighbours; instruction counts do not. Each subject runs
twice under callgrind, once for `--short` calls and once for `--long`, and the figure is the
difference of the two totals over the difference of the calls: start-up, imports and shutdown are
in both runs and cancel out. The client (this process) and nats-server run outside valgrind.

Subjects:
  worker      the worker's no-op tool call (`bench/responders.py worker`, served as `run` serves it,
              on uvloop), `--window` calls in flight
  raw         the raw nats-py + pydantic responder (`bench/responders.py raw`, asyncio's loop)
  echo        nats-py alone, on uvloop (`bench/responders.py echo`): each request answered with a
              no-op call's three messages and the worker's headers through nats-py's `publish`;
              what receiving a call and publishing its messages cost, nothing of ours
  echo-wire   the same through the worker's publishing adapter (`subscribers/wire_publish.py`),
              when the tree has it
  echo-bytes  the same, the header blocks encoded once at start-up: nats-py's parse and its
              connection's queueing and flushing, and the adapter's framing, nothing else
  publish     nats-py's public `publish` of one call's three messages with the wire's headers
              (reply: 1 header; result and observation events: 5 each), no receiving
  adapter     the same three messages through the worker's publishing adapter, when the tree has it
  worker-ledger
              the no-op tool call with the idempotency ledger on (`bench/responders.py
              worker-ledger`): two acknowledged writes to a key-value bucket per call (the
              no-op tool is read-only: its claim is written `started` at once)
  worker-durable, worker-durable-ledger
              the no-op tool call in durable mode, without and with the ledger: the client publishes
              each call into the calls stream (awaiting its PubAck) and waits for its reply
  kv-create   one key-value write as the ledger made it before: nats-py's `kv.create` of a new key,
              `--window` in flight (a process of its own, no receiving of calls, on uvloop as the
              worker)
  ledger-create
              the same write through the ledger's store (`subscribers/ledger_store.py`): one
              acknowledged publish on the shared reply subscription, when the tree has it
  acked-write the acknowledged write itself (`subscribers/acked_publish.py`): the same publish with
              its expected-revision header, its PubAck awaited and its sequence read, without the
              store's `create` around it

Derived: the worker's own part, everything but nats-py's parse and publish, is `worker - echo`
while the worker publishes through nats-py's `publish`; with the adapter, what the worker adds to
nats-py's parse and queueing (and the adapter's framing) is `worker - echo-bytes`.

`PYTHONHASHSEED=0` in every measured process, so that dict and set layouts repeat run after run.
"""

import argparse
import asyncio
import importlib
import itertools
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import nats

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


from interaction_worker.testing import start_nats_server  # noqa: E402

SUBJECTS = (
    "worker",
    "raw",
    "echo",
    "echo-wire",
    "echo-bytes",
    "publish",
    "adapter",
    "worker-ledger",
    "worker-durable",
    "worker-durable-ledger",
    "kv-create",
    "ledger-create",
    "acked-write",
)
# Measured by default (the write path: one acknowledged write against nats-py's `kv.create`); the
# others when named with `--only`.
DEFAULT_SUBJECTS = (*SUBJECTS[:7], "kv-create", "acked-write")
WIRE_SUBJECTS = (
    "echo-wire",
    "echo-bytes",
    "adapter",
)  # measured when the tree has the adapter
REQUEST_SUBJECTS = {
    "worker": "interaction.tool.call",
    "raw": "bench.raw",
    "echo": "bench.echo",
    "echo-wire": "bench.echo",
    "echo-bytes": "bench.echo",
    "worker-ledger": "interaction.tool.call",
    "worker-durable": "interaction.tool.call",
    "worker-durable-ledger": "interaction.tool.call",
}
# Driven through the calls stream: published with JetStream, answered to Interaction-Reply-To.
DURABLE_SUBJECTS = ("worker-durable", "worker-durable-ledger")
RESPONDER_ARGS = {
    "worker": ("worker",),
    "raw": ("raw",),
    "echo": ("echo", "--loop", "uvloop"),
    "echo-wire": ("echo-wire", "--loop", "uvloop"),
    "echo-bytes": ("echo-bytes", "--loop", "uvloop"),
    "worker-ledger": ("worker-ledger",),
    "worker-durable": ("worker-durable",),
    "worker-durable-ledger": ("worker-durable-ledger",),
}
# Where the measured processes import the package from: this tree, or the one `--tree` names.
TREE: list[Path] = []
# The messages the publishing subjects write (and the echo responders answer with).
call_messages: Any = importlib.import_module("responders").call_messages
CALL_IDS = itertools.count()


def body() -> bytes:
    """A no-op call with an id of its own."""
    call_id = f"call-{next(CALL_IDS)}"
    return json.dumps(
        {"call": {"id": call_id, "name": "noop", "arguments": {}}}
    ).encode()


# Publishes between two passes of the event loop, as the worker's calls at `--window` in flight;
# and the writes in flight of `kv-create` and `ledger-create`.
BATCH = 64
WRITE_SUBJECTS = ("kv-create", "ledger-create", "acked-write")


def callgrind_total(path: Path) -> int:
    """The instructions a callgrind output file counts (its `totals:`, else `summary:` line)."""
    totals = None
    for line in path.read_text().splitlines():
        if line.startswith(("totals:", "summary:")):
            totals = int(line.split()[1])
            if line.startswith("totals:"):
                break
    if totals is None:
        raise SystemExit(f"no totals in {path}")
    return totals


def callgrind(out: Path) -> list[str]:
    return [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        "--dump-instr=no",
        "--dump-line=no",
        "--trace-children=no",
        "--log-file=/dev/null",
    ]


def environment() -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if TREE:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(TREE[0] / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
    return env


# ----------------------------------------------------------------------------- responders


def wait_ready(proc: subprocess.Popen[str], timeout: float) -> None:
    lines: queue.Queue[str] = queue.Queue()

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.strip())

    threading.Thread(target=drain, daemon=True).start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if lines.get(timeout=1) == "ready":
                return
        except queue.Empty:
            if proc.poll() is not None:
                break
    proc.kill()
    raise SystemExit("responder did not start under callgrind")


async def drive(url: str, subject: str, calls: int, window: int) -> None:
    nc = await nats.connect(url)
    counter = iter(range(calls))

    async def lane() -> None:
        for _ in counter:
            await nc.request(subject, body(), timeout=600)

    await asyncio.gather(*(lane() for _ in range(window)))
    await nc.close()


async def drive_durable(url: str, subject: str, calls: int, window: int) -> None:
    """Each call published into the calls stream (its PubAck awaited), with an
    `Interaction-Reply-To` of its own; done when its reply arrives."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=600)
    inbox = nc.new_inbox()
    waiting: dict[str, asyncio.Future[Any]] = {}
    loop = asyncio.get_running_loop()

    async def on_reply(msg: Any) -> None:
        future = waiting.pop(msg.subject, None)
        if future is not None:
            future.set_result(msg)

    await nc.subscribe(f"{inbox}.*", cb=on_reply)
    counter = iter(range(calls))

    async def lane() -> None:
        for index in counter:
            reply_to = f"{inbox}.{index}"
            future = waiting[reply_to] = loop.create_future()
            await js.publish(
                subject, body(), headers={"Interaction-Reply-To": reply_to}
            )
            await asyncio.wait_for(future, 600)

    await asyncio.gather(*(lane() for _ in range(window)))
    await nc.close()


def count_responder(subject: str, url: str, calls: int, window: int, out: Path) -> int:
    proc = subprocess.Popen(
        [
            *callgrind(out),
            sys.executable,
            str(HERE / "responders.py"),
            RESPONDER_ARGS[subject][0],
            url,
            *RESPONDER_ARGS[subject][1:],
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=environment(),
    )
    try:
        wait_ready(proc, timeout=900)
        driver = drive_durable if subject in DURABLE_SUBJECTS else drive
        asyncio.run(driver(url, REQUEST_SUBJECTS[subject], calls, window))
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return callgrind_total(out)


# ----------------------------------------------------------------------------- publishers


async def write_child(url: str, mode: str, calls: int, window: int) -> None:
    """Create `calls` keys of a bucket of this process's own, `window` at a time, and exit: the
    process callgrind counts for `kv-create` and `ledger-create`."""
    nc = await nats.connect(url, skip_subject_validation=True)
    js = nc.jetstream(timeout=600)
    bucket = f"bench_writes_{os.getpid()}"
    kv = await js.create_key_value(bucket=bucket, history=1)
    value = b'{"state":"claimed","worker":"bench","at":"2026-01-01T00:00:00.000Z"}'
    counter = iter(range(calls))
    if mode == "ledger-create":
        from interaction_worker.subscribers.ledger_store import JetStreamStore

        store = JetStreamStore(nc, bucket=bucket, ttl=3600.0, timeout=600.0)
        await store.open()
        create = store.create
    elif mode == "acked-write":
        from interaction_worker.subscribers.acked_publish import AckedPublisher
        from interaction_worker.subscribers.kv_frames import ABSENT, acked_sequence

        publisher = AckedPublisher(nc, timeout=600.0)
        await publisher.open()
        prefix = f"$KV.{bucket}."

        async def create(key: str, value: bytes) -> Any:
            subject = prefix + key
            sent = publisher.write_nowait(subject, value, ABSENT)
            if sent is None:
                sent = await publisher.send_one(subject, value, ABSENT)
            return acked_sequence(await sent)
    else:
        create = kv.create

    async def lane() -> None:
        for index in counter:
            await create(f"k{index}", value)

    await asyncio.gather(*(lane() for _ in range(window)))
    await js.delete_key_value(bucket)
    await nc.close()


async def publish_child(url: str, mode: str, calls: int) -> None:
    """Publish `calls` calls' messages and exit: the process callgrind counts for `publish` and
    `adapter`."""
    if mode in WRITE_SUBJECTS:
        await write_child(url, mode, calls, BATCH)
        return
    nc = await nats.connect(url, skip_subject_validation=True)
    messages = call_messages("_INBOX.bench.reply")
    if mode == "adapter":
        from interaction_worker.subscribers.wire_publish import WirePublisher

        send = WirePublisher(nc).publish
        for index in range(calls):
            await send(messages)
            if index % BATCH == 0:
                await asyncio.sleep(0)
    else:
        publish = nc.publish
        for index in range(calls):
            for subject, payload, headers in messages:
                await publish(subject, payload, headers=headers)
            if index % BATCH == 0:
                await asyncio.sleep(0)
    await nc.flush()
    await nc.close()


def count_publisher(subject: str, url: str, calls: int, out: Path) -> int:
    proc = subprocess.run(
        [
            *callgrind(out),
            sys.executable,
            str(Path(__file__).resolve()),
            "--publish-child",
            subject,
            url,
            str(calls),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environment(),
        timeout=900,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{subject}: the publishing process failed")
    return callgrind_total(out)


# ----------------------------------------------------------------------------- the run


def count(subject: str, url: str, calls: int, window: int, out: Path) -> int:
    if subject in REQUEST_SUBJECTS:
        return count_responder(subject, url, calls, window, out)
    return count_publisher(subject, url, calls, out)


def has_adapter() -> bool:
    try:
        import interaction_worker.subscribers.wire_publish  # noqa: F401
    except ImportError:
        return False
    return True


def measure(
    subjects: Sequence[str], short: int, long: int, window: int, reps: int
) -> dict[str, list[float]]:
    """Each subject's instructions per call, once per repetition; a repetition runs every subject,
    its short run then its long one."""
    figures: dict[str, list[float]] = {subject: [] for subject in subjects}
    with tempfile.TemporaryDirectory() as tmp:
        server = start_nats_server(Path(tmp) / "nats")
        try:
            for rep in range(reps):
                for subject in subjects:
                    totals = []
                    for calls in (short, long):
                        out = Path(tmp) / f"callgrind.{subject}.{rep}.{calls}"
                        totals.append(count(subject, server.url, calls, window, out))
                    per_call = (totals[1] - totals[0]) / (long - short)
                    figures[subject].append(per_call)
                    print(
                        f"  {subject}: {per_call:,.0f} instructions per call "
                        f"({totals[0]:,} for {short}, {totals[1]:,} for {long})",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            server.process.send_signal(signal.SIGTERM)
            server.process.wait(timeout=30)
    return figures


def render(figures: dict[str, list[float]], args: argparse.Namespace) -> str:
    median = {subject: statistics.median(values) for subject, values in figures.items()}
    rows = []

    def row(name: str, value: float, note: str = "") -> None:
        rows.append(f"| {name} | {value:,.0f} | {note} |")

    labels = {
        "worker": "interaction-worker, no-op tool call",
        "raw": "raw nats-py + pydantic",
        "echo": "nats-py echo of a call's 3 messages (`publish`)",
        "echo-wire": "nats-py echo of a call's 3 messages (the adapter)",
        "echo-bytes": "nats-py echo of a call's 3 messages (the adapter, blocks encoded once)",
        "publish": "nats-py `publish` of one call's 3 messages with headers",
        "adapter": "the worker's publishing adapter, the same 3 messages",
        "worker-ledger": "interaction-worker, no-op tool call, idempotency ledger",
        "worker-durable": "interaction-worker, durable mode, no-op tool call",
        "worker-durable-ledger": "interaction-worker, durable mode, idempotency ledger",
        "kv-create": "one key-value write: nats-py `kv.create`",
        "ledger-create": "one key-value write: the ledger store's `create`",
        "acked-write": "one key-value write: the acknowledged publish alone",
    }
    for subject, value in median.items():
        each = ", ".join(f"{v:,.0f}" for v in figures[subject])
        row(labels[subject], value, each if len(figures[subject]) > 1 else "")
    if {"worker", "raw"} <= median.keys():
        rows.append(f"| worker / raw | {median['worker'] / median['raw']:.2f} | |")
    if {"worker", "echo"} <= median.keys() and not has_adapter():
        # The worker publishes through nats-py's `publish` here: the echo is its floor.
        row("the worker's own part (worker − echo)", median["worker"] - median["echo"])
    for write in ("ledger-create", "acked-write"):
        if {"kv-create", write} <= median.keys():
            rows.append(
                f"| {write} / kv-create | {median[write] / median['kv-create']:.2f} | |"
            )
    if {"worker", "worker-ledger"} <= median.keys():
        rows.append(
            "| worker with ledger / worker | "
            f"{median['worker-ledger'] / median['worker']:.2f} | |"
        )
    if {"worker-durable", "worker-durable-ledger"} <= median.keys():
        rows.append(
            "| durable with ledger / durable | "
            f"{median['worker-durable-ledger'] / median['worker-durable']:.2f} | |"
        )
    if {"worker", "echo-bytes"} <= median.keys():
        row(
            "the worker beyond nats-py's parse and queueing (worker − echo-bytes)",
            median["worker"] - median["echo-bytes"],
        )
    header = (
        f"callgrind, `{args.long}` − `{args.short}` calls, {args.window} in flight, "
        f"{args.reps} repetition(s)\n\n"
        "| subject | instructions per call | each repetition |\n|---|---:|---|"
    )
    return header + "\n" + "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--short", type=int, default=500, help="calls of the short run")
    parser.add_argument("--long", type=int, default=2500, help="calls of the long run")
    parser.add_argument("--window", type=int, default=64, help="calls in flight")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument(
        "--only",
        help=f"comma-separated subjects among {', '.join(SUBJECTS)} (default: all)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--tree",
        type=Path,
        help="measure the package of this checkout (its src/) instead of the installed one: "
        "the tree before a change, side by side",
    )
    parser.add_argument(
        "--publish-child",
        nargs=3,
        metavar=("MODE", "URL", "CALLS"),
        help=argparse.SUPPRESS,
    )
    args = parser.parse_args()
    if args.publish_child:
        mode, url, calls = args.publish_child
        if mode in WRITE_SUBJECTS:
            # On the loop the worker serves on (`event_loop.run`), as its writes run.
            import uvloop

            uvloop.run(publish_child(url, mode, int(calls)))
        else:
            asyncio.run(publish_child(url, mode, int(calls)))
        return
    if args.tree is not None:
        TREE.append(args.tree.resolve())
    subjects = (
        [s.strip() for s in args.only.split(",")]
        if args.only
        else [s for s in DEFAULT_SUBJECTS if s not in WIRE_SUBJECTS or has_adapter()]
    )
    unknown = set(subjects) - set(SUBJECTS)
    if unknown:
        raise SystemExit(f"unknown subjects {sorted(unknown)}; known: {SUBJECTS}")
    figures = measure(subjects, args.short, args.long, args.window, args.reps)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print(render(figures, args))


if __name__ == "__main__":
    main()
