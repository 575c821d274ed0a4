"""One request over the bus: its reply, and the events that follow it."""

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout


class RequestError(Exception):
    """No worker answered: one line for stderr."""


@dataclass
class Answer:
    """The reply, and the events that came with it (in the order they arrived)."""

    reply: dict[str, Any]
    is_error: bool
    events: list[dict[str, Any]]

    @property
    def error_message(self) -> str:
        """`CODE: message` of an error reply."""
        error = self.reply.get("error")
        if isinstance(error, dict):
            return f"{error.get('code')}: {error.get('message')}"
        return "the worker answered with an error"


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
            raise RequestError(
                f"no worker is serving {subject}: start one with `interaction-worker run`"
            ) from None
        except NatsTimeout:
            raise RequestError(f"no reply on {subject} within {wait:g} s") from None
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
