"""Fan-out to UIs: each delivery reaches two live UIs over core NATS, and a stream that a UI
connecting later replays.

Against any nats-server with JetStream (`nats-server -js`, or a worker's embedded one):

    python examples/ui_fanout.py --nats-url nats://127.0.0.1:4222

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
from typing import Any

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy, StreamConfig
from nats.js.errors import NotFoundError

from interaction_worker import InteractionWorker
from interaction_worker.config import nats_connect_options
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


async def replay(url: str, run: str, count: int) -> list[str]:
    """A UI that connects now: an ordered consumer replays this run's deliveries from the start."""
    client = await connect(url)
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


async def connect(url: str) -> Client:
    return await nats.connect(
        url,
        **nats_connect_options(
            os.environ
        ),  # credentials from INTERACTION_NATS_* (config.md)
        max_reconnect_attempts=2,
        connect_timeout=5,
    )


async def demo(url: str, count: int) -> bool:
    run = uuid.uuid4().hex[:12]
    prefix = f"demo-{run}"
    worker_client, chat_client, log_client = (
        await connect(url),
        await connect(url),
        await connect(url),
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

        accepted = True
        for n in range(count):
            body = {
                "deliveryId": f"{run}-{n}",
                "message": {"role": "assistant", "content": f"message {n} of {count}"},
            }
            reply = await chat_client.request(
                f"{prefix}.output.deliver", json.dumps(body).encode(), timeout=WAIT
            )
            receipt = json.loads(reply.data)
            accepted = accepted and receipt.get("status") == "accepted"
            emit({"receipt": receipt})

        await binding.stop(WAIT)
        await worker.aclose()
        for ui in (chat, log):
            await ui.wait_for(count)
            emit({"ui": ui.name, "received": ui.received})
        replayed = await replay(url, run, count)
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
        default=os.environ.get("INTERACTION_NATS_URL") or "nats://127.0.0.1:4222",
        help="the server (default: INTERACTION_NATS_URL, else nats://127.0.0.1:4222)",
    )
    parser.add_argument("--count", type=int, default=3, help="deliveries to send")
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error("--count must be at least 1")
    try:
        ok = asyncio.run(demo(args.nats_url, args.count))
    except (OSError, TimeoutError, nats.errors.Error) as error:
        print(f"ui_fanout: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
