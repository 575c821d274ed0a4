"""A received message, whatever the binding; where its reply goes (wire.md 7) and which ids can key
its subjects (wire.md 1-2)."""

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..errors import InteractionWorkerError, InvalidInput
from .subjects import is_publishable_subject

REPLY_TO_HEADER = "Interaction-Reply-To"
# Stamped by the server on a request that crossed an account's service import (core NATS only:
# JetStream strips it before storing), naming the requester's account; forgeable by a publisher of
# the serving account itself, which is why the check that reads it is opt-in.
REQUEST_INFO_HEADER = "Nats-Request-Info"
ACCOUNT_INBOX_ROOT = "_INBOX."


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


ReplyTarget = Callable[
    [Incoming, tuple[str, ...]], tuple[str | None, InteractionWorkerError | None]
]


def account_reply_target(
    msg: Incoming, prefixes: tuple[str, ...]
) -> tuple[str | None, InteractionWorkerError | None]:
    """`reply_target` for accounts that each import their own inbox slice (`subjects.account_inboxes`,
    docs/operations.md): a request that came through an account's import may ask for its reply only
    under `_INBOX.<that account>.`, so no account can aim a reply into another's inbox."""
    target, error = reply_target(msg, prefixes)
    if error is not None or msg.headers is None or REPLY_TO_HEADER not in msg.headers:
        return target, error
    info = msg.headers.get(REQUEST_INFO_HEADER)
    if info is None:  # not through an import: the serving account's own publisher
        return target, None
    account = _account_of(info)
    if account is not None and target is not None:
        if target.startswith(f"{ACCOUNT_INBOX_ROOT}{account}."):
            return target, None
    return msg.reply or None, InvalidInput(
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
