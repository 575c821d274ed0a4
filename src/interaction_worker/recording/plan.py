"""The plan of a requests replay (replay.md 4): what each recorded request is sent as, and the
recorded outcome its reply is held to.

The plan is made from the whole recording before the first request is sent. A request's recorded
outcome is found by its kind and subject key K, the nth request with K taking the nth outcome with
K, as the worker keys its events and dead letters (wire.md 2, 5).
"""

import json
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..contracts import JsonRefused, parse_json, parse_json_object
from ..contracts.keys import NO_KEY, subject_key, valid_id
from ..contracts.wire import (
    ID_HEADERS,
    MSG_ID_HEADER,
    REPLY_TO_HEADER,
    SERVICE_ERROR_HEADER,
    WIRE,
    is_discover,
)
from .compare import Outcome, restore_ids
from .families import RequestKind, outcome_subject, relative, request_kind
from .format import RecordedMessage, Recording

# Compared case-insensitively: a recording keeps the spelling the client used.
_NOT_RESENT = frozenset({MSG_ID_HEADER.lower(), REPLY_TO_HEADER.lower()})
_ID_HEADERS = frozenset(name.lower() for name in ID_HEADERS)


@dataclass(frozen=True, slots=True)
class _Carried:
    """A recorded request's headers, as the wire table's id readers take a message's."""

    headers: Mapping[str, str] | None


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """A recorded request as it will be sent, and what its outcome is held to.

    `to` is the subject under the prefix (`tool.call`); the client puts its own prefix before it.
    `recorded` is None for a request that is compared but whose recording holds no outcome (a
    difference); `compared` is False for those that are only replayed. `ids` maps each suffixed id
    back to the recorded one."""

    seq: int
    subject: str
    to: str
    kind: RequestKind
    id: str | None
    data: bytes
    headers: dict[str, str] | None
    compared: bool
    recorded: Outcome | None = None
    ids: Mapping[str, str] = field(default_factory=dict)


def plan_requests(
    recording: Recording, *, compare: bool = True, id_suffix: str | None = None
) -> list[PlannedRequest]:
    """Every recorded request in `seq` order, with its bytes, headers and recorded outcome."""
    prefix = recording.header.prefix
    outcomes = _recorded_outcomes(recording.messages, prefix) if compare else {}
    planned = []
    for message in recording.messages:
        kind = request_kind(message.subject, prefix)
        if kind is None:
            continue
        to = relative(message.subject, prefix)
        assert to is not None  # a request subject is under the prefix
        planned.append(_plan_one(message, to, kind, outcomes, compare, id_suffix))
    return planned


def _plan_one(
    message: RecordedMessage,
    to: str,
    kind: RequestKind,
    outcomes: Mapping[tuple[RequestKind, str], deque[Outcome]],
    compare: bool,
    id_suffix: str | None,
) -> PlannedRequest:
    headers = {
        name: value
        for name, value in (message.single_headers() or {}).items()
        if name.lower() not in _NOT_RESENT
    }
    body = _body(message.data)
    identifier = _identify(kind, body, headers)
    compared = compare and _is_compared(kind, body, identifier)
    recorded = None
    if compared:
        key = NO_KEY if identifier is None else subject_key(identifier)
        queue = outcomes.get((kind, key))
        recorded = queue.popleft() if queue else None
    data, ids = message.data, dict[str, str]()
    if id_suffix is not None:
        data, headers, ids = _suffixed(kind, message.data, body, headers, id_suffix)
    return PlannedRequest(
        seq=message.seq,
        subject=message.subject,
        to=to,
        kind=kind,
        id=identifier,
        data=data,
        headers=headers or None,
        compared=compared,
        recorded=recorded,
        ids=ids,
    )


def _body(data: bytes) -> dict[str, Any] | None:
    """The body as the worker parses it (strictly), or None when the worker would refuse it."""
    try:
        return parse_json_object(data)
    except JsonRefused:
        return None


