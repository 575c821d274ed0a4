"""A console served for a test on a real nats-server, and its event stream read over HTTP."""

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import nats
from nats.aio.client import Client

from interaction_worker.console import Connector, Console, FeedOptions
from interaction_worker.console.bus import Disconnected

WAIT = 10.0


def connector(url: str) -> Connector:
    async def connect(on_disconnect: Disconnected) -> Client:
        async def quiet(error: Exception) -> None:
            pass

        return await nats.connect(
            url,
            allow_reconnect=False,
            connect_timeout=2,
            disconnected_cb=on_disconnect,
            error_cb=quiet,
        )

    return connect


@contextlib.asynccontextmanager
async def running_console(
    nats_url: str, options: FeedOptions, *, token: str | None = None
) -> AsyncIterator[Console]:
    console = Console(options, connector(nats_url), token=token)
    await console.start("127.0.0.1", 0)
    try:
        with anyio.fail_after(WAIT):
            await console.feed.connected.wait()
        yield console
    finally:
        await console.stop()


@dataclass
class Frame:
    event: str
    data: Any
    id: str | None = None


async def frames(response: httpx.Response) -> AsyncIterator[Frame]:
    """The SSE frames of a streamed response, comments left out."""
    event, frame_id = "message", None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield Frame(event, json.loads("\n".join(data)), frame_id)
            event, data, frame_id = "message", [], None
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
            elif field == "id":
                frame_id = value


async def collect(
    client: httpx.AsyncClient,
    url: str,
    until: Callable[[list[Frame]], bool],
    *,
    headers: dict[str, str] | None = None,
    started: anyio.Event | None = None,
) -> list[Frame]:
    """The frames of `url`'s stream, read until `until` holds for those read (or `WAIT` passes)."""
    seen: list[Frame] = []
    with anyio.fail_after(WAIT):
        async with client.stream("GET", url, headers=headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for frame in frames(response):
                seen.append(frame)
                if started is not None and frame.event == "status":
                    started.set()
                if until(seen):
                    return seen
    return seen


def messages(seen: list[Frame]) -> list[dict[str, Any]]:
    return [frame.data for frame in seen if frame.event == "message"]
