"""The processes the benchmark measures, one per run: `python bench/responders.py KIND URL [OPTIONS]`.

KIND is one of:
  raw         nats-py + pydantic: parse the `{"call": …}` request, reply with a result of the same size
  echo        nats-py alone on `bench.echo`: each request answered with a no-op call's three
              messages (reply, result and observation events, the worker's headers) by `publish`
  echo-wire   the same three messages through the worker's publishing adapter
  echo-bytes  the same through the adapter, their header blocks encoded once at start-up: what
              nats-py's parse and its connection's queueing cost, beside the adapter's framing
  faststream  the same written the obvious FastStream way (default settings, default logging)
  worker      interaction-worker with a no-op (or sleeping) tool, served as `interaction-worker run`
              serves it: its nats-py binding, on uvloop (see src/interaction_worker/event_loop.py)
  router      interaction-worker's FastStream router binding, mounted in a plain NatsBroker
  worker-ledger
              `worker` with the idempotency ledger on (wire.md 8), in a JetStream key-value bucket of
              its own (`bench_ledger_<pid>`): two writes per call before its reply and events
              (the no-op tool is read-only: its claim is written `started` at once, docs/wire.md 8)
  raw-durable a hand-written nats-py JetStream pull consumer: a work-queue stream of its own
              (`BENCH_RAW_<pid>`) over `interaction.tool.call` and a durable pull consumer on it;
              fetch in batches, parse each body as `raw` does, reply as `raw` does (to the
              `Interaction-Reply-To` header, else `bench.out.<id>`), acknowledge
  worker-durable
              `worker` in durable mode (wire.md 7), ledger off, with streams of its own
              (`BENCH_CALLS_<pid>`, `BENCH_EVENTS_<pid>`, `BENCH_DEAD_<pid>`)
  worker-durable-ledger
              `worker-durable` with the ledger on, in a bucket of its own as `worker-ledger`
  mcp-sdk     the mcp SDK's own low-level server with the no-op tool in process (no bus), over
              streamable HTTP on 127.0.0.1:`--port`, served as the gateway serves (uvicorn, the SDK's
              session manager): what an MCP tools/call costs before any bus

Each prints `ready` once subscribed and, on SIGTERM, one JSON line of its own counters; the ledger's
also counts its bucket's keys and writes (one key per call id: a repeated id is answered from its
record instead of running), then deletes the bucket. The durable ones also count what their calls
stream accepted, what its consumer delivered and redelivered and what is left unacknowledged (and
the worker's events and dead letters), then delete their streams.
"""

import argparse
import asyncio
import json
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

import nats
import nats.errors
from nats.js import JetStreamContext, api
from pydantic import BaseModel

if TYPE_CHECKING:  # the baselines do not import the worker
    from interaction_worker.config import DurableSettings

CONTENT = "x" * 64  # the no-op tool's output; the raw responders reply with the same
# The subject both durable responders consume, through a stream of their own.
CALL_SUBJECT = "interaction.tool.call"
REPLY_TO = "Interaction-Reply-To"
# The worker's durable consumer of tool calls (`<queue>-tool`, queue `<prefix>-workers`).
WORKER_TOOL_CONSUMER = "interaction-workers-tool"


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


# A no-op call's three messages, with the headers the worker gives a success (`call_messages`).
CALL_ID = "call-0123456789abcdef"
REPLY_HEADERS = {"Content-Type": "application/json"}
_EVENT_HEADERS = {
    "Content-Type": "application/json",
    "Interaction-Key": CALL_ID,
    "Interaction-Call-Id": CALL_ID,
    "Interaction-Status": "success",
}
RESULT_HEADERS = {**_EVENT_HEADERS, "Nats-Msg-Id": f"interaction.tool.result:{CALL_ID}"}
OBSERVATION_HEADERS = {
    **_EVENT_HEADERS,
    "Nats-Msg-Id": f"interaction.tool.observation:{CALL_ID}",
}
RESULT_JSON = json.dumps(
    {"callId": CALL_ID, "source": "noop", "status": "success", "content": CONTENT},
    separators=(",", ":"),
).encode()


