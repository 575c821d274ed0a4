"""The ledger on the request path (wire.md 8): tool calls, MCP invokes and deliveries run under a
claim on their id, so a retry never runs a side effect twice.

`Ledgered` wraps a family: before it runs, the id is claimed (or its recorded outcome found, or the
retry refused); right before the side effect, the claim becomes `started` (the nodes call
`nodes.side_effects.starting` there); after it, the outcome is recorded, then published as usual.
What each family contributes (what the id stands for, its `unknown` outcome, how its outcome is
recorded and read back) is its `Terms`. Nothing else on the request path knows about the ledger.
"""

import asyncio
from typing import Any, Protocol, TypeVar

from ...contracts import ContractError, ExternalResult, McpInvokeOutput, OutputReceipt
from ...contracts import validation as check
from ...contracts.keys import subject_key
from ...errors import (
    ERROR_CLASSES,
    IdReused,
    InProgress,
    InteractionWorkerError,
    Internal,
    Unavailable,
)
from ...ledger import (
    CorruptRecord,
    Encoded,
    FingerprintMismatch,
    Ledger,
    Recorded,
    StillRunning,
    StoreUnavailable,
    fingerprint,
)
from ...nodes.side_effects import starting
from ..delivery import Redeliver, may_redeliver
from ..delivery import current as current_delivery
from ..incoming import Incoming
from ..outgoing import Outgoing
from .family import Family, Nodes
from .redelivered import invoke_not_sent, nothing_sent
from .shutdown import being_cancelled, failure
from .wrapper import Wrapper

Outcome = TypeVar("Outcome")

UNKNOWN_MESSAGE = "A previous attempt started and its outcome was not recorded"
# Seconds before a message past its last attempt looks at the ledger again when it was away.
_AWAY = 1.0
_CODES = {error.code: error for error in ERROR_CLASSES}


class Terms(Protocol[Outcome]):
    """What the ledger needs to know of one family's requests and outcomes."""

    kind: str  # the key's first token: tool, mcp, output
    label: str  # how the error messages name the id

    def request(self, body: dict[str, Any]) -> tuple[object, bool] | None:
        """What the id stands for (fingerprinted) and whether it may run again after a crash;
        None when the body is not a request the ledger keys (the family refuses or serves it)."""
        ...

    def unknown(self, body: dict[str, Any], identifier: str) -> Outcome: ...

    def record(self, outcome: Outcome) -> dict[str, Any] | None:
        """The `done` record's outcome field; None when the outcome says nothing started."""
        ...

    def recorded(self, outcome: dict[str, Any]) -> Outcome: ...


