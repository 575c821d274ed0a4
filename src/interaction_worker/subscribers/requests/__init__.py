"""Running requests: one module per family, and the table the handler dispatches on.

A new family is a module with the four methods of `Family`, a row in `families` and a row in the
subject table (`subjects.py`).
"""

from typing import Any

from ...config import defaults
from ...contracts.wire import Kind
from ...ledger import Ledger
from ..endpoints import Measures
from ..outgoing import Outgoing
from .command import Catalogs, Commands
from .family import Family, Nodes
from .ledgered import DeliveryTerms, Ledgered, McpTerms, ToolTerms
from .mcp import McpCalls
from .measured import (
    Measured,
    StatusOf,
    answered,
    mcp_status,
    receipt_status,
    tool_status,
)
from .observe import Observations
from .output import Deliveries
from .redelivered import Redelivered, invoke_not_started, nothing_sent, refuse_invoke
from .shutdown import Shutdown
from .tool import ToolCalls
from .tool_list import ToolLists

__all__ = [
    "Catalogs",
    "Commands",
    "Deliveries",
    "Family",
    "Ledgered",
    "McpCalls",
    "Measured",
    "Nodes",
    "Observations",
    "Redelivered",
    "Shutdown",
    "ToolCalls",
    "ToolLists",
    "families",
    "ledgered",
    "measured",
]


def families(
    worker: Nodes,
    outgoing: Outgoing,
    shutdown: Shutdown,
    *,
    tool_timeout: float | None = defaults.TOOL_TIMEOUT,
    ledger: Ledger | None = None,
    durable: bool = False,
) -> dict[Kind, Family[Any]]:
    """One family per request subject the worker serves (the commands' when it has a dispatcher),
    sharing its nodes, publish rules and shutdown; with a ledger, the families with side effects
    run under its claims (commands never: they are delivered at least once); `durable`, an MCP
    invoke or a delivery that started nothing comes back later (`Redelivered`)."""
    tool: Family[Any] = ToolCalls(worker, outgoing, shutdown, timeout=tool_timeout)
    mcp: Family[Any] = McpCalls(worker, outgoing, shutdown)
    output: Family[Any] = Deliveries(worker, outgoing, shutdown)
    if ledger is not None:
        tool = Ledgered(tool, ToolTerms(worker, outgoing), ledger)
        mcp = Ledgered(mcp, McpTerms(outgoing), ledger)
        output = Ledgered(output, DeliveryTerms(outgoing), ledger)
    if durable:
        mcp = Redelivered(mcp, invoke_not_started, refuse_invoke)
        output = Redelivered(output, nothing_sent)
    table: dict[Kind, Family[Any]] = {
        "tool": tool,
        "mcp": mcp,
        "observe": Observations(worker, outgoing),
        "output": output,
        "list": ToolLists(worker, outgoing),
    }
    if worker.commands is not None:
        table["command"] = Commands(worker.commands, worker.sandbox, outgoing)
        table["catalog"] = Catalogs(worker.commands, worker.sandbox, outgoing)
    return table


_STATUS_OF: dict[Kind, StatusOf] = {
    "tool": tool_status,
    "mcp": mcp_status,
    "observe": answered,
    "output": receipt_status,
    "list": answered,
    "command": answered,
    "catalog": answered,
}


def measured(
    table: dict[Kind, Family[Any]],
) -> tuple[dict[Kind, Family[Any]], dict[Kind, Measures]]:
    """The families of `table`, each wrapped by `Measured`, and what each one measures."""
    measures = {kind: Measures() for kind in table}
    wrapped: dict[Kind, Family[Any]] = {
        kind: Measured(family, measures[kind], _STATUS_OF[kind])
        for kind, family in table.items()
    }
    return wrapped, measures


def ledgered(family: Family[Any]) -> Ledgered[Any] | None:
    """The `Ledgered` inside `family`'s wrappers, if the family runs under the ledger."""
    while isinstance(family, Measured | Redelivered):
        family = family.family
    return family if isinstance(family, Ledgered) else None