def call_messages(
    reply: str, encoded: bool = False
) -> list[tuple[str, bytes, dict[str, str]]]:
    """`encoded`: the header sets carry their blocks already encoded (the worker's `WireHeaders`),
    so that the adapter only frames and queues them."""
    headers = ENCODED_HEADERS if encoded else PLAIN_HEADERS
    return [
        (reply, RESULT_JSON, headers[0]),
        (f"interaction.tool.result.{CALL_ID}", RESULT_JSON, headers[1]),
        (f"interaction.tool.observation.{CALL_ID}", RESULT_JSON, headers[2]),
    ]


PLAIN_HEADERS = (REPLY_HEADERS, RESULT_HEADERS, OBSERVATION_HEADERS)
ENCODED_HEADERS: tuple[dict[str, str], ...] = ()


def encode_headers() -> None:
    """The `echo-bytes` header sets, encoded once, as the worker's `outgoing` encodes them."""
    from interaction_worker.subscribers.outgoing import wire_headers

    global ENCODED_HEADERS
    ENCODED_HEADERS = tuple(
        wire_headers(
            headers,
            "NATS/1.0\r\n"
            + "".join(f"{name}: {value}\r\n" for name, value in headers.items())
            + "\r\n",
        )
        for headers in PLAIN_HEADERS
    )


def wire_sender(nc: Any) -> Any:
    from interaction_worker.subscribers.wire_publish import WirePublisher

    return WirePublisher(nc).publish


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

    if args.kind in ("echo", "echo-wire", "echo-bytes"):
        # The wire alone, for the instruction counts of `bench/instructions.py`: each request
        # answered with a no-op call's three messages (the reply and two events, with the worker's
        # headers) and nothing else; `echo` through nats-py's `publish`, `echo-wire` through the
        # worker's publishing adapter.
        nc = await nats.connect(args.url, skip_subject_validation=True)
        send = wire_sender(nc) if args.kind != "echo" else None
        if args.kind == "echo-bytes":
            encode_headers()
        publish = nc.publish
        encoded = args.kind == "echo-bytes"

        async def on_echo(msg: Any) -> None:
            messages = call_messages(msg.reply, encoded)
            if send is not None:
                await send(messages)
                return
            for subject, payload, headers in messages:
                await publish(subject, payload, headers=headers)

        await nc.subscribe(
            "bench.echo",
            cb=on_echo,
            pending_msgs_limit=1_000_000,
            pending_bytes_limit=1 << 30,
        )
        await nc.flush()
        print("ready", flush=True)
        await stop.wait()
        await nc.drain()
        return stats

    if args.kind == "raw-durable":
        return await serve_raw_durable(args, stop, stats, error_cb)

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


