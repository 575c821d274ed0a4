"""Why a connection attempt failed, in a few safe words: no server text, no path, no secret."""

import httpx2
from mcp import MCPError, types

from .transports import SessionExpired


def reason(error: BaseException, connect_timeout: float) -> str:
    if isinstance(error, TimeoutError):
        return f"no answer within {connect_timeout:g} s"
    leaf = _leaf(error)
    if isinstance(leaf, SessionExpired):
        return "the server no longer knows the session"
    if isinstance(leaf, MCPError):
        if leaf.code == types.CONNECTION_CLOSED:
            return "the server closed the connection"
        return f"the server answered with error {leaf.code}"
    if isinstance(leaf, FileNotFoundError | PermissionError | NotADirectoryError):
        return "the command cannot be started"
    if isinstance(leaf, httpx2.ConnectError | httpx2.ConnectTimeout):
        return "cannot connect"
    if isinstance(leaf, httpx2.RemoteProtocolError | httpx2.ReadError):
        return "the server closed the connection"
    return type(leaf).__name__


def _leaf(error: BaseException) -> BaseException:
    """The first exception in a (nested) exception group, the SDK's way of reporting a transport
    task that failed."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error
