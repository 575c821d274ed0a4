"""Running requests: one module per family, and the table the handler dispatches on.

A new family (a command, say) is a module with the four methods of `Family`, a row in `families`
and a row in the subject table (`subjects.py`).
"""

from typing import Any

from ..outgoing import Outgoing
from ..subjects import Kind
from .family import Family, Nodes
from .mcp import McpCalls
from .observe import Observations
from .output import Deliveries
from .shutdown import Shutdown
from .tool import ToolCalls
from .tool_list import ToolLists

__all__ = [
    "Deliveries",
    "Family",
    "McpCalls",
    "Nodes",
    "Observations",
    "Shutdown",
    "ToolCalls",
    "ToolLists",
    "families",
]


def families(
    worker: Nodes,
    outgoing: Outgoing,
    shutdown: Shutdown,
    *,
    tool_timeout: float | None = 60.0,
) -> dict[Kind, Family[Any]]:
    """One family per request subject, sharing the worker's nodes, publish rules and shutdown."""
    return {
        "tool": ToolCalls(worker, outgoing, shutdown, timeout=tool_timeout),
        "mcp": McpCalls(worker, outgoing, shutdown),
        "observe": Observations(worker, outgoing),
        "output": Deliveries(worker, outgoing, shutdown),
        "list": ToolLists(worker, outgoing),
    }
