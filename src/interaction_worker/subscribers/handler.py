"""One message in, its publishes out: the transport-neutral handling shared by both bindings.

The table of contents of a request: where its reply goes (`incoming`), its body and id, its family's
outcome (`requests`) and what that publishes (`outgoing`); or, for any exception on the way, its
refusal (`refusals`: the error reply and the dead letter). A message's publishes are computed
completely before any is sent, so a refusal never follows a half-published success.

The tool call is the hot path, counted in instructions (docs/benchmarks.md): it runs in `handle` and
one coroutine of its family, beside the tool's own. Its counters for discovery (`endpoints`) are
kept by the bindings and the dispatcher around `handle`, its refusals by `refusals`; with metrics
on, `measure` wraps each family to time it and count its outcomes.
"""

import asyncio
import logging
from collections.abc import Callable, Collection

from ..config import defaults
from ..contracts import JsonRefused, parse_json_object
from ..contracts.keys import NO_KEY, subject_key
from ..contracts.serving import served_kinds
from ..contracts.wire import KINDS, Kind, Subjects
from ..errors import InteractionWorkerError, InvalidJson, Unavailable
from ..ledger import RECORD_ENVELOPE, CountedStore, Ledger
from .dead_letters import UtcTimestamps
from .delivery import Redeliver
from .endpoints import Endpoint, Measures
from .incoming import (
    Incoming,
    ReplyTarget,
    account_reply_target,
    own_prefixes,
    own_reply,
    reply_target,
)
from .outgoing import Outgoing, Publish
from .refusals import Refusals
from .requests import Nodes, Shutdown, families, ledgered, measured
from .requests.shutdown import being_cancelled

_LOGGER = logging.getLogger("interaction_worker")


