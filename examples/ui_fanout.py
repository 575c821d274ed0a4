"""Fan-out to UIs: each delivery reaches two live UIs over core NATS, and a stream that a UI
connecting later replays.

Against any nats-server with JetStream (`nats-server -js`, or a worker's embedded one):

    python examples/ui_fanout.py --nats-url nats://127.0.0.1:4222

It finds the server as `interaction-worker call` does, so with `make run` serving, no option is needed;
a `--nats-url` naming the embedded server uses its token.

It serves a worker of its own in this process, under a fresh subject prefix, whose sink is a fan-out
(policy `all`) of three sinks:

- `chat`: a NatsSink on `demo.<run>.chat.{key}`, read by the first UI;
- `log`: a NatsSink on `demo.<run>.log.{key}`, read by the second UI;
- `history`: a JetStreamSink on `demo.<run>.history.{key}`, stored in the stream `UI_FANOUT_DEMO`
  (created when missing, over `demo.*.history.>`, messages kept for an hour).

Then it sends `--count` deliveries on `<prefix>.output.deliver`, as an agent would, and prints one
JSON object per line: each receipt (with the fan-out's per-sink statuses), what each live UI
received, and what a UI that connects only afterwards replays from the stream. Exit code 0 when
every delivery was accepted and every UI saw every one, 1 otherwise.

The same fan-out from the configuration file, served by `interaction-worker run`:

    output:
      policy: all
      sinks:
        - {type: nats, name: chat, subject: "demo.chat.{key}"}
        - {type: nats, name: log, subject: "demo.log.{key}"}
        - {type: jetstream, name: history, subject: "demo.history.{key}", stream: UI_FANOUT_DEMO}
"""

import argparse
import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy, StreamConfig
from nats.js.errors import NotFoundError

from interaction_worker import ConfigurationError, InteractionWorker
from interaction_worker.client import (
    ConnectError,
    InteractionClient,
    Target,
    find_project,
    resolve_target,
)
from interaction_worker.client import connect as connect_target
from interaction_worker.sinks import FanoutSink, JetStreamSink, NatsSink

STREAM = "UI_FANOUT_DEMO"
WAIT = 10.0  # seconds for any one step


def emit(value: dict[str, Any]) -> None:
    print(json.dumps(value, ensure_ascii=False), flush=True)


class LiveUi:
    """A UI that shows what arrives on its subjects while it is connected."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.received: list[str] = []
        self._changed = asyncio.Event()

    async def on_message(self, msg: Msg) -> None:
        self.received.append(json.loads(msg.data)["deliveryId"])
        self._changed.set()

    async def wait_for(self, count: int) -> None:
        async with asyncio.timeout(WAIT):
            while len(self.received) < count:
                self._changed.clear()
                await self._changed.wait()


async def ensure_stream(client: Client) -> None:
    js = client.jetstream()
    try:
        await js.stream_info(STREAM)
    except NotFoundError:
        await js.add_stream(
            StreamConfig(name=STREAM, subjects=["demo.*.history.>"], max_age=3600.0)
        )


async def replay(target: Target, run: str, count: int) -> list[str]:
    """A UI that connects now: an ordered consumer replays this run's deliveries from the start."""
    client = await connect(target)
    try:
        js = client.jetstream()
        subscription = await js.subscribe(
            f"demo.{run}.history.>",
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.ALL,
        )
        messages = [await subscription.next_msg(timeout=WAIT) for _ in range(count)]
        await subscription.unsubscribe()
        return [json.loads(m.data)["deliveryId"] for m in messages]
    finally:
        await client.close()


async def connect(target: Target) -> Client:
    # As the command line connects: credentials from INTERACTION_NATS_*, else the embedded
    # server's token when the URL is the one recorded in the data directory (docs/cli.md, "Finding
    # the worker").
    return await connect_target(target, name="ui-fanout-example")


async def demo(target: Target, count: int) -> bool:
    run = uuid.uuid4().hex[:12]
    prefix = f"demo-{run}"
    worker_client, chat_client, log_client = (
        await connect(target),
        await connect(target),
        await connect(target),
    )
    chat, log = LiveUi("chat"), LiveUi("log")
    try:
        await ensure_stream(worker_client)
        await chat_client.subscribe(f"demo.{run}.chat.>", cb=chat.on_message)
        await log_client.subscribe(f"demo.{run}.log.>", cb=log.on_message)
        for ui_client in (chat_client, log_client):
            await ui_client.flush()

        fanout = FanoutSink(
            [
                NatsSink(f"demo.{run}.chat.{{key}}", name="chat"),
                NatsSink(f"demo.{run}.log.{{key}}", name="log"),
                JetStreamSink(
                    f"demo.{run}.history.{{key}}", stream=STREAM, name="history"
                ),
            ],
            policy="all",
        )
        worker = InteractionWorker(output=fanout)
        binding = worker.nats_binding(worker_client, prefix=prefix)
        await worker.astart(
            worker_client
        )  # the sinks publish on the worker's connection
        await binding.start()

        # The agent's side: deliveries sent with the package's client, as an agent would.
        agent = InteractionClient(chat_client, prefix=prefix, timeout=WAIT)
        accepted = True
        for n in range(count):
            body = {
                "deliveryId": f"{run}-{n}",
                "message": {"role": "assistant", "content": f"message {n} of {count}"},
            }
            receipt = await agent.deliver(body)
            accepted = accepted and receipt.status == "accepted"
            emit({"receipt": receipt.to_wire()})

        await agent.close()
        await binding.stop(WAIT)
        await worker.aclose()
        for ui in (chat, log):
            await ui.wait_for(count)
            emit({"ui": ui.name, "received": ui.received})
        replayed = await replay(target, run, count)
        emit({"ui": "late", "replayed": replayed})
        expected = [f"{run}-{n}" for n in range(count)]
        return accepted and chat.received == log.received == replayed == expected
    finally:
        for client in (worker_client, chat_client, log_client):
            await client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument(
        "--nats-url",
        help="the server (default: as `interaction-worker call` finds it: "
        "INTERACTION_NATS_URL, the file's nats.url, the embedded server in the nearest "
        ".interaction/, else nats://127.0.0.1:4222)",
    )
    parser.add_argument(
        "--config", type=Path, help="the YAML file (default: the nearest worker.yaml)"
    )
    parser.add_argument("--data-dir", type=Path, help="the embedded server's directory")
    parser.add_argument("--count", type=int, default=3, help="deliveries to send")
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error("--count must be at least 1")
    try:
        project = find_project(args.config, env=os.environ, data_dir=args.data_dir)
        target = resolve_target(project, os.environ, nats_url=args.nats_url)
    except ConfigurationError as error:
        print(f"ui_fanout: {error}", file=sys.stderr)
        return 2
    try:
        ok = asyncio.run(demo(target, args.count))
    except ConnectError as error:
        print(f"ui_fanout: {error}", file=sys.stderr)
        return 1
    except (OSError, TimeoutError, nats.errors.Error) as error:
        print(f"ui_fanout: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
