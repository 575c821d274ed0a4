"""Running requests: one module per family, and the serving table the handler dispatches on.

A new family is a module with the four methods of `Family` and a row in `SERVING`, beside its row
in the wire table (`contracts/wire.py`); docs/architecture.md, "Where a change goes".
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...config import defaults
from ...contracts.wire import Kind
from ...errors import InteractionWorkerError
from ...ledger import Ledger
from ..endpoints import Measures
from ..outgoing import Outgoing
from .command import Catalogs, Commands
from .family import Family, Nodes
from .ledgered import DeliveryTerms, Ledgered, McpTerms, Terms, ToolTerms
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
    "SERVING",
    "Served",
    "Shutdown",
    "ToolCalls",
    "ToolLists",
    "families",
    "ledgered",
    "measured",
]


@dataclass(frozen=True, slots=True)
class Parts:
    """What every family is built from: the worker's nodes, its publish rules and shutdown."""

    worker: Nodes
    outgoing: Outgoing
    shutdown: Shutdown
    tool_timeout: float | None


@dataclass(frozen=True, slots=True)
class Redelivery:
    """Durable mode's answer to an outcome that started nothing (`Redelivered`)."""

    not_started: Callable[[Any], bool]
    last: Callable[[Any], InteractionWorkerError] | None = None


@dataclass(frozen=True, slots=True)
class Served:
    """How a worker serves one kind.

    Attributes:
        family: its family, or None when this worker cannot serve it (the command protocol without
            a dispatcher).
        status: its outcome as the metrics count it.
        terms: what the ledger keys and records of it; None when it runs under no claim.
        redelivery: what comes back later in durable mode; None when every outcome is answered.
    """

    family: Callable[[Parts], Family[Any] | None]
    status: StatusOf
    terms: Callable[[Parts], Terms[Any]] | None = None
    redelivery: Redelivery | None = None


def _commands(parts: Parts) -> Family[Any] | None:
    commands = parts.worker.commands
    if commands is None:
        return None
    return Commands(commands, parts.worker.sandbox, parts.outgoing)


def _catalogs(parts: Parts) -> Family[Any] | None:
    commands = parts.worker.commands
    if commands is None:
        return None
    return Catalogs(commands, parts.worker.sandbox, parts.outgoing)


# One row per kind of the wire table, in its order (a test holds the keys equal); commands run under
# no claim: they are delivered at least once (docs/commands.md).
SERVING: dict[Kind, Served] = {
    "tool": Served(
        lambda p: ToolCalls(p.worker, p.outgoing, p.shutdown, timeout=p.tool_timeout),
        tool_status,
        terms=lambda p: ToolTerms(p.worker, p.outgoing),
    ),
    "mcp": Served(
        lambda p: McpCalls(p.worker, p.outgoing, p.shutdown),
        mcp_status,
        terms=lambda p: McpTerms(p.outgoing),
        redelivery=Redelivery(invoke_not_started, refuse_invoke),
    ),
    "observe": Served(lambda p: Observations(p.worker, p.outgoing), answered),
    "output": Served(
        lambda p: Deliveries(p.worker, p.outgoing, p.shutdown),
        receipt_status,
        terms=lambda p: DeliveryTerms(p.outgoing),
        redelivery=Redelivery(nothing_sent),
    ),
    "list": Served(lambda p: ToolLists(p.worker, p.outgoing), answered),
    "command": Served(_commands, answered),
    "catalog": Served(_catalogs, answered),
}


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
    sharing its nodes, publish rules and shutdown; with a ledger, the families with terms run under
    its claims; `durable`, an outcome that started nothing comes back later (`Redelivered`)."""
    parts = Parts(worker, outgoing, shutdown, tool_timeout)
    table: dict[Kind, Family[Any]] = {}
    for kind, served in SERVING.items():
        family = served.family(parts)
        if family is None:
            continue
        if ledger is not None and served.terms is not None:
            family = Ledgered(family, served.terms(parts), ledger)
        if durable and served.redelivery is not None:
            redelivery = served.redelivery
            family = Redelivered(family, redelivery.not_started, redelivery.last)
        table[kind] = family
    return table


def measured(
    table: dict[Kind, Family[Any]],
) -> tuple[dict[Kind, Family[Any]], dict[Kind, Measures]]:
    """The families of `table`, each wrapped by `Measured`, and what each one measures."""
    measures = {kind: Measures() for kind in table}
    wrapped: dict[Kind, Family[Any]] = {
        kind: Measured(family, measures[kind], SERVING[kind].status)
        for kind, family in table.items()
    }
    return wrapped, measures


def ledgered(family: Family[Any]) -> Ledgered[Any] | None:
    """The `Ledgered` inside `family`'s wrappers, if the family runs under the ledger."""
    while isinstance(family, Measured | Redelivered):
        family = family.family
    return family if isinstance(family, Ledgered) else None
