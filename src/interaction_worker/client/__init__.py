"""The client side of the bus: `InteractionClient`, and how a client finds the worker's server."""

from ..config import find_upwards
from .inbox import ConnectionLost, NoWorkerError
from .interaction import InteractionClient, InteractionRequestError, ToolOutcome
from .target import (
    DEFAULT_URL,
    ConnectError,
    Project,
    Target,
    connect,
    find_project,
    resolve_target,
)

__all__ = [
    "DEFAULT_URL",
    "ConnectError",
    "ConnectionLost",
    "InteractionClient",
    "InteractionRequestError",
    "NoWorkerError",
    "Project",
    "Target",
    "ToolOutcome",
    "connect",
    "find_project",
    "find_upwards",
    "resolve_target",
]