def _identify(
    kind: RequestKind, body: dict[str, Any] | None, headers: Mapping[str, str]
) -> str | None:
    """The id the worker keys the request's subjects by, read as the worker reads it (the wire
    table's reader); a body the worker would refuse has none, headers may still carry one."""
    return WIRE[kind].read_id({} if body is None else body, _Carried(headers))


def _is_compared(
    kind: RequestKind, body: dict[str, Any] | None, identifier: str | None
) -> bool:
    """Requests whose family publishes no event have nothing recorded to compare with; nor has a
    command without its own id, whose `command.done` is keyed by an id the worker made up."""
    if WIRE[kind].outcome is None or is_discover(body):
        return False
    return kind != "command" or identifier is not None


def _recorded_outcomes(
    messages: Sequence[RecordedMessage], prefix: str
) -> dict[tuple[RequestKind, str], deque[Outcome]]:
    """Each kind's outcomes by K, in `seq` order: its result events and its dead letters."""
    found: dict[tuple[RequestKind, str], deque[Outcome]] = defaultdict(deque)
    for message in messages:
        where = outcome_subject(message.subject, prefix)
        if where is None:
            continue
        document = _document(message.data)
        if not where.dead:
            found[(where.kind, where.key)].append(Outcome(document))
            continue
        error = document.get("error") if isinstance(document, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        # A discover's dead letter is left out: discovers are not compared, and an invoke with
        # the same K (a call id that is also a server name, or `=`) must not take it.
        if isinstance(code, str) and not (
            where.kind == "mcp" and is_discover(_dead_payload(document))
        ):
            found[(where.kind, where.key)].append(Outcome({"error": error}, code))
    return found


def _dead_payload(letter: dict[str, Any]) -> object:
    payload = letter.get("payload")
    if not isinstance(payload, str) or letter.get("encoding") == "base64":
        return None  # a body that was not UTF-8 was not a discover either
    try:
        return parse_json(payload.encode("utf-8"))
    except JsonRefused:
        return None


def _document(data: bytes) -> Any:
    """Parsed JSON, or the text itself: a body that is not JSON is still compared, as text."""
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")


def _suffixed(
    kind: RequestKind,
    data: bytes,
    body: dict[str, Any] | None,
    headers: Mapping[str, str],
    suffix: str,
) -> tuple[bytes, dict[str, str], dict[str, str]]:
    """The body and headers with `suffix` after each id, and the map back to the recorded ids.

    Only ids the worker would accept get it: an invalid id stays invalid, so its refusal replays as
    recorded. The body is re-serialised only when an id in it changed, so the bytes of the others
    (an observe, a discover, a command) go out as recorded."""
    ids: dict[str, str] = {}

    def with_suffix(value: Any) -> Any:
        if valid_id(value) is None:
            return value
        ids[value + suffix] = value
        return value + suffix

    new_headers = {
        name: with_suffix(value) if name.lower() in _ID_HEADERS else value
        for name, value in headers.items()
    }
    if body is None:
        return data, new_headers, ids
    call = body.get("call")
    places = (
        [(call, "id")] if kind in ("tool", "mcp") and isinstance(call, dict) else []
    )
    if kind == "output":
        places.append((body, "deliveryId"))
    places = [(where, key) for where, key in places if valid_id(where.get(key))]
    if not places:
        return data, new_headers, ids
    for where, key in places:
        where[key] = with_suffix(where[key])
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8"), new_headers, ids


def reply_outcome(
    request: PlannedRequest, data: bytes, headers: Mapping[str, str] | None
) -> Outcome:
    """A reply as compared with the recorded outcome: an error reply by its code, an MCP invoke's
    reply by its `result` (the body of the result event the recording holds), any other as it is;
    the suffixed ids put back first."""
    document = restore_ids(_document(data), request.ids)
    if SERVICE_ERROR_HEADER in (headers or {}):
        error = document.get("error") if isinstance(document, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        return Outcome(document, code if isinstance(code, str) else "UNKNOWN")
    if request.kind == "mcp" and isinstance(document, dict) and "result" in document:
        return Outcome(document["result"])
    return Outcome(document)
