"""Starting and closing what a worker holds: its sink and its MCP clients, each by its own `start`
and `aclose` or `close` when it has one."""

import asyncio
import logging

from ..errors import McpClientError, McpUnavailable
from .mcp_registry import McpRegistry
from .output import OutputSink

_LOGGER = logging.getLogger("interaction_worker.mcp")


async def start_resources(
    output: OutputSink | None, mcp: McpRegistry | None, client: object
) -> None:
    """Start the sink, which gets the worker's connection `client` to publish on the bus, then the
    MCP clients all at once (see `InteractionWorker.astart`).

    Raises:
        what a resource that cannot start raised; several `McpClientError`s as one McpUnavailable.
    """
    start = getattr(output, "start", None)
    if start is not None:
        await start(client)
    if mcp is None:
        return
    servers = [
        (name, mcp_client, connect)
        for name in mcp.servers()
        if (mcp_client := mcp.get(name)) is not None
        and (connect := getattr(mcp_client, "start", None)) is not None
    ]
    outcomes = await asyncio.gather(
        *(connect(client) for _, _, connect in servers), return_exceptions=True
    )
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    if not failures:
        return
    started = [
        (name, mcp_client)
        for (name, mcp_client, _), outcome in zip(servers, outcomes, strict=True)
        if not isinstance(outcome, BaseException)
    ]
    closed = await asyncio.gather(
        *(_close(mcp_client) for _, mcp_client in started), return_exceptions=True
    )
    for (name, _), outcome in zip(started, closed, strict=True):
        if isinstance(outcome, BaseException):
            # The start's failure is what the caller must hear; this one is only logged.
            _LOGGER.warning(
                "MCP server %s could not be closed after the failed start: %s",
                name,
                type(outcome).__name__,
            )
    raise _start_failure(failures)


async def close_resources(output: OutputSink | None, mcp: McpRegistry | None) -> None:
    """Close the sink, then the MCP clients."""
    for resource in [output, *(mcp.clients() if mcp else ())]:
        await _close(resource)


async def _close(resource: object) -> None:
    """`aclose()` or `close()`, awaited when it returns an awaitable; nothing without either."""
    close = getattr(resource, "aclose", None) or getattr(resource, "close", None)
    if close is None:
        return
    outcome = close()
    if hasattr(outcome, "__await__"):
        await outcome


def _start_failure(failures: list[BaseException]) -> BaseException:
    """The one exception a failed start raises for the MCP clients that failed (in registration order)."""
    for failure in failures:
        if not isinstance(
            failure, Exception
        ):  # a cancellation or an interrupt comes first
            return failure
    if len(failures) > 1 and all(isinstance(f, McpClientError) for f in failures):
        return McpUnavailable("; ".join(str(failure) for failure in failures))
    return failures[0]
