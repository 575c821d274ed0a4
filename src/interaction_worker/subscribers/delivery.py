"""Which delivery of a durable message is being handled (wire.md 5, 7), for the parts of the request
path that answer differently in durable mode: a refusal's dead letter (its `Nats-Msg-Id` and
`attempts`) and the ledger (a call that certainly did not start comes back later instead of being
refused or answered). Core mode has no delivery: `current` is None there.

A context variable, set by the durable binding around one message's handling, so the handler's
signature and the core path stay as they are.
"""

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(slots=True)
class Delivery:
    number: int  # 1 for the first delivery
    last: bool  # the last executed attempt (`durable.max_deliver`)
    letter_id: str  # the Nats-Msg-Id of its dead letter: dead:<stream>:<sequence>
    # False when the ledger could not record the outcome: it is published, but the message is not
    # acknowledged, so its redelivery finds the claim and answers per wire.md 8.3.
    recorded: bool = True
    # When the outcome being published was first recorded (seconds since the epoch), for one the
    # ledger answers: its events may have been stored longer ago than the streams remember their
    # message ids (docs/wire.md 7). None: an outcome of this delivery.
    first_sent: float | None = None
    # False when its events could not be stored before the process ended: not acknowledged.
    stored: bool = True


current: ContextVar[Delivery | None] = ContextVar("delivery", default=None)


class Redeliver(Exception):
    """Not this time, and certainly nothing started: the message is negatively acknowledged and
    delivered again after `delay` seconds, or the next `durable.nak_backoff` delay."""

    def __init__(self, delay: float | None = None) -> None:
        super().__init__()
        self.delay = delay


def may_redeliver() -> bool:
    delivery = current.get()
    return delivery is not None and not delivery.last
