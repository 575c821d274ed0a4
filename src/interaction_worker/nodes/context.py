"""What a tool or a sink is given besides its input."""

import logging
from collections.abc import Mapping
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


@dataclass(slots=True)
class CommandContext:
    """Passed to a command's handler as its context when a worker dispatches it from the bus.

    `command_id` is the request's `Interaction-Command-Id` header, or the UUID the worker gave a
    command sent without one; `headers` are the request's as received (credentials included)."""

    command_id: str
    subject: str
    headers: Mapping[str, str] = field(default_factory=dict)
    logger: logging.Logger = field(default=_LOGGER)
