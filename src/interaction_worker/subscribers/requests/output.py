"""`P.output.deliver`: a delivery to the sinks; its receipt as the reply and the receipt event."""

import asyncio
import logging
from typing import Any

from ...contracts import OutputReceipt
from ...contracts import validation as check
from ...contracts.wire import WIRE, IdNames
from ...nodes import DeliveryContext, cancelled_receipt
from ..incoming import Incoming
from ..outgoing import Outgoing, Publish, trace_headers
from .family import Nodes
from .shutdown import Shutdown, being_cancelled

_LOGGER = logging.getLogger("interaction_worker")


class Deliveries:
    """Runs deliveries. A delivery whose sink call is cancelled is never left unanswered: the sink
    may have it, so its receipt is `unknown`, with WORKER_SHUTDOWN when shutdown cancelled it, else
    SINK_CANCELLED, logged (a cancellation that is neither the worker's nor the sink's own is
    answered, and withdrawn, here: docs/guarantees.md)."""

    def __init__(
        self,
        worker: Nodes,
        outgoing: Outgoing,
        shutdown: Shutdown,
        logger: logging.Logger = _LOGGER,
    ) -> None:
        self.worker = worker
        self.outgoing = outgoing
        self.shutdown = shutdown
        self.logger = logger

    identify = staticmethod(WIRE["output"].read_id)

    def id_names(self, body: dict[str, Any]) -> IdNames | None:
        return WIRE["output"].ids

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> OutputReceipt:
        context = DeliveryContext(identifier) if identifier is not None else None
        try:
            return await self.worker.deliver(body, context=context)
        except asyncio.CancelledError:
            task = being_cancelled()
            if task is None or identifier is None:
                raise  # not the sink's call: the delivery was refused before it, or raised this
            task.uncancel()
            if self.shutdown.started:
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
            self.logger.error(
                "delivery %s on %s was cancelled, neither by its sink nor by shutdown: "
                "its receipt is unknown",
                identifier,
                msg.subject,
            )
            return cancelled_receipt(identifier)

    def publishes(
        self, outcome: OutputReceipt, msg: Incoming, key: str, target: str | None
    ) -> list[Publish]:
        return self.outgoing.receipt(outcome, key, target, trace_headers(msg.headers))
