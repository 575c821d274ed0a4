"""The processes the benchmark measures, one per run: `python bench/responders.py KIND URL [OPTIONS]`.

KIND is one of:
  raw         nats-py + pydantic: parse the `{"call": …}` request, reply with a result of the same size
  faststream  the same written the obvious FastStream way (default settings, default logging)
  worker      interaction-worker with a no-op (or sleeping) tool, served as `interaction-worker run`
              serves it: its nats-py binding, on uvloop (see src/interaction_worker/event_loop.py)
  router      interaction-worker's FastStream router binding, mounted in a plain NatsBroker
  worker-ledger
              `worker` with the idempotency ledger on (wire.md 8), in a JetStream key-value bucket of
              its own (`bench_ledger_<pid>`): three writes per call before its reply and events

Each prints `ready` once subscribed and, on SIGTERM, one JSON line of its own counters; the ledger's
also counts its bucket's keys and writes (one key per call id: a repeated id is answered from its
record instead of running), then deletes the bucket.
"""

import argparse
import asyncio
import json
import os
import signal
import sys
from typing import Any

import nats
from pydantic import BaseModel

CONTENT = "x" * 64  # the no-op tool's output; the raw responders reply with the same


class Call(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any]


class Request(BaseModel):
    call: Call


class Result(BaseModel):
    callId: str
    source: str
    status: str
    content: str


def result_for(request: Request) -> Result:
    return Result(
        callId=request.call.id,
        source=request.call.name,
        status="success",
        content=CONTENT,
    )


class Noop:
    name = "noop"
    description = "Do nothing, quickly"
    input_schema: dict[str, Any] = {"type": "object"}
    effects = ("read",)

    def __init__(self, sleep: float) -> None:
        self.sleep = sleep

    def validate(self, arguments: dict[str, Any]) -> None:
        pass

    async def execute(self, arguments: dict[str, Any], context: Any) -> dict[str, Any]:
        if self.sleep:
            await asyncio.sleep(self.sleep)
        return {"status": "success", "content": CONTENT}


async def serve(args: argparse.Namespace) -> dict[str, Any]:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    stats: dict[str, Any] = {"slow_consumers": 0}

    async def error_cb(error: Exception) -> None:
        if isinstance(error, nats.errors.SlowConsumerError):
            stats["slow_consumers"] += 1

    if args.kind == "raw":
        nc = await nats.connect(
            args.url, error_cb=error_cb, skip_subject_validation=True
        )

        async def on_request(msg: Any) -> None:
            request = Request.model_validate_json(msg.data)
            payload = result_for(request).model_dump_json().encode()
            if msg.reply:
                await nc.publish(msg.reply, payload)
            else:
                await nc.publish(f"bench.out.{request.call.id}", payload)

        await nc.subscribe(
            "bench.raw",
            cb=on_request,
            pending_msgs_limit=1_000_000,
            pending_bytes_limit=1 << 30,
        )
        await nc.flush()
        print("ready", flush=True)
        await stop.wait()
        await nc.drain()
        return stats

    if args.kind == "faststream":
        from faststream.nats import NatsBroker

        broker = NatsBroker(args.url)

        max_workers: int | None = args.max_workers

        @broker.subscriber("bench.fs", max_workers=max_workers)
        async def handle(body: Request) -> Result:
            return result_for(body)

        await broker.start()
        await broker.connection.flush()
        print("ready", flush=True)
        await stop.wait()
        await broker.stop()
        return stats

    from faststream.nats import NatsBroker

    broker = NatsBroker(args.url, logger=None)
    broker.include_router(noop_worker(args).router(prefix="interaction"))
    await broker.start()
    await broker.connection.flush()
    print("ready", flush=True)
    await stop.wait()
    await broker.stop()
    return stats


def noop_worker(args: argparse.Namespace) -> Any:
    from interaction_worker import InteractionWorker, Sandbox

    return InteractionWorker(
        tools=[Noop(args.sleep)],
        sandbox=Sandbox(tools=["noop"]),
        concurrency=args.concurrency,
    )


def serve_worker(args: argparse.Namespace) -> dict[str, Any]:
    """The worker as `interaction-worker run` serves it: the same function, so the same event loop,
    connection options and start-up."""
    from interaction_worker.config import IdempotencySettings
    from interaction_worker.service import ServeOptions, run

    bucket = f"bench_ledger_{os.getpid()}"
    idempotency = (
        IdempotencySettings(enabled=True, bucket=bucket, ttl=3600.0)
        if args.kind == "worker-ledger"
        else None
    )
    options = ServeOptions(
        url=args.url,
        max_pending=args.max_pending,
        shutdown_grace=5.0,
        idempotency=idempotency,
    )
    stats = run(
        noop_worker(args),
        options,
        loop=args.loop or "auto",
        ready=lambda url: print("ready", flush=True),
    )
    served: dict[str, Any] = {"slow_consumers": stats.slow_consumers}
    if idempotency is not None:
        served["ledger"] = asyncio.run(ledger_counts(args.url, bucket))
    return served


async def ledger_counts(url: str, bucket: str) -> dict[str, int]:
    """The bucket's keys (one entry each: history 1) and the writes it took (its stream's last
    sequence); then the bucket is deleted, so the server's store does not grow run after run."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        state = (await js.stream_info(f"KV_{bucket}")).state
        await js.delete_key_value(bucket)
    finally:
        await nc.close()
    return {"keys": state.messages, "writes": state.last_seq}


def serve_baseline(args: argparse.Namespace) -> dict[str, Any]:
    if args.loop == "uvloop":
        import uvloop

        return uvloop.run(serve(args))
    return asyncio.run(serve(args))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "kind", choices=["raw", "faststream", "worker", "worker-ledger", "router"]
    )
    parser.add_argument("url")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--max-pending", type=int, default=1000)
    parser.add_argument(
        "--max-workers",
        type=int,
        default=None,
        help="the plain FastStream handler's max_workers (FastStream's default: one at a time)",
    )
    parser.add_argument(
        "--loop",
        choices=["auto", "asyncio", "uvloop"],
        help="the event loop; by default asyncio's for the baselines, `run`'s (auto) for the worker",
    )
    args = parser.parse_args()
    stats = (
        serve_worker(args)
        if args.kind in ("worker", "worker-ledger")
        else serve_baseline(args)
    )
    # The FastStream responder logs to stdout by default: the stats line is found by its prefix.
    print("stats " + json.dumps(stats), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
