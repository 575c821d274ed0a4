"""A received message, whatever the binding; where its reply goes (wire.md 7) and which ids can key
its subjects (wire.md 1-2)."""

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..contracts.keys import header_any_case
from ..contracts.wire import (
    REPLY_TO_HEADER,
    REQUEST_INFO_HEADER,
    is_publishable_subject,
)
from ..errors import InteractionWorkerError, InvalidInput

# REQUEST_INFO_HEADER is forgeable by a publisher of the serving account itself, which is why the
# check that reads it is opt-in.
ACCOUNT_INBOX_ROOT = "_INBOX."
# How the server names the reply subject of a request that came through an account's service import:
# the worker may answer there, the server maps it back to the requester (docs/wire.md 7).
REMAPPED_REPLY = "_R_."


@dataclass(slots=True)
class Incoming:
    """A received message, whatever the binding: the subject it came on, its body, headers and reply.

    Not frozen: a frozen dataclass's constructor costs three times as much, once per message."""

    subject: str
    data: bytes
    headers: Mapping[str, str] | None
    reply: str | None


def reply_target(
    msg: Incoming, prefixes: tuple[str, ...], own_prefixes: tuple[str, ...]
) -> tuple[str | None, InteractionWorkerError | None]:
    """Where the reply goes: a valid Interaction-Reply-To header (in any case), else the reply
    subject when `own_reply` allows it.

    An invalid header is INVALID_INPUT, answered on the reply subject so that the client hears of it."""
    headers = msg.headers
    if not headers:
        return own_reply(msg.reply, own_prefixes)
    requested = headers.get(REPLY_TO_HEADER)
    if requested is None:
        # The exact lookup inline, the scan only on a miss: the documented spelling costs what
        # it always did.
        requested = header_any_case(headers, REPLY_TO_HEADER)
        if requested is None:
            return own_reply(msg.reply, own_prefixes)
    if is_publishable_subject(requested, prefixes):
        return requested, None
    target, _ = own_reply(msg.reply, own_prefixes)
    return target, InvalidInput(
        "Interaction-Reply-To must be a subject under an allowed reply prefix"
    )


def requested_reply(headers: Mapping[str, str] | None) -> str | None:
    """The Interaction-Reply-To header: the documented spelling first, one lookup, then any case."""
    if not headers:
        return None
    requested = headers.get(REPLY_TO_HEADER)
    if requested is None:
        requested = header_any_case(headers, REPLY_TO_HEADER)
    return requested


ReplyTarget = Callable[
    [Incoming, tuple[str, ...], tuple[str, ...]],
    tuple[str | None, InteractionWorkerError | None],
]


def account_reply_target(
    msg: Incoming, prefixes: tuple[str, ...], own_prefixes: tuple[str, ...]
) -> tuple[str | None, InteractionWorkerError | None]:
    """`reply_target` for accounts that each import their own inbox slice (`subjects.account_inboxes`,
    docs/operations.md): a request that came through an account's import may ask for its reply only
    under `_INBOX.<that account>.`, so no account can aim a reply into another's inbox."""
    target, error = reply_target(msg, prefixes, own_prefixes)
    if error is not None or msg.headers is None or requested_reply(msg.headers) is None:
        return target, error
    info = msg.headers.get(REQUEST_INFO_HEADER)
    if info is None:  # not through an import: the serving account's own publisher
        return target, None
    account = _account_of(info)
    if account is not None and target is not None:
        if target.startswith(f"{ACCOUNT_INBOX_ROOT}{account}."):
            return target, None
    answer, _ = own_reply(msg.reply, own_prefixes)
    return answer, InvalidInput(
        "Interaction-Reply-To must be under the requesting account's inbox "
        f"({ACCOUNT_INBOX_ROOT}<account>.)"
    )


def _account_of(info: str) -> str | None:
    """The `acc` of a Nats-Request-Info header; None when it names none (never a crash)."""
    try:
        parsed = json.loads(info)
    except (ValueError, RecursionError):
        return None
    account = parsed.get("acc") if isinstance(parsed, dict) else None
    return account if isinstance(account, str) and account else None


def own_prefixes(prefixes: tuple[str, ...]) -> tuple[str, ...]:
    """Where a message's own reply subject may point: under `subjects.reply_prefixes`, or a subject
    the server remapped for a request through a service import."""
    return (*prefixes, REMAPPED_REPLY)


def own_reply(
    reply: str | None, allowed: tuple[str, ...]
) -> tuple[str | None, InteractionWorkerError | None]:
    """A message's own NATS reply subject, when the worker may publish there (`own_prefixes`).

    Any other is refused: the server checks no permission on a reply subject, so answering it would
    let a client aim the worker's publishing rights at an event, dead-letter, `$KV` or other client's
    subject (docs/wire.md 7). Such a message gets no reply, only its dead letter."""
    if not reply:
        return None, None
    if reply.startswith(allowed):
        return reply, None
    return None, InvalidInput("The reply subject must be under an allowed reply prefix")
