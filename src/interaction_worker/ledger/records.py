"""What the ledger stores under a key (wire.md 8): a claim, a started call, or a finished one, as
JSON; and the fingerprint that tells a retry of a call from another call under the same id."""

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, Literal

State = Literal["claimed", "started", "done"]
STATES = ("claimed", "started", "done")
# What a `done` record holds besides the envelope: one of these fields.
OUTCOME_FIELDS = ("result", "receipt", "error")
# The most a `done` record adds to its outcome's JSON (wire.md 1): the result must leave room for it.
RECORD_ENVELOPE = 1024


def fingerprint(value: object) -> str:
    """The lowercase hex SHA-256 of `value`'s canonical JSON: sorted keys, no spaces, non-ASCII kept,
    numbers as parsed."""
    text = _canonical(value)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _encoder(*, sort_keys: bool) -> Callable[[object], str]:
    """What `json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=…)` writes,
    from an encoder made once: `dumps` with options builds one per call, and its Python `encode`
    builds the C encoder under it per call too."""
    python = json.JSONEncoder(
        sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False
    )
    if c_make_encoder is None:
        return python.encode
    # The arguments `JSONEncoder.iterencode` gives it, without the check for circular values
    # (a JSON document has none; one that had would fail with RecursionError).
    chunks = c_make_encoder(
        None,
        python.default,
        encode_basestring,
        None,
        ":",
        ",",
        sort_keys,
        False,
        True,
    )
    return lambda value: "".join(chunks(value, 0))


_canonical = _encoder(sort_keys=True)


def timestamp(seconds: float) -> str:
    """RFC 3339 in UTC, to the millisecond: `2026-12-01T12:00:00.000Z`."""
    # As datetime does: to the microsecond first (0.123 is 0.12299… as a float), then truncated.
    whole, millis = divmod(round(seconds * 1_000_000) // 1000, 1000)
    # A call writes several times within one second, a claim's time and its lease's end: the
    # formatted seconds are kept, a few (strftime costs more than the rest of a record's encoding),
    # and the milliseconds are made once.
    formatted = _seconds.get(whole)
    if formatted is None:
        if len(_seconds) >= _KEPT_SECONDS:
            _seconds.clear()
        formatted = _seconds[whole] = datetime.fromtimestamp(whole, UTC).strftime(
            "%Y-%m-%dT%H:%M:%S."
        )
    return formatted + _MILLIS[millis]


_KEPT_SECONDS = 16
_seconds: dict[int, str] = {}
_MILLIS = tuple(f"{millis:03d}Z" for millis in range(1000))


def seconds_of(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


_compact = _encoder(sort_keys=False)
# A string's JSON, non-ASCII kept: what the encoder calls for one, without its Python method.
_quote: Callable[[str], str] = encode_basestring


class Encoded(dict[str, Any]):
    """A JSON object and its JSON, encoded once (a result as its reply carries it): a record
    writes these bytes instead of encoding the object again.

    Attributes:
        json: the object's compact JSON, UTF-8.
    """

    __slots__ = ("json",)

    def __init__(self, value: dict[str, Any], json: bytes) -> None:
        super().__init__(value)
        self.json = json


# The fields every record has: an outcome naming one of them is written as a dict would merge it.
_ENVELOPE = frozenset({"state", "worker", "at", "leaseUntil", "fingerprint"})


def encode_record(
    state: str,
    fingerprint: str,
    worker: str,
    at: float,
    lease_until: float | None = None,
    outcome: dict[str, Any] | None = None,
) -> bytes:
    """A record's JSON, compact, non-ASCII kept, as `json.dumps` writes its document; `worker`
    is the worker id's JSON string (`quote`), made once by the ledger. The ledger writes two or
    three records a call: written field by field, not through a `Record` and a dict."""
    if outcome is not None and not _ENVELOPE.isdisjoint(outcome):
        # An outcome field that replaces the envelope's: as a dict merges it.
        document: dict[str, Any] = {
            "state": state,
            "worker": json.loads(worker),
            "at": timestamp(at),
        }
        if lease_until is not None:
            document["leaseUntil"] = timestamp(lease_until)
        document["fingerprint"] = fingerprint
        document.update(outcome)
        return _compact(document).encode()
    parts = [
        _STATES.get(state) or f'{{"state":{_quote(state)}',
        ',"worker":',
        worker,
        ',"at":"',
        timestamp(at),
    ]
    if lease_until is not None:
        parts.append('","leaseUntil":"')
        parts.append(timestamp(lease_until))
    parts.append('","fingerprint":')
    parts.append(_quote(fingerprint))
    if outcome is None:
        parts.append("}")
        return "".join(parts).encode()
    encoded: list[bytes] = []
    for name, value in outcome.items():
        parts.append(",")
        parts.append(_quote(name))
        parts.append(":")
        if type(value) is Encoded:
            # Encoded already: its bytes follow the envelope's.
            encoded.append("".join(parts).encode())
            encoded.append(value.json)
            parts.clear()
        else:
            parts.append(_compact(value))
    parts.append("}")
    encoded.append("".join(parts).encode())
    return b"".join(encoded)


def quote(text: str) -> str:
    """`text` as a JSON string, non-ASCII kept."""
    return _quote(text)


_STATES = {state: f'{{"state":"{state}"' for state in STATES}


class CorruptRecord(ValueError):
    """A value under a ledger key that is not a ledger record."""


@dataclass(frozen=True, slots=True)
class Record:
    state: State
    fingerprint: str
    worker: str
    at: float
    lease_until: float | None = (
        None  # claimed and started: until when the claim is held
    )
    outcome: dict[str, Any] | None = (
        None  # done: {"result": …}, {"receipt": …} or {"error": …}
    )

    def encode(self) -> bytes:
        return encode_record(
            self.state,
            self.fingerprint,
            _quote(self.worker),
            self.at,
            self.lease_until,
            self.outcome,
        )

    @classmethod
    def decode(cls, value: bytes) -> "Record":
        try:
            document = json.loads(value)
            state = document["state"]
            if state not in STATES:
                raise ValueError(state)
            lease = document.get("leaseUntil")
            outcome = None
            if state == "done":
                (field,) = (name for name in OUTCOME_FIELDS if name in document)
                if not isinstance(document[field], dict):
                    raise ValueError("an outcome that is not an object")
                outcome = {field: document[field]}
            elif not isinstance(lease, str):
                raise ValueError("a claim without a lease")
            return cls(
                state=state,
                fingerprint=str(document["fingerprint"]),
                worker=str(document["worker"]),
                at=seconds_of(document["at"]),
                lease_until=seconds_of(lease) if isinstance(lease, str) else None,
                outcome=outcome,
            )
        # Whatever the bytes: nesting past the recursion limit, a date past the platform's range.
        except (
            ValueError,
            KeyError,
            TypeError,
            RecursionError,
            OverflowError,
        ) as error:
            raise CorruptRecord("a ledger entry that is not a ledger record") from error
