"""The client side of the command line: one request over the bus, its reply and its events."""

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from .config import Settings, nats_connect_options
from .embedded import read_embedded_credentials

DEFAULT_URL = "nats://127.0.0.1:4222"


class ClientError(Exception):
    """A one-line problem for stderr (exit code 1)."""


@dataclass(frozen=True)
class Target:
    url: str
    options: dict[str, Any]
    prefix: str


def resolve_target(
    settings: Settings,
    env: Mapping[str, str],
    *,
    nats_url: str | None,
    data_dir: Path | None,
    prefix: str | None,
) -> Target:
    """`--nats-url`, else `INTERACTION_NATS_URL` / the file's `nats.url`, else the embedded server
    recorded in the data directory, else the default local URL (config.md section 3)."""
    prefix = prefix or settings.subjects.prefix
    url = nats_url or settings.nats.url
    if url is not None:
        return Target(url, nats_connect_options(env), prefix)
    embedded = read_embedded_credentials(data_dir or settings.data_dir)
    if embedded is not None:
        return Target(embedded[0], {"token": embedded[1]}, prefix)
    return Target(DEFAULT_URL, nats_connect_options(env), prefix)


async def connect(target: Target, wait: float = 5.0) -> Client:
    client = Client()
    try:
        async with asyncio.timeout(wait):
            await client.connect(
                target.url,
                allow_reconnect=False,
                max_reconnect_attempts=1,
                connect_timeout=2,
                name="interaction-worker-cli",
                **target.options,
            )
    except Exception as error:
        await client.close()
        raise ClientError(
            f"cannot connect to NATS at {target.url}: {type(error).__name__}"
        ) from None
    return client


@dataclass
class Answer:
    """The reply, and the events that came with it (in the order they arrived)."""

    reply: dict[str, Any]
    is_error: bool
    events: list[dict[str, Any]]


async def request(
    client: Client,
    subject: str,
    body: dict[str, Any],
    *,
    wait: float,
    events: Sequence[str] = (),
    event_timeout: float = 5.0,
) -> Answer:
    """Send one request; wait for its reply, then for the named events (subscribed beforehand)."""
    received: asyncio.Queue[Msg] = asyncio.Queue()

    async def on_event(msg: Msg) -> None:
        await received.put(msg)

    subscriptions = [await client.subscribe(s, cb=on_event) for s in events]
    try:
        try:
            reply = await client.request(
                subject, json.dumps(body, ensure_ascii=False).encode(), timeout=wait
            )
        except NoRespondersError:
            raise ClientError(f"no worker is serving {subject}") from None
        except NatsTimeout:
            raise ClientError(f"no reply on {subject} within {wait:g} s") from None
        is_error = bool(reply.headers and "Nats-Service-Error" in reply.headers)
        decoded = json.loads(reply.data)
        collected: list[dict[str, Any]] = []
        if not is_error:
            try:
                async with asyncio.timeout(event_timeout):
                    while len(collected) < len(events):
                        collected.append(json.loads((await received.get()).data))
            except TimeoutError:
                pass
        return Answer(decoded, is_error, collected)
    finally:
        for subscription in subscriptions:
            await subscription.unsubscribe()
