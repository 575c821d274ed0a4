"""Refusals: the one place that turns exceptions into error replies and dead letters (wire.md 4-5).

A refused message publishes no event: its error reply, when it has somewhere to go, and its dead
letter, which carries the original body, so nothing is lost.
"""

import itertools
import json
import logging
import uuid
from collections.abc import Callable

from ..contracts.keys import NO_KEY, headers_size
from ..contracts.wire import SERVICE_ERROR_HEADER, IdNames, Kind
from ..errors import InteractionWorkerError, Internal
from .dead_letters import (
    DeadLetterInput,
    dead_letter_body,
    dead_letter_headers,
)
from .delivery import current as current_delivery
from .endpoints import Endpoint
from .incoming import Incoming
from .outgoing import Outgoing, Publish, trace_headers

_LOGGER = logging.getLogger("interaction_worker")


def error_reply(error: InteractionWorkerError) -> tuple[bytes, dict[str, str]]:
    """The NATS services convention: the code and message in headers and in the body."""
    body = json.dumps(
        {"error": {"code": error.code, "message": error.message, **error.details()}},
        ensure_ascii=False,
    ).encode()
    headers = {
        "Content-Type": "application/json",
        SERVICE_ERROR_HEADER: error.message,
        "Nats-Service-Error-Code": str(error.status),
    }
    return body, headers


class Refusals:
    """Answers a message that ends in an error instead of an outcome.

    Args:
        clock: the `receivedAt` of dead letters.
        endpoints: the counters each refusal is counted in, by kind (discovery's `num_errors`).
    """

    def __init__(
        self,
        outgoing: Outgoing,
        clock: Callable[[], str],
        endpoints: dict[Kind, Endpoint],
        logger: logging.Logger = _LOGGER,
    ) -> None:
        self.outgoing = outgoing
        self.clock = clock
        self.logger = logger
        self.endpoints = endpoints
        # Dead letters' Nats-Msg-Id in core mode: unique without a system call per refusal.
        self._letter_prefix = uuid.uuid4().hex
        self._letter_ids = itertools.count(1)

    def refuse(
        self,
        kind: Kind,
        msg: Incoming,
        error: BaseException,
        *,
        key: str = NO_KEY,
        identifier: str | None = None,
        target: str | None = None,
        id_names: IdNames | None = None,
    ) -> list[Publish]:
        """The error reply (when there is somewhere to send it) and the dead letter.

        An `InteractionWorkerError` is answered as it is; any other exception is logged and answered
        INTERNAL, so no exception text reaches a client unchecked.

        Args:
            identifier: the id read from the message, if any; `id_names` say where the dead letter
                carries it (None: the id keys the subjects but is not a call's or a delivery's).
        """
        if not isinstance(error, InteractionWorkerError):
            self.logger.error("unexpected error on %s", msg.subject, exc_info=error)
            error = Internal()
        self.endpoints[kind].refused(error)
        delivery = current_delivery.get()
        publishes: list[Publish] = []
        if target:
            body, headers = error_reply(error)
            publishes.append((target, body, headers))
        if id_names is None:
            identifier = None
        headers = dead_letter_headers(
            key=key,
            id_header=id_names.header if id_names is not None else None,
            identifier=identifier,
            error=error,
            msg_id=delivery.letter_id
            if delivery is not None
            else f"{self._letter_prefix}-{next(self._letter_ids)}",
            trace=trace_headers(msg.headers),
        )
        letter = DeadLetterInput(
            subject=msg.subject,
            data=msg.data,
            headers=msg.headers,
            error=error,
            id_field=id_names.field if id_names is not None else None,
            identifier=identifier,
            received_at=self.clock(),
            attempts=delivery.number if delivery is not None else 1,
        )
        body = dead_letter_body(letter, self.outgoing.room() - headers_size(headers))
        publishes.append((self.outgoing.subjects.dead(kind, key), body, headers))
        return publishes
