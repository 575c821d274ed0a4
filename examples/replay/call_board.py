"""A downstream consumer of the worker's events: the table a UI shows of an agent's calls.

It knows nothing of the worker but its events (docs/wire.md 2): each result, dead letter and receipt
sets one row, keyed by the call or delivery id.
"""

import asyncio
import json
from dataclasses import dataclass, field

from nats.aio.client import Client
from nats.aio.msg import Msg


@dataclass
class CallBoard:
    prefix: str
    # id -> its status, or the code of its refusal
    rows: dict[str, str] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def follow(self, nc: Client) -> None:
        for family in ("tool.result.*", "mcp.result.*", "output.receipt.*", "dead.>"):
            await nc.subscribe(f"{self.prefix}.{family}", cb=self._on_event)
        await nc.flush()

    async def _on_event(self, msg: Msg) -> None:
        event = json.loads(msg.data)
        if ".dead." in msg.subject:
            key = event.get("callId") or event.get("deliveryId") or "?"
            self.rows[key] = f"refused: {event['error']['code']}"
        else:
            self.rows[event.get("callId") or event["deliveryId"]] = event["status"]
        self.changed.set()

    async def wait_for(self, rows: int) -> None:
        while len(self.rows) < rows:
            self.changed.clear()
            await self.changed.wait()
