"""Record the session that examples/replay/session.jsonl holds, against examples/replay/workspace/.

    .venv/bin/python examples/replay/record_session.py

It does what `interaction-worker record` does while an agent works, in one process: a nats-server from
the wheel, the worker serving the workspace under the prefix `shop`, a recorder subscribed to `shop.>`,
and a short session through `InteractionClient`: three calls that succeed, one that fails (a missing
file), one the sandbox refuses, and a delivery. Every outcome is free of host paths and times, so the
file stays valid on any machine: run this again only when the session should change.
"""

import asyncio
import tempfile
from pathlib import Path

import nats

from interaction_worker.client import InteractionClient, InteractionRequestError
from interaction_worker.recording import RecordingHeader
from interaction_worker.recording.recorder import (
    LiveRecording,
    RecordingWriter,
    started_at,
)
from interaction_worker.testing import start_nats_server, stop_process
from interaction_worker.testing.served import ServeWorker

HERE = Path(__file__).resolve().parent
PREFIX = "shop"


async def session(client: InteractionClient) -> None:
    await client.call_tool("read_text", path="notes.md", call_id="read-notes")
    await client.call_tool(
        "grep", pattern="TODO", paths=["docs"], recursive=True, call_id="find-todo"
    )
    await client.call_tool("wc", path="docs/orders.csv", call_id="count-orders")
    await client.call_tool("read_text", path="returns.md", call_id="read-returns")
    try:
        await client.call_tool("delete_orders", call_id="delete-orders")
    except InteractionRequestError as refused:  # the sandbox grants no such tool
        print(f"refused as expected: {refused}")
    await client.deliver(
        {
            "deliveryId": "summary-1",
            "message": {
                "role": "assistant",
                "content": "Orders 17 and 21 are still to do.",
            },
        }
    )


async def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        server = start_nats_server(Path(scratch))
        try:
            serve = ServeWorker(server.url, base_dir=HERE)
            handle = await serve(workspace="workspace", subjects={"prefix": PREFIX})
            with out.open("wb") as file:
                header = RecordingHeader(
                    PREFIX, started_at(), (f"{PREFIX}.>",), "examples/replay"
                )
                writer = RecordingWriter(file, header)
                live = LiveRecording(writer, [f"{PREFIX}.>"])
                listener = await nats.connect(server.url, error_cb=live.on_error)
                ready, stop = asyncio.Event(), asyncio.Event()
                recording = asyncio.create_task(
                    live.run(listener, stop=stop, on_ready=ready.set)
                )
                await ready.wait()
                await session(handle.client)
                # The recorder is another client: let it catch up.
                await asyncio.sleep(0.5)
                stop.set()
                await recording
                await listener.close()
            await serve.aclose()
            print(f"recorded {writer.count} messages to {out.relative_to(HERE)}")
        finally:
            stop_process(server.process)


if __name__ == "__main__":
    asyncio.run(main(HERE / "session.jsonl"))