async def serve_raw_durable(
    args: argparse.Namespace,
    stop: asyncio.Event,
    stats: dict[str, Any],
    error_cb: Any,
) -> dict[str, Any]:
    """A JetStream work queue consumed the way one writes it by hand with nats-py: one durable pull
    consumer, `fetch` in batches, each message handled in turn (parse, reply, acknowledge)."""
    nc = await nats.connect(args.url, error_cb=error_cb, skip_subject_validation=True)
    js = nc.jetstream()
    stream, consumer = f"BENCH_RAW_{os.getpid()}", "bench-raw"
    await js.add_stream(
        name=stream,
        subjects=[CALL_SUBJECT],
        retention=api.RetentionPolicy.WORK_QUEUE,
        storage=api.StorageType.FILE,
    )
    try:
        await js.add_consumer(
            stream,
            api.ConsumerConfig(
                durable_name=consumer,
                ack_policy=api.AckPolicy.EXPLICIT,
                deliver_policy=api.DeliverPolicy.ALL,
                max_ack_pending=1000,
            ),
        )
        subscription = await js.pull_subscribe_bind(durable=consumer, stream=stream)

        async def consume() -> None:
            while True:
                try:
                    messages = await subscription.fetch(batch=args.batch, timeout=0.5)
                except (TimeoutError, nats.errors.TimeoutError):
                    continue
                for msg in messages:
                    request = Request.model_validate_json(msg.data)
                    payload = result_for(request).model_dump_json().encode()
                    reply = msg.headers.get(REPLY_TO) if msg.headers else None
                    await nc.publish(reply or f"bench.out.{request.call.id}", payload)
                    await msg.ack()

        consuming = asyncio.create_task(consume())
        await nc.flush()
        print("ready", flush=True)
        await stop.wait()
        consuming.cancel()
        await asyncio.gather(consuming, return_exceptions=True)
        # Before the drain, which would wait for the pull requests' leftover status messages.
        await subscription.unsubscribe()
        await nc.flush()
        stats["durable"] = await durable_counts(js, stream, consumer)
    finally:
        await js.delete_stream(stream)
        await nc.drain()
    return stats


async def durable_counts(
    js: JetStreamContext, stream: str, consumer: str, **others: str
) -> dict[str, int]:
    """What a calls stream accepted (its last sequence), what is left in it, and what its consumer
    delivered (every delivery, redeliveries included), redelivered and holds unacknowledged; and
    the messages of the `others` streams, by name. Acknowledgements are applied asynchronously:
    the last ones are waited for, a few seconds at most."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while True:
        state = (await js.stream_info(stream)).state
        info = await js.consumer_info(stream, consumer)
        if (
            state.messages == 0 and info.num_ack_pending == 0
        ) or loop.time() > deadline:
            break
        await asyncio.sleep(0.05)
    counts = {
        "accepted": state.last_seq,
        "left": state.messages,
        "delivered": info.delivered.consumer_seq or 0,
        "redelivered": info.num_redelivered or 0,
        "unacknowledged": info.num_ack_pending or 0,
    }
    for key, name in others.items():
        counts[key] = (await js.stream_info(name)).state.messages
    return counts


def noop_worker(args: argparse.Namespace) -> Any:
    from interaction_worker import InteractionWorker, Sandbox

    return InteractionWorker(
        tools=[Noop(args.sleep)],
        sandbox=Sandbox(tools=["noop"]),
        concurrency=args.concurrency,
        commands=noop_commands() if args.commands else None,
    )


def noop_commands() -> Any:
    """A command protocol of one command, `{"type": "noop"}`, whose handler does nothing: the
    command path's own cost, as the no-op tool measures the tool path's."""
    from interaction_worker import Interaction

    protocol = Interaction.define(
        command_field="type",
        commands={"noop": {"category": "action", "fields": {}}},
    )
    return Interaction.bind(protocol, {"noop": lambda value, context: None})


def serve_worker(args: argparse.Namespace) -> dict[str, Any]:
    """The worker as `interaction-worker run` serves it: the same function, so the same event loop,
    connection options and start-up."""
    from interaction_worker.config import DurableSettings, IdempotencySettings
    from interaction_worker.service import ServeOptions, run

    pid = os.getpid()
    bucket = f"bench_ledger_{pid}"
    ledgered = args.kind in ("worker-ledger", "worker-durable-ledger")
    durable = (
        DurableSettings(
            enabled=True,
            calls_stream=f"BENCH_CALLS_{pid}",
            events_stream=f"BENCH_EVENTS_{pid}",
            dead_stream=f"BENCH_DEAD_{pid}",
        )
        if args.kind in ("worker-durable", "worker-durable-ledger")
        else None
    )
    idempotency = (
        IdempotencySettings(enabled=True, bucket=bucket, ttl=3600.0)
        if ledgered
        # The ledger is on by default in durable mode.
        else IdempotencySettings(enabled=False)
        if durable is not None
        else None
    )
    options = ServeOptions(
        url=args.url,
        max_pending=args.max_pending,
        shutdown_grace=5.0,
        idempotency=idempotency,
        durable=durable,
    )
    try:
        stats = run(
            noop_worker(args),
            options,
            loop=args.loop or "auto",
            ready=lambda url: print("ready", flush=True),
        )
    finally:
        counts = (
            asyncio.run(worker_durable_counts(args.url, durable))
            if durable is not None
            else None
        )
    served: dict[str, Any] = {"slow_consumers": stats.slow_consumers}
    if counts is not None:
        served["durable"] = counts
    if ledgered:
        served["ledger"] = asyncio.run(ledger_counts(args.url, bucket))
    return served


async def worker_durable_counts(url: str, durable: "DurableSettings") -> dict[str, int]:
    """`durable_counts` of the worker's tool consumer, its events and dead letters; then its
    streams are deleted, so the next responder can capture the same subjects."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    streams = (durable.calls_stream, durable.events_stream, durable.dead_stream)
    try:
        return await durable_counts(
            js,
            durable.calls_stream,
            WORKER_TOOL_CONSUMER,
            events=durable.events_stream,
            dead=durable.dead_stream,
        )
    finally:
        for stream in streams:
            try:
                await js.delete_stream(stream)
            except nats.errors.Error:
                pass  # not created: the worker did not start
        await nc.close()


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


