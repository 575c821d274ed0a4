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
    micros = round(seconds * 1_000_000)
    whole, fraction = divmod(micros, 1_000_000)
    # A call writes several times within one second, a claim's time and its lease's end: the
    # formatted seconds are kept, a few (strftime costs more than the rest of a record's encoding).
    formatted = _seconds.get(whole)
    if formatted is None:
        if len(_seconds) >= _KEPT_SECONDS:
            _seconds.clear()
        formatted = _seconds[whole] = datetime.fromtimestamp(whole, UTC).strftime(
            "%Y-%m-%dT%H:%M:%S."
        )
    return f"{formatted}{fraction // 1000:03d}Z"


_KEPT_SECONDS = 16
_seconds: dict[int, str] = {}


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


def _dumps(document: dict[str, Any]) -> bytes:
    return _compact(document).encode()


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
        """The record's JSON, compact, non-ASCII kept. Written field by field with one encoder
        made once: `json.dumps` with options builds an encoder per call, and a call writes two or
        three records (docs/benchmarks.md)."""
        outcome = self.outcome
        if outcome is not None and not _ENVELOPE.isdisjoint(outcome):
            return _dumps(
                self._document()
            )  # an outcome field that replaces the envelope's
        parts = [
            '{"state":',
            _quote(self.state),
            ',"worker":',
            _quote(self.worker),
            ',"at":"',
            timestamp(self.at),
        ]
        if self.lease_until is not None:
            parts.append('","leaseUntil":"')
            parts.append(timestamp(self.lease_until))
        parts.append('","fingerprint":')
        parts.append(_quote(self.fingerprint))
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

    def _document(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "state": self.state,
            "worker": self.worker,
            "at": timestamp(self.at),
        }
        if self.lease_until is not None:
            document["leaseUntil"] = timestamp(self.lease_until)
        document["fingerprint"] = self.fingerprint
        if self.outcome is not None:
            document.update(self.outcome)
        return document

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
