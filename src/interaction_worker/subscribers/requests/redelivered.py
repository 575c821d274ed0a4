"""Durable mode's answer to a message whose side effect certainly did not start (wire.md 7): an MCP
invoke whose server was not connected, a delivery that no sink could send. It comes back later
(negatively acknowledged, after the next `durable.nak_backoff` delay) on every executed delivery but
the last; on the last, an invoke is refused `UNAVAILABLE` (its dead letter is its only event) and a
delivery publishes its `rejected` receipt.

Core mode publishes these outcomes as they are, for the caller to retry, so only a durable handler
wraps its families with `Redelivered`, the ledger's or not: the decision does not depend on the
ledger. With the ledger on it sits outside `Ledgered`, which has released the claim by then.
"""

from collections.abc import Callable
from typing import Any, TypeVar

from ...contracts import ExternalResult, McpInvokeOutput, OutputReceipt
from ...errors import InteractionWorkerError, Unavailable
from ..delivery import Redeliver, may_redeliver
from ..incoming import Incoming
from .family import Family
from .wrapper import Wrapper

Outcome = TypeVar("Outcome")

# The failure of an MCP invoke that says the server was not asked.
_NOT_CONNECTED = "MCP_UNAVAILABLE"
# Refused for the server's credentials (MCP_UNAUTHORIZED): nothing ran either, but delivering it
# again cannot help before a person signs in, so only the ledger's claim is released for it.
_NOT_ASKED = frozenset({_NOT_CONNECTED, "MCP_UNAUTHORIZED"})
# A sink's refusal that says nothing was sent (it could not connect).
_NOT_SENT = "SINK_UNAVAILABLE"


def invoke_not_started(outcome: object) -> bool:
    """Whether an MCP outcome is an invoke whose server was not connected (nothing was sent)."""
    result = outcome.result if isinstance(outcome, McpInvokeOutput) else outcome
    return (
        isinstance(result, ExternalResult)
        and result.error is not None
        and result.error.code == _NOT_CONNECTED
    )


def invoke_not_sent(outcome: object) -> bool:
    """Whether an MCP outcome is an invoke the server certainly did not run: not connected, or
    refused for its credentials (the ledger's claim is released, so a retry runs it)."""
    result = outcome.result if isinstance(outcome, McpInvokeOutput) else outcome
    return (
        isinstance(result, ExternalResult)
        and result.error is not None
        and result.error.code in _NOT_ASKED
    )


def nothing_sent(receipt: OutputReceipt) -> bool:
    """Whether every sink certainly sent nothing (not connected: SINK_UNAVAILABLE); a fan-out's
    receipt says it sink by sink (`metadata.sinks`)."""
    if receipt.status != "rejected":
        return False
    sinks = (receipt.metadata or {}).get("sinks")
    if isinstance(sinks, dict) and sinks:
        return all(_sink_sent_nothing(each) for each in sinks.values())
    return receipt.error is not None and receipt.error.code == _NOT_SENT


def _sink_sent_nothing(answer: object) -> bool:
    error = answer.get("error") if isinstance(answer, dict) else None
    return isinstance(error, dict) and error.get("code") == _NOT_SENT


def refuse_invoke(outcome: object) -> InteractionWorkerError:
    return Unavailable("MCP server is not connected")


class Redelivered(Wrapper[Outcome]):
    """A `Family` whose outcomes that started nothing come back later in durable mode.

    Args:
        not_started: whether an outcome says its side effect certainly did not start.
        last: the refusal of such an outcome on its last executed delivery; None publishes it.
    """

    def __init__(
        self,
        family: Family[Outcome],
        not_started: Callable[[Outcome], bool],
        last: Callable[[Outcome], InteractionWorkerError] | None = None,
    ) -> None:
        super().__init__(family)
        self.not_started = not_started
        self.last = last

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> Outcome:
        outcome = await self.family.run(body, identifier, msg)
        if not self.not_started(outcome):
            return outcome
        if may_redeliver():
            raise Redeliver
        if self.last is not None:
            raise self.last(outcome)
        return outcome
