"""Dead letters: the original message with its error, on `P.dead.KIND.K` (wire.md 5)."""

import base64
import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic_core import to_json

from ..contracts.keys import is_safe_header_value, redact_headers
from ..contracts.wire import ERROR_CODE_HEADER, KEY_HEADER, MSG_ID_HEADER, STATUS_HEADER
from ..errors import InteractionWorkerError


class UtcTimestamps:
    """The clock of dead letters: `2026-11-29T21:00:00.123Z`.

    Formatting a date costs more than the rest of an OVERLOADED refusal; refusals come in floods,
    so the date and time are formatted once per second and only the milliseconds per call."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._second = -1
        self._prefix = ""

    def __call__(self) -> str:
        # Rounded to the microsecond first, as datetime does: 1795986000.004 is 1795986000.0039999.
        second, micro = divmod(round(self._now() * 1_000_000), 1_000_000)
        if second != self._second:
            self._prefix = datetime.fromtimestamp(second, UTC).strftime(
                "%Y-%m-%dT%H:%M:%S."
            )
            self._second = second
        return f"{self._prefix}{micro // 1000:03d}Z"


@dataclass(frozen=True, slots=True)
class DeadLetterInput:
    subject: str
    data: bytes
    headers: Mapping[str, str] | None
    error: InteractionWorkerError
    id_field: str | None  # "callId" or "deliveryId"
    identifier: str | None
    received_at: str
    attempts: int = 1


def dead_letter_body(letter: DeadLetterInput, max_payload: int) -> bytes:
    """The dead letter as JSON; past `max_payload` the longest payload prefix that fits is kept,
    with `truncated`, the original `size` and its `sha256`."""
    try:
        letter.data.decode("utf-8")
        is_text = True
    except UnicodeDecodeError:
        is_text = False
    body = _encode(_document(letter, letter.data, is_text, truncated=False))
    if len(body) <= max_payload:
        return body
    keep = max(0, len(letter.data) - (len(body) - max_payload))
    while True:
        prefix = letter.data[:keep]
        if is_text:
            prefix = prefix.decode("utf-8", "ignore").encode("utf-8")
        body = _encode(_document(letter, prefix, is_text, truncated=True))
        if len(body) <= max_payload:
            return body
        if keep == 0:
            # Not even an empty payload fits beside the copied request headers (long trace headers
            # also travel as the letter's own): leave the copy out, as the server would refuse it.
            document = _document(letter, b"", is_text, truncated=True)
            document["headers"] = {}
            return _encode(document)
        # JSON escaping can make the text longer than its bytes: shrink by the excess and retry.
        keep = max(0, min(keep - 1, keep - (len(body) - max_payload)))


def _document(
    letter: DeadLetterInput, payload: bytes, is_text: bool, *, truncated: bool
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "subject": letter.subject,
        "error": {
            "code": letter.error.code,
            "message": letter.error.message,
            **letter.error.details(),
        },
    }
    if letter.id_field is not None and letter.identifier is not None:
        document[letter.id_field] = letter.identifier
    if is_text:
        document["payload"] = payload.decode("utf-8")
    else:
        document["payload"] = base64.b64encode(payload).decode("ascii")
        document["encoding"] = "base64"
    document["headers"] = redact_headers(letter.headers)
    document["receivedAt"] = letter.received_at
    document["attempts"] = letter.attempts
    if truncated:
        document["truncated"] = True
        document["size"] = len(letter.data)
        document["sha256"] = hashlib.sha256(letter.data).hexdigest()
    return document


def _encode(document: dict[str, Any]) -> bytes:
    # The bytes of json.dumps(ensure_ascii=False, separators=(",", ":")), at a fifth of its cost.
    return to_json(document)


def dead_letter_headers(
    *,
    key: str,
    id_header: str | None,
    identifier: str | None,
    error: InteractionWorkerError,
    msg_id: str,
    trace: dict[str, str],
) -> dict[str, str]:
    headers = {"Content-Type": "application/json", KEY_HEADER: key}
    if (
        id_header is not None
        and identifier is not None
        and is_safe_header_value(identifier)
    ):
        headers[id_header] = identifier
    headers[STATUS_HEADER] = "error"
    headers[ERROR_CODE_HEADER] = error.code
    headers[MSG_ID_HEADER] = msg_id
    headers.update(trace)
    return headers