class Ledgered(Wrapper[Outcome]):
    """A `Family` whose requests are claimed in the ledger before they run."""

    def __init__(
        self, family: Family[Outcome], terms: Terms[Outcome], ledger: Ledger
    ) -> None:
        super().__init__(family)
        self.terms = terms
        self.ledger = ledger

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> Outcome:
        terms = self.terms
        request = terms.request(body) if identifier is not None else None
        if request is None or identifier is None:
            return await self.family.run(body, identifier, msg)
        what, rerunnable = request
        key = f"{terms.kind}.{subject_key(identifier)}"
        try:
            begun = await self.ledger.begin(
                key, fingerprint(what), rerunnable=rerunnable
            )
        except FingerprintMismatch:
            raise IdReused(
                f"{terms.label} was already used for a different request"
            ) from None
        except CorruptRecord:
            raise self._unusable() from None
        except StillRunning as running:
            if current_delivery.get() is not None:
                # Durable mode: it comes back when that attempt's lease would have run out.
                raise Redeliver(max(running.lease_left, 0.0) + 0.1) from None
            raise InProgress(f"{terms.label} is still being executed") from None
        except StoreUnavailable:
            if may_redeliver():
                raise Redeliver from None
            raise Unavailable("The idempotency ledger is unavailable") from None
        if isinstance(begun, Recorded):
            delivery = current_delivery.get()
            if delivery is not None:
                delivery.first_sent = begun.at
            return self._from_record(key, identifier, begun.outcome)
        claim = begun
        # The lease is renewed while the message runs, never after it, however it ends.
        try:
            if claim.unknown:
                outcome = terms.unknown(body, identifier)
                _recorded(await claim.done(terms.record(outcome) or {}))
                return outcome
            token = starting.set(claim.start)
            try:
                outcome = await self.family.run(body, identifier, msg)
            except StoreUnavailable:
                # The `started` mark could not be written: the side effect did not start.
                await claim.release()
                if may_redeliver():
                    raise Redeliver from None
                raise Unavailable("The idempotency ledger is unavailable") from None
            except (Exception, asyncio.CancelledError) as error:
                if isinstance(error, asyncio.CancelledError) and being_cancelled():
                    raise  # the request is being cancelled: its claim is left to its lease
                # Any other failure, a CancelledError the call raised itself included.
                if not claim.started:
                    await claim.release()
                    raise
                refusal = (
                    error if isinstance(error, InteractionWorkerError) else Internal()
                )
                _recorded(
                    await claim.done(
                        {"error": {"code": refusal.code, "message": refusal.message}}
                    )
                )
                raise
            finally:
                starting.reset(token)
            recorded = terms.record(outcome) if claim.started else None
            if recorded is None:
                # Nothing started: a retry runs it (in durable mode, `Redelivered` sends it back).
                await claim.release()
            else:
                _recorded(await claim.done(recorded))
            return outcome
        finally:
            claim.abandon()

    async def resolve(self, body: dict[str, Any], identifier: str) -> Outcome | None:
        """The outcome of a durable message delivered past its last attempt (wire.md 7): the
        recorded one, or `unknown` for a call of a write tool left started; None otherwise (it never
        started, or it may run again but failed every attempt): it is then dead-lettered.

        Raises:
            Redeliver: look again after its delay: a live claim holds the id (its outcome is still
                to come), a `started` claim has not been seen unchanged for a further lease yet, or
                the ledger is away.
        """
        terms = self.terms
        request = terms.request(body)
        if request is None:
            return None
        what, rerunnable = request
        key = f"{terms.kind}.{subject_key(identifier)}"
        ledger = self.ledger
        try:
            found = await ledger.lookup(key)
        except StoreUnavailable:
            raise Redeliver(_AWAY) from None
        except CorruptRecord:
            raise self._unusable() from None
        if found is None:
            return None
        record, revision = found
        if record.fingerprint != fingerprint(what):
            return None
        if record.outcome is not None:
            delivery = current_delivery.get()
            if delivery is not None:
                delivery.first_sent = record.at
            return self._from_record(key, identifier, record.outcome)
        assert record.lease_until is not None  # decode's rule for claims
        left = record.lease_until - ledger.clock()
        if (
            left <= 0
            and record.state == "started"
            and not rerunnable
            and ledger.persistent
        ):
            left = ledger.stale_for(key, revision)
        if left > 0:
            raise Redeliver(left + 0.1)
        if record.state != "started" or rerunnable:
            return None
        outcome = terms.unknown(body, identifier)
        try:
            settled = await ledger.settle(
                key, revision, record.fingerprint, terms.record(outcome) or {}
            )
        except StoreUnavailable:
            raise Redeliver(_AWAY) from None
        if not settled:
            raise Redeliver(0.0)  # the key changed: read it again
        return outcome

    def _from_record(
        self, key: str, identifier: str, outcome: dict[str, Any]
    ) -> Outcome:
        """The outcome recorded under `key`, answered again: its result or receipt, or its refusal.

        Raises:
            IdReused: what is recorded is no outcome a worker could have written for `identifier`
                (reported).
        """
        error = outcome.get("error")
        if error is not None:
            refusal = _recorded_error(error)
            if refusal is None:
                self.ledger.invalid(key)
                raise self._unusable()
            raise refusal
        recorded = outcome.get("result", outcome.get("receipt"))
        own = "callId" if "result" in outcome else "deliveryId"
        try:
            if not isinstance(recorded, dict) or recorded.get(own) != identifier:
                raise ValueError("the outcome of another id")
            return self.terms.recorded(outcome)
        except (ContractError, KeyError, TypeError, ValueError):
            self.ledger.invalid(key)
            raise self._unusable() from None

    def _unusable(self) -> IdReused:
        """The refusal of an id whose ledger entry no worker wrote (wire.md 8). Not run: that entry
        may have replaced the record of a call that ran, and running it again could repeat its side
        effect. Not INTERNAL: nothing in the worker failed, and the same id will be refused until
        the entry expires, which the caller must hear to choose another."""
        return IdReused(
            f"{self.terms.label} cannot be used: its ledger entry is not a ledger record"
        )


