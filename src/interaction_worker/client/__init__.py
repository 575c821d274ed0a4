"""The client side of the bus: finding the worker's server, and one request with its events."""

from .request import Answer, RequestError, request
from .target import (
    DEFAULT_URL,
    ConnectError,
    Project,
    Target,
    connect,
    find_project,
    find_upwards,
    resolve_target,
)

__all__ = [
    "DEFAULT_URL",
    "Answer",
    "ConnectError",
    "Project",
    "RequestError",
    "Target",
    "connect",
    "find_project",
    "find_upwards",
    "request",
    "resolve_target",
]
