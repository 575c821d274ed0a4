"""Metrics on the request path (docs/configuration.md, "Metrics and health"): a family wrapped so
that its runs are timed and counted in flight, and its outcomes counted by status.

Only a worker serving metrics wraps its families (`MessageHandler.measure`); without metrics the
families run as they are, so the hot path costs what discovery's counters cost and nothing more.
The wrapper sits outermost, around `Ledgered`: an outcome answered from the ledger's record is
counted as the outcome it is.
"""

from collections.abc import Callable
from typing import Any, TypeVar

from ...contracts import ExternalResult, McpInvokeOutput, OutputReceipt
from ..endpoints import Measures, clock
from ..incoming import Incoming
from ..outgoing import Publish
from .family import Family
from .wrapper import Wrapper

Outcome = TypeVar("Outcome")
StatusOf = Callable[[Any], str]

_RECEIPT_OUTCOMES = {"accepted": "success", "rejected": "failed"}


def tool_status(outcome: dict[str, Any]) -> str:
    """A tool call's outcome is the result's wire document."""
    status: str = outcome["status"]
    return status


def mcp_status(outcome: object) -> str:
    """An invoke's result status; a discover that answered is a success."""
    if isinstance(outcome, McpInvokeOutput):
        return outcome.result.status
    if isinstance(outcome, ExternalResult):
        return outcome.status
    return "success"


def receipt_status(outcome: OutputReceipt) -> str:
    """A receipt as an outcome: accepted is a success, rejected a failure, unknown stays unknown."""
    return _RECEIPT_OUTCOMES.get(outcome.status, "unknown")


def answered(outcome: object) -> str:
    """Observations and tool lists: an answer is a success (a failure is a refusal)."""
    return "success"


class Measured(Wrapper[Outcome]):
    """A `Family` whose runs are timed and counted in flight, and whose outcomes are counted by
    status once their publishes are built (an outcome refused on the way, as one too large to
    publish, is counted as the refusal it becomes)."""

    def __init__(
        self, family: Family[Outcome], measures: Measures, status_of: StatusOf
    ) -> None:
        super().__init__(family)
        self.measures = measures
        self.status_of = status_of

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> Outcome:
        measures = self.measures
        measures.in_flight += 1
        started = clock()
        try:
            return await self.family.run(body, identifier, msg)
        finally:
            measures.in_flight -= 1
            measures.durations.observe(clock() - started)

    def publishes(
        self, outcome: Outcome, msg: Incoming, key: str, target: str | None
    ) -> list[Publish]:
        publishes = self.family.publishes(outcome, msg, key, target)
        status = self.status_of(outcome)
        outcomes = self.measures.outcomes
        outcomes[status] = outcomes.get(status, 0) + 1
        return publishes
