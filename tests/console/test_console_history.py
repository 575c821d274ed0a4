"""The console's history from the events stream, read with direct gets only (docs/console.md,
"History"): a console user with no consumer right at all replays the last events, with the headers and
the time the stream stored them, and after a lost connection replays what it missed, once."""

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import nats
import pytest
from nats.aio.client import Client
from nats.js import api

from interaction_worker.console import ConsoleEvent, FeedOptions, Hub
from interaction_worker.console.bus import BusFeed, Disconnected
from interaction_worker.testing import NatsServer, NatsServerFactory

WAIT = 10.0
PREFIX = "hist"
STREAM = "HIST_EVENTS"
# The console's user: it reads the events and their history, and can do nothing else on JetStream.
USERS = """
authorization {
  users: [
    {user: admin, password: admin}
    {user: console, password: console, permissions: {
      publish: {allow: ["$JS.API.DIRECT.GET.HIST_EVENTS"]}
      subscribe: {allow: ["hist.>", "_INBOX.>"]}
    }}
  ]
}
"""


@pytest.fixture
def server(nats_server_factory: NatsServerFactory, tmp_path: Path) -> NatsServer:
    config = tmp_path / "users.conf"
    config.write_text(USERS)
    return nats_server_factory("-c", str(config))


@pytest.fixture
async def admin(server: NatsServer) -> AsyncIterator[Client]:
    client = await nats.connect(server.url, user="admin", password="admin")
    await client.jetstream().add_stream(
        api.StreamConfig(
            name=STREAM, subjects=[f"{PREFIX}.tool.result.>"], allow_direct=True
        )
    )
    try:
        yield client
    finally:
        await client.close()


class Connections:
    """The console's connector: as the `console` user; `hold` keeps it from connecting again."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.made: list[Client] = []
        self.allowed = asyncio.Event()
        self.allowed.set()
        self.violations: list[str] = []
        self.lost = asyncio.Event()

    async def __call__(self, on_disconnect: Disconnected) -> Client:
        await self.allowed.wait()

        async def on_lost() -> None:
            self.lost.set()
            await on_disconnect()

        async def on_error(error: Exception) -> None:
            self.violations.append(str(error))

        client = await nats.connect(
            self.url,
            user="console",
            password="console",
            allow_reconnect=False,
            disconnected_cb=on_lost,
            error_cb=on_error,
        )
        self.made.append(client)
        return client


async def publish(js: Any, n: int) -> None:
    await js.publish(
        f"{PREFIX}.tool.result.c-{n}",
        json.dumps({"callId": f"c-{n}", "status": "success"}).encode(),
        headers={
            "Nats-Msg-Id": f"{PREFIX}.tool.result:c-{n}",
            "Interaction-Key": f"c-{n}",
        },
    )


class Watched(Hub):
    """A hub whose history can be waited on."""

    def __init__(self, history: int) -> None:
        super().__init__(history)
        self.changed = asyncio.Event()

    def publish(self, event: ConsoleEvent) -> None:
        super().publish(event)
        self.changed.set()

    def shown(self) -> list[dict[str, Any]]:
        frames = [e.frame.decode().split("data: ", 1)[1] for e in self.history]
        return [json.loads(frame) for frame in frames]

    async def until(
        self, done: Callable[[list[dict[str, Any]]], bool]
    ) -> list[dict[str, Any]]:
        with anyio.fail_after(WAIT):
            while not done(self.shown()):
                self.changed.clear()
                await self.changed.wait()
        return self.shown()


async def test_the_history_needs_only_direct_gets_and_keeps_what_the_stream_stored(
    server: NatsServer, admin: Client
) -> None:
    js = admin.jetstream()
    for n in range(5):
        await publish(js, n)
    stored_before = time.time()
    await asyncio.sleep(0.05)
    hub = Watched(history=10)
    connections = Connections(server.url)
    options = FeedOptions(prefix=PREFIX, events_stream=STREAM, history=3)
    feed = BusFeed(hub, options, connections, retry_wait=0.05)
    running = asyncio.create_task(feed.run())
    try:
        replayed = await hub.until(lambda seen: len(seen) == 3)
        assert [(m["key"], m.get("replayed")) for m in replayed] == [
            ("c-2", True),
            ("c-3", True),
            ("c-4", True),
        ]
        # The message's own headers, as a live subscriber sees them; the time the stream stored it.
        assert replayed[0]["headers"] == {
            "Nats-Msg-Id": f"{PREFIX}.tool.result:c-2",
            "Interaction-Key": "c-2",
        }
        assert replayed[0]["subject"] == f"{PREFIX}.tool.result.c-2"
        assert all(m["receivedAt"] <= stored_before * 1000 for m in replayed)

        # Lost: what is published meanwhile is replayed on the next connection, once.
        await feed.connected.wait()
        connections.allowed.clear()
        await connections.made[-1].close()
        with anyio.fail_after(WAIT):
            await connections.lost.wait()
        for n in (5, 6):
            await publish(js, n)
        connections.allowed.set()
        after = await hub.until(lambda seen: "c-6" in [m["key"] for m in seen])
        keys = [m["key"] for m in after]
        assert len(keys) == len(set(keys))  # nothing shown twice
        # Replayed from a little before the loss (c-0 and c-1, never shown, may come with them).
        missed = [(m["key"], m.get("replayed")) for m in after[3:]]
        assert [m for m in missed if m[0] not in ("c-0", "c-1")] == [
            ("c-5", True),
            ("c-6", True),
        ]
        await publish(js, 7)
        live = (await hub.until(lambda seen: seen[-1]["key"] == "c-7"))[-1]
        assert live.get("replayed") is None
    finally:
        running.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.gather(running, return_exceptions=True)
            for client in connections.made:
                if not client.is_closed:
                    await client.close()
    assert connections.violations == []
