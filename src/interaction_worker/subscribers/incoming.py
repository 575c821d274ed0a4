"""A received message, whatever the binding; where its reply goes (wire.md 7) and which ids can key
its subjects (wire.md 1-2)."""

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import InteractionWorkerError, InvalidInput
from .subjects import is_publishable_subject

REPLY_TO_HEADER = "Interaction-Reply-To"


@dataclass(slots=True)
class Incoming:
    """A received message, whatever the binding: the subject it came on, its body, headers and reply.

    Not frozen: a frozen dataclass's constructor costs three times as much, once per message."""

    subject: str
    data: bytes
    headers: Mapping[str, str] | None
    reply: str | None


def reply_target(
    msg: Incoming, prefixes: tuple[str, ...]
) -> tuple[str | None, InteractionWorkerError | None]:
    """Where the reply goes: a valid Interaction-Reply-To header, else the reply subject.

    An invalid header is INVALID_INPUT, answered on the reply subject so that the client hears of it."""
    requested = msg.headers.get(REPLY_TO_HEADER) if msg.headers else None
    if requested is None:
        return msg.reply or None, None
    if is_publishable_subject(requested, prefixes):
        return requested, None
    return msg.reply or None, InvalidInput(
        "Interaction-Reply-To must be a subject under an allowed reply prefix"
    )