def serve_mcp_sdk(args: argparse.Namespace) -> dict[str, Any]:
    import mcp_types as types
    import uvicorn
    from mcp.server import Server
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )
    from starlette.applications import Starlette
    from starlette.routing import Route

    from interaction_worker.monitoring.http import LoopServer, listen, serving

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[types.Tool(name="noop", input_schema={"type": "object"})]
        )

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=CONTENT)])

    server: Server[Any] = Server(
        "bench", on_list_tools=list_tools, on_call_tool=call_tool
    )
    manager = StreamableHTTPSessionManager(app=server)
    app = Starlette(routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(manager))])

    async def serve_http() -> None:
        config = uvicorn.Config(
            app, log_config=None, log_level="warning", access_log=False, lifespan="off"
        )
        http = LoopServer(config)
        asyncio.get_running_loop().add_signal_handler(
            signal.SIGTERM, lambda: setattr(http, "should_exit", True)
        )
        async with manager.run():
            task = await serving(http, await listen("127.0.0.1", args.port))
            print("ready", flush=True)
            await task

    asyncio.run(serve_http())
    return {}


def serve_baseline(args: argparse.Namespace) -> dict[str, Any]:
    if args.loop == "uvloop":
        import uvloop

        return uvloop.run(serve(args))
    return asyncio.run(serve(args))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "kind",
        choices=[
            "raw",
            "echo",
            "echo-wire",
            "echo-bytes",
            "raw-durable",
            "faststream",
            "worker",
            "worker-ledger",
            "worker-durable",
            "worker-durable-ledger",
            "router",
            "mcp-sdk",
        ],
    )
    parser.add_argument("url")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument(
        "--commands",
        action="store_true",
        help="worker: also serve a no-op command protocol on P.command",
    )
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--port", type=int, default=0, help="mcp-sdk: the HTTP port")
    parser.add_argument("--max-pending", type=int, default=1000)
    parser.add_argument(
        "--batch",
        type=int,
        default=64,
        help="raw-durable: the messages one fetch asks for",
    )
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
    if args.kind.startswith("worker"):
        stats = serve_worker(args)
    elif args.kind == "mcp-sdk":
        stats = serve_mcp_sdk(args)
    else:
        stats = serve_baseline(args)
    # The FastStream responder logs to stdout by default: the stats line is found by its prefix.
    print("stats " + json.dumps(stats), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
