"""What the console shows of one bus message: its family, key and status, and the SSE frame that
carries it to every page.

The frame is encoded once, when the message arrives, and the same bytes go to every page and stay
in the history: a message costs the console one JSON encoding whatever the number of pages.
"""

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..contracts.keys import subject_key
from ..contracts.wire import (
    DEAD,
    ERROR_CODE_HEADER,
    EVENTS,
    KEY_HEADER,
    MSG_ID_HEADER,
    STATUS_HEADER,
    Subjects,
)

# An event family of the wire table (`tool`, ..., `dead`), or `delivery`.
Family = str

# A body above this is kept as its first bytes: the history holds `history` events, and a page
# does not need a megabyte of one of them to tell what happened.
MAX_BODY_BYTES = 64 * 1024
_CREDENTIAL_MARKERS = ("token", "secret", "password", "key")
_NOT_CREDENTIALS = frozenset(("nats-msg-id", "interaction-key"))
_REDACTED = "[redacted]"

# The worker's event subjects after the prefix: (first token, second token) -> (family, kind).
_EVENT_KINDS: dict[tuple[str, str], tuple[Family, str]] = {
    (family, kind): (family, kind)
    for family, kind in (event.name.split(".", 1) for event in EVENTS)
}


def event_subjects(prefix: str) -> tuple[str, ...]:
    """The subjects of the worker's events and dead letters (wire.md 2)."""
    return Subjects(prefix).events()


def sink_subject(template: str) -> str:
    """The subscription that hears every delivery of a `nats` sink: its `{key}` token a wildcard."""
    return ".".join("*" if "{key}" in token else token for token in template.split("."))


def redact(headers: Mapping[str, str]) -> dict[str, str]:
    """The worker's dead-letter rule (wire.md 5), applied again to whatever else reaches a page."""
    return {
        name: _REDACTED
        if name.lower() not in _NOT_CREDENTIALS
        and (
            name.lower() in ("authorization", "cookie")
            or any(marker in name.lower() for marker in _CREDENTIAL_MARKERS)
        )
        else value
        for name, value in headers.items()
    }


@dataclass(frozen=True)
class ConsoleEvent:
    """One message as the pages show it.

    Attributes:
        seq: its number in this console process, which is also the SSE id.
        msg_id: its `Nats-Msg-Id`, by which an event read both from the stream and live is shown once.
        frame: the SSE frame, ready to write.
    """

    seq: int
    family: Family
    key: str
    status: str
    msg_id: str | None
    frame: bytes = field(repr=False)


def classify(subject: str, prefix: str) -> tuple[Family, str]:
    """The family and kind of a subject; what is not one of the worker's is a delivery."""
    if subject.startswith(prefix + "."):
        tokens = subject[len(prefix) + 1 :].split(".")
        if tokens[0] == DEAD and len(tokens) >= 2:
            return DEAD, tokens[1]
        if len(tokens) >= 2:
            found = _EVENT_KINDS.get((tokens[0], tokens[1]))
            if found is not None:
                return found
    return "delivery", "delivery"


def build_event(
    seq: int,
    subject: str,
    data: bytes,
    headers: Mapping[str, str] | None,
    *,
    prefix: str,
    instance: str,
    received_at: float | None = None,
    replayed: bool = False,
) -> ConsoleEvent:
    """The event of one message; `received_at` in seconds since the epoch (now by default)."""
    family, kind = classify(subject, prefix)
    shown_headers = redact(headers or {})
    body, text, truncated = _body(data)
    key = shown_headers.get(KEY_HEADER) or _key_of(body) or subject.rsplit(".", 1)[-1]
    status = shown_headers.get(STATUS_HEADER) or _status_of(body, family)
    code = shown_headers.get(ERROR_CODE_HEADER) or _code_of(body)
    document: dict[str, Any] = {
        "seq": seq,
        "instance": instance,
        "family": family,
        "kind": kind,
        "subject": subject,
        "key": key,
        "status": status,
        "headers": shown_headers,
        "receivedAt": round(
            (time.time() if received_at is None else received_at) * 1000, 3
        ),
        "size": len(data),
    }
    if code:
        document["code"] = code
    if body is not None:
        document["body"] = body
    else:
        document["text"] = text
    if truncated:
        document["truncated"] = True
    if replayed:
        document["replayed"] = True
    payload = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    frame = f"id: {instance}:{seq}\nevent: message\ndata: {payload}\n\n".encode()
    return ConsoleEvent(
        seq, family, key, status, (headers or {}).get(MSG_ID_HEADER), frame
    )


def _body(data: bytes) -> tuple[Any, str, bool]:
    """The parsed JSON body, else its text (cut to `MAX_BODY_BYTES`) and whether it was cut."""
    if len(data) > MAX_BODY_BYTES:
        return None, data[:MAX_BODY_BYTES].decode("utf-8", "replace"), True
    text = data.decode("utf-8", "replace")
    try:
        return json.loads(text), text, False
    except ValueError:
        return None, text, False


def _key_of(body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    for name in ("callId", "deliveryId", "id"):
        value = body.get(name)
        if isinstance(value, str) and value:
            return subject_key(value)
    return None


def _status_of(body: Any, family: Family) -> str:
    if family == "dead":
        return "error"
    if isinstance(body, dict) and isinstance(body.get("status"), str):
        return str(body["status"])
    return "delivered" if family == "delivery" else ""


def _code_of(body: Any) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        code = body["error"].get("code")
        return code if isinstance(code, str) else None
    return None
