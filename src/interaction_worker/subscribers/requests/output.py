"""`P.output.deliver`: a delivery to the sinks; its receipt as the reply and the receipt event."""

import asyncio
from typing import Any

from ...contracts import OutputReceipt
from ...contracts import validation as check
from ...contracts.keys import valid_id
from ...nodes import DeliveryContext
from ..dead_letters import DELIVERY_ID, IdNames
from ..incoming import Incoming
from ..outgoing import Outgoing, Publish, trace_headers
from .family import Nodes
from .shutdown import Shutdown


class Deliveries:
    """Runs deliveries; one cancelled by shutdown has the receipt `unknown` (a sink may have it)."""

    def __init__(self, worker: Nodes, outgoing: Outgoing, shutdown: Shutdown) -> None:
        self.worker = worker
        self.outgoing = outgoing
        self.shutdown = shutdown

    def identify(self, body: dict[str, Any], msg: Incoming) -> str | None:
        return valid_id(body.get("deliveryId"))

    def id_names(self, body: dict[str, Any]) -> IdNames:
        return DELIVERY_ID

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> OutputReceipt:
        context = DeliveryContext(identifier) if identifier is not None else None
        try:
            return await self.worker.deliver(body, context=context)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not self.shutdown.started or task is None or identifier is None:
                raise
            task.uncancel()
            return check.output_receipt(
                {
                    "deliveryId": identifier,
                    "status": "unknown",
                    "error": {
                        "code": "WORKER_SHUTDOWN",
                        "message": "The worker shut down before the sink answered",
                        "retryable": False,
                    },
                }
            )

    def publishes(
        self, outcome: OutputReceipt, msg: Incoming, key: str, target: str | None
    ) -> list[Publish]:
        return self.outgoing.receipt(outcome, key, target, trace_headers(msg.headers))