class MessageHandler:
    """Runs one message through the worker's nodes and says what to publish.

    Args:
        max_payload: the server's limit; replies and events that would exceed it are replaced.
        tool_timeout: seconds a tool may run before it is cancelled with TOOL_TIMEOUT.
        ledger: the idempotency ledger the calls and deliveries run under (wire.md 8), if any.
        durable: the handler of a durable binding (wire.md 7): what certainly did not start comes
            back later instead of being answered.
        account_inboxes: a request that came through an account's import may ask for its reply
            only under that account's inbox slice (`subjects.account_inboxes`).
        clock: the `receivedAt` of dead letters.
        serve: the serve names (docs/configuration.md, `serve`) whose kinds are handled; None: all.
    """

    def __init__(
        self,
        worker: Nodes,
        *,
        subjects: Subjects,
        reply_prefixes: tuple[str, ...] = defaults.REPLY_PREFIXES,
        max_payload: int = defaults.MAX_PAYLOAD,
        tool_timeout: float | None = defaults.TOOL_TIMEOUT,
        clock: Callable[[], str] | None = None,
        logger: logging.Logger = _LOGGER,
        ledger: Ledger | None = None,
        durable: bool = False,
        account_inboxes: bool = False,
        serve: Collection[str] | None = None,
    ) -> None:
        self.worker = worker
        self.subjects = subjects
        self.reply_prefixes = reply_prefixes
        # Chosen once: with the setting off, a request pays nothing for it.
        self._reply_target: ReplyTarget = (
            account_reply_target if account_inboxes else reply_target
        )
        # Where a message's own reply subject may point (docs/wire.md 7).
        self.own_prefixes = own_prefixes(reply_prefixes)
        self.outgoing = Outgoing(subjects, max_payload)
        if ledger is not None:
            self.outgoing.record_allowance = RECORD_ENVELOPE
        self.ledger = ledger
        self.endpoints = {
            kind: Endpoint(kind, subjects.request(kind)) for kind in KINDS
        }
        self.refusals = Refusals(
            self.outgoing, clock or UtcTimestamps(), self.endpoints, logger
        )
        # Set by `measure`: what the metrics read beyond the endpoints' counters.
        self.measures: dict[Kind, Measures] | None = None
        self.shutdown = Shutdown()
        self.families = families(
            worker,
            self.outgoing,
            self.shutdown,
            tool_timeout=tool_timeout,
            ledger=ledger,
            durable=durable,
        )
        if serve is not None:
            # Only the kinds this worker is told to serve have a family: the bindings subscribe,
            # the calls stream captures, discovery and the metrics list what the handler has.
            kinds = served_kinds(serve)
            self.families = {k: f for k, f in self.families.items() if k in kinds}
        # The request subjects served: the command protocol's only with a dispatcher.
        self.kinds: tuple[Kind, ...] = tuple(self.families)

    def measure(self) -> None:
        """Measure for the metrics from now on (docs/configuration.md, "Metrics and health"): each
        family's runs timed and counted in flight, its outcomes counted by status, and the ledger's
        operations counted. Once; a worker without metrics never calls it, and its requests pay none
        of this."""
        if self.measures is not None:
            return
        self.families, self.measures = measured(self.families)
        if self.ledger is not None:
            self.ledger.store = CountedStore(self.ledger.store)

    @property
    def max_payload(self) -> int:
        return self.outgoing.max_payload

    @max_payload.setter
    def max_payload(self, value: int) -> None:
        self.outgoing.max_payload = value

    @property
    def header_allowance(self) -> int:
        """Header bytes a binding adds to every publish beyond the handler's own (FastStream's)."""
        return self.outgoing.header_allowance

    @header_allowance.setter
    def header_allowance(self, value: int) -> None:
        self.outgoing.header_allowance = value

    @property
    def shutting_down(self) -> bool:
        """Set when shutdown cancels running calls: their cancellation becomes a WORKER_SHUTDOWN outcome."""
        return self.shutdown.started

    @shutting_down.setter
    def shutting_down(self, value: bool) -> None:
        self.shutdown.started = value

    def reply_target(
        self, msg: Incoming
    ) -> tuple[str | None, InteractionWorkerError | None]:
        """Where the reply goes: a valid Interaction-Reply-To header, else the reply subject."""
        return self._reply_target(msg, self.reply_prefixes, self.own_prefixes)

    async def handle(self, kind: Kind, msg: Incoming) -> list[Publish]:
        family = self.families[kind]
        if msg.headers:
            target, reply_error = self._reply_target(
                msg, self.reply_prefixes, self.own_prefixes
            )
        else:
            # `own_reply`'s rule, without a call for the common case of a reply it allows.
            target, reply_error = msg.reply or None, None
            if target is not None and not target.startswith(self.own_prefixes):
                target, reply_error = own_reply(target, self.own_prefixes)
        body = None
        key, identifier = NO_KEY, None
        try:
            # Strict JSON (wire.md 1), parsed here rather than in a helper: one frame less per message.
            try:
                body = parse_json_object(msg.data)
            except JsonRefused as refused:
                raise InvalidJson(f"Invalid JSON: {refused.message}") from None
            identifier = family.identify(body, msg)
            if identifier is not None:
                key = subject_key(identifier)
            if reply_error is not None:
                raise reply_error
            outcome = await family.run(body, identifier, msg)
            return family.publishes(outcome, msg, key, target)
        except Redeliver:
            raise
        except (Exception, asyncio.CancelledError) as error:
            # A cancellation of this task (shutdown, or a stray one) is its owner's to answer: the
            # binding that runs it. A CancelledError the request's code raised while its task is not
            # being cancelled is that code's failure, refused as any other exception.
            if isinstance(error, asyncio.CancelledError) and being_cancelled():
                raise
            return self.refusals.refuse(
                kind,
                msg,
                error,
                key=key,
                identifier=identifier,
                target=target,
                id_names=family.id_names(body) if body is not None else None,
            )

    async def resolve_exhausted(
        self, kind: Kind, msg: Incoming, attempts: int
    ) -> list[Publish]:
        """A durable message delivered once more than its executed attempts (its worker died during
        the last one): never run again. Its recorded outcome is published (`unknown` for a call left
        started); else it is dead-lettered, UNAVAILABLE "Gave up after N deliveries" (wire.md 7).

        Raises:
            Redeliver: not yet: a live claim holds its id, or the ledger is away (look again after
                its delay).
        """
        family = self.families[kind]
        target, _ = self._reply_target(msg, self.reply_prefixes, self.own_prefixes)
        body = None
        key, identifier = NO_KEY, None
        try:
            try:
                body = parse_json_object(msg.data)
            except JsonRefused as refused:
                raise InvalidJson(f"Invalid JSON: {refused.message}") from None
            identifier = family.identify(body, msg)
            if identifier is not None:
                key = subject_key(identifier)
            # The ledgered family may be inside wrappers (`Measured`, `Redelivered`): resolved
            # there, published (and counted) through the outer one.
            inner = ledgered(family)
            if inner is not None and identifier is not None:
                outcome = await inner.resolve(body, identifier)
                if outcome is not None:
                    return family.publishes(outcome, msg, key, target)
            raise Unavailable(f"Gave up after {attempts} deliveries")
        except Redeliver:
            raise  # a live claim, or the ledger away: the binding looks again
        except Exception as error:
            return self.refusals.refuse(
                kind,
                msg,
                error,
                key=key,
                identifier=identifier,
                target=target,
                id_names=family.id_names(body) if body is not None else None,
            )

    def refuse(
        self,
        kind: Kind,
        msg: Incoming,
        error: InteractionWorkerError,
        *,
        target: str | None = None,
    ) -> list[Publish]:
        """The error reply (when there is somewhere to send it) and the dead letter of a message
        refused before it was read (OVERLOADED, SHUTTING_DOWN)."""
        return self.refusals.refuse(kind, msg, error, target=target)