def _recorded(done: bool) -> None:
    """Tell the durable binding when the outcome could not be recorded (it then does not ack)."""
    delivery = current_delivery.get()
    if delivery is not None and not done:
        delivery.recorded = False


def _recorded_error(error: Any) -> InteractionWorkerError | None:
    """The refusal a `done` record holds; None when it is not one a worker writes."""
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        kind = _CODES.get(error["code"], Internal)
        message = error.get("message")
        return kind(message if isinstance(message, str) else None)
    return None


class ToolTerms:
    kind = "tool"
    label = "call.id"

    def __init__(self, worker: Nodes, outgoing: Outgoing) -> None:
        self.worker = worker
        self.outgoing = outgoing

    def request(self, body: dict[str, Any]) -> tuple[object, bool] | None:
        call = body.get("call")
        name = call.get("name") if type(call) is dict else None
        if type(call) is not dict or type(name) is not str:
            return None
        what = {"tool": name, "arguments": call.get("arguments", {})}
        return what, self.worker.rerunnable(name)

    def unknown(self, body: dict[str, Any], identifier: str) -> dict[str, Any]:
        name = body["call"]["name"]
        return failure(
            identifier, name, "unknown", "OUTCOME_UNKNOWN", UNKNOWN_MESSAGE
        ).to_wire()

    def record(self, outcome: dict[str, Any]) -> dict[str, Any] | None:
        result, result_json, _ = self.outgoing.fit_result(outcome, None)
        return {"result": Encoded(result, result_json)}

    def recorded(self, outcome: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = outcome["result"]
        check.external_result(result)  # published as it is: it must be a result
        return result


McpOutcome = McpInvokeOutput | ExternalResult


class McpTerms:
    """MCP invokes; a discover has no side effect and no ledger entry. An MCP tool is never run
    again after a crash: the worker cannot know it is idempotent."""

    kind = "mcp"
    label = "call.id"

    def __init__(self, outgoing: Outgoing) -> None:
        self.outgoing = outgoing

    def request(self, body: dict[str, Any]) -> tuple[object, bool] | None:
        call = body.get("call")
        server = body.get("server")
        if body.get("operation") != "invoke" or type(call) is not dict:
            return None
        name = call.get("name")
        if type(server) is not str or type(name) is not str:
            return None
        return {
            "server": server,
            "tool": name,
            "arguments": call.get("arguments", {}),
        }, False

    def unknown(self, body: dict[str, Any], identifier: str) -> McpOutcome:
        source = f"{body['server']}:{body['call']['name']}"
        return failure(
            identifier, source, "unknown", "OUTCOME_UNKNOWN", UNKNOWN_MESSAGE
        )

    def record(self, outcome: McpOutcome | Any) -> dict[str, Any] | None:
        result = outcome.result if isinstance(outcome, McpInvokeOutput) else outcome
        if not isinstance(result, ExternalResult) or invoke_not_sent(result):
            return None
        document, document_json, _ = self.outgoing.fit_result(
            result.to_wire(), "invoke"
        )
        return {"result": Encoded(document, document_json)}

    def recorded(self, outcome: dict[str, Any]) -> McpOutcome:
        return check.external_result(outcome["result"])


class DeliveryTerms:
    kind = "output"
    label = "deliveryId"

    def __init__(self, outgoing: Outgoing) -> None:
        self.outgoing = outgoing

    def request(self, body: dict[str, Any]) -> tuple[object, bool] | None:
        what = {
            name: body[name]
            for name in ("deliveryId", "message", "artifacts")
            if name in body
        }
        return what, False

    def unknown(self, body: dict[str, Any], identifier: str) -> OutputReceipt:
        return check.output_receipt(
            {
                "deliveryId": identifier,
                "status": "unknown",
                "error": {
                    "code": "OUTCOME_UNKNOWN",
                    "message": UNKNOWN_MESSAGE,
                    "retryable": False,
                },
            }
        )

    def record(self, outcome: OutputReceipt) -> dict[str, Any] | None:
        if nothing_sent(outcome):
            return None
        receipt, _ = self.outgoing.fit_receipt(outcome)
        return {"receipt": receipt.to_wire()}

    def recorded(self, outcome: dict[str, Any]) -> OutputReceipt:
        return check.output_receipt(outcome["receipt"])
