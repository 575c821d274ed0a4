"""The moment a side effect starts: right before a tool's `execute`, an MCP server's `tools/call` or
a sink's `deliver`. The ledger (wire.md 8) marks its claim `started` there, so a retry after a crash
knows whether anything may have happened. Whoever runs a node may set `starting` for the duration of
one request; the nodes await it at that moment, and a failure there stops the request before its
side effect."""

from collections.abc import Awaitable, Callable
from contextvars import ContextVar

# A context variable rather than a parameter: the moment is deep inside each node, and a request's
# task (and the tasks it starts) carries it there without every signature on the way knowing.
starting: ContextVar[Callable[[], Awaitable[None]] | None] = ContextVar(
    "side_effect_starting", default=None
)


async def side_effect_starts() -> None:
    hook = starting.get()
    if hook is not None:
        await hook()
