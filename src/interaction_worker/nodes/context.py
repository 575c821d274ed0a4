"""What a tool or a sink is given besides its input."""

import logging
from dataclasses import dataclass, field
from pathlib import Path

from .sandbox import Sandbox

_LOGGER = logging.getLogger("interaction_worker")


@dataclass(slots=True)
class ToolContext:
    """Passed to `RegisteredTool.execute`. Cancellation arrives as asyncio cancellation."""

    call_id: str
    sandbox: Sandbox
    logger: logging.Logger = field(default=_LOGGER)
    deadline: float | None = None  # event-loop time, when the call has a timeout

    @property
    def workspace(self) -> Path | None:
        return self.sandbox.workspace


@dataclass(frozen=True)
class DeliveryContext:
    """Passed to `OutputSink.deliver`."""

    delivery_id: str
    logger: logging.Logger = field(default=_LOGGER)
    deadline: float | None = None
