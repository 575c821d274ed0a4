"""What one message publishes: its reply and its events, their headers, and the max_payload rules
(wire.md 1 and 3)."""

from collections.abc import Mapping
from typing import Any, NoReturn

from pydantic_core import to_json

from ..contracts import OutputReceipt
from ..contracts import validation as check
from ..contracts.common import RESULT_STATUSES
from ..contracts.keys import headers_size, is_safe_header_value
from ..contracts.wire import (
    CALL_ID_HEADER,
    DELIVERY_ID_HEADER,
    ERROR_CODE_HEADER,
    KEY_HEADER,
    MSG_ID_HEADER,
    STATUS_HEADER,
    Subjects,
)
from ..errors import ResultTooLarge
from ..nodes import EVENT_HEADERS_ROOM, shortened_json, wire_json, wire_observation


class WireHeaders(dict[str, str]):
    """Headers that carry their NATS/1.0 block, `wire`, encoded as nats-py encodes them, so the
    publishing adapter (`wire_publish`) writes it as it is instead of encoding each header again.

    Read-only, so the block always says what the dict says; a copy (`dict(h)`, `{**h, …}`) is a
    plain dict, encoded when published."""

    __slots__ = ("wire",)
    wire: bytes

    def _read_only(self) -> NoReturn:
        raise TypeError("WireHeaders are read-only: copy them to change them")

    def __setitem__(self, key: str, value: str) -> None:
        self._read_only()

    def __delitem__(self, key: str) -> None:
        self._read_only()

    def __ior__(self, other: object) -> NoReturn:  # type: ignore[misc]
        self._read_only()

    def update(self, *args: Any, **kwargs: str) -> None:
        self._read_only()

    def setdefault(self, key: str, default: str | None = None) -> str:
        self._read_only()

    def pop(self, *args: Any) -> str:
        self._read_only()

    def popitem(self) -> tuple[str, str]:
        self._read_only()

    def clear(self) -> None:
        self._read_only()

    def __reduce__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle rebuild it whole: item by item would hit the read-only setter.
        return (_rebuilt, (dict(self), self.wire))


def _rebuilt(headers: dict[str, str], wire: bytes) -> WireHeaders:
    wired = WireHeaders(headers)
    wired.wire = wire
    return wired


def wire_headers(headers: dict[str, str], block: str) -> WireHeaders:
    """`headers` with their block `block` (ASCII, `NATS/1.0` line to blank line)."""
    wired = WireHeaders(headers)
    wired.wire = block.encode()
    return wired


JSON_HEADERS = wire_headers(
    {"Content-Type": "application/json"},
    "NATS/1.0\r\nContent-Type: application/json\r\n\r\n",
)
# What an event's block starts with; its values are written as they are only when nats-py would
# write them unchanged (printable ASCII without spaces at either end: never trimmed, no CR or LF).
_EVENT_BLOCK = f"NATS/1.0\r\nContent-Type: application/json\r\n{KEY_HEADER}: "
_CALL_ID_LINE = f"\r\n{CALL_ID_HEADER}: "
_STATUS_LINE = f"\r\n{STATUS_HEADER}: "
_ERROR_CODE_LINE = f"{ERROR_CODE_HEADER}: "
_MSG_ID_LINE = f"{MSG_ID_HEADER}: "
_TRACE_HEADERS = ("traceparent", "tracestate")
# Event headers are bounded (the raw id is at most 256 code points); 2 KiB covers them, besides the
# trace headers copied from the request, which are as long as the client made them.
_EVENT_HEADERS = EVENT_HEADERS_ROOM

Publish = tuple[str, bytes, dict[str, str]]


def trace_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    if not headers:
        return {}
    return {name: headers[name] for name in _TRACE_HEADERS if name in headers}


def event_headers(
    *,
    key: str,
    id_header: str,
    identifier: str,
    status: str,
    error_code: str | None,
    msg_id: str,
    trace: dict[str, str],
) -> dict[str, str]:
    headers = {"Content-Type": "application/json", KEY_HEADER: key}
    if is_safe_header_value(identifier):
        headers[id_header] = identifier
    headers[STATUS_HEADER] = status
    if error_code is not None:
        headers[ERROR_CODE_HEADER] = error_code
    headers[MSG_ID_HEADER] = msg_id
    if trace:
        headers.update(trace)
    return headers


class Outgoing:
    """Builds the publishes of an outcome, each within the server's `max_payload`.

    A message's publishes are computed completely before any is sent, so a refusal never follows a
    half-published success.

    Args:
        max_payload: the server's limit; replies and events that would exceed it are replaced.
    """

    def __init__(self, subjects: Subjects, max_payload: int = 1024 * 1024) -> None:
        self.subjects = subjects
        self.max_payload = max_payload
        # Header bytes a binding adds to every publish beyond ours (FastStream's).
        self.header_allowance = 0
        # Bytes a result or receipt leaves for the ledger's envelope when the ledger records it
        # (wire.md 1): its `done` record must fit in max_payload too.
        self.record_allowance = 0
        self._event_subjects: dict[str, tuple[str, str]] = {}

    def _family_subjects(self, family: str) -> tuple[str, str]:
        """`family`'s result and observation subjects (`P.tool.result`, `P.tool.observation`),
        remembered: the subjects' prefix never changes."""
        prefix = self.subjects.prefix
        subjects = (f"{prefix}.{family}.result", f"{prefix}.{family}.observation")
        self._event_subjects[family] = subjects
        return subjects

    def room(self) -> int:
        """The bytes one publish may take, headers included."""
        return self.max_payload - self.header_allowance

    def reply(
        self, target: str | None, payload: bytes, too_large: str | None = None
    ) -> list[Publish]:
        """A reply without events (an observation, a tool list, a discover).

        Raises:
            ResultTooLarge: with the message `too_large`, when the reply would not fit.
        """
        if len(payload) + headers_size(JSON_HEADERS) > self.room():
            raise ResultTooLarge(too_large)
        return [(target, payload, JSON_HEADERS)] if target else []

    def fit_result(
        self, result: dict[str, Any], operation: str | None, room: int | None = None
    ) -> tuple[dict[str, Any], bytes, bytes]:
        """The result (RESULT_TOO_LARGE in its place when its reply does not fit in `room`, by
        default what an event without trace headers has), its JSON and its reply's JSON."""
        if room is None:
            room = self.room() - _EVENT_HEADERS
        room -= self.record_allowance
        result_json = to_json(result)
        reply_json = (
            b'{"operation":"invoke","result":' + result_json + b"}"
            if operation == "invoke"
            else result_json
        )
        if len(reply_json) <= room:
            return result, result_json, reply_json
        too_large = check.external_result(
            {
                "callId": result["callId"],
                "source": result["source"],
                "status": "failed",
                "error": {
                    "code": "RESULT_TOO_LARGE",
                    "message": "The result is larger than the server's max_payload",
                    "retryable": False,
                },
                "metadata": {"size": len(reply_json), "limit": self.max_payload},
            }
        ).to_wire()
        return self.fit_result(too_large, operation, room + self.record_allowance)

    def result(
        self,
        family: str,
        result: dict[str, Any],
        key: str,
        target: str | None,
        trace: dict[str, str],
        operation: str | None,
    ) -> list[Publish]:
        """`result` is a validated result's wire document: serialised as it is, and observed.

        The result must fit (its reply and its event), else it becomes RESULT_TOO_LARGE; its
        observation, which repeats the content, is shortened when it alone does not (wire.md 1)."""
        room = self.room() - _EVENT_HEADERS - (headers_size(trace) if trace else 0)
        # Both documents written at once, each field serialised once (`wire_json`).
        result_json, observation_json = wire_json(result)
        reply_json = (
            b'{"operation":"invoke","result":' + result_json + b"}"
            if operation == "invoke"
            else result_json
        )
        if len(reply_json) > room - self.record_allowance:
            result, result_json, reply_json = self.fit_result(result, operation, room)
            observation_json = wire_json(result)[1]
        if len(observation_json) > room:
            observation_json = shortened_json(
                wire_observation(result), len(observation_json), room
            )
        error = result.get("error")
        call_id = result["callId"]
        status = result["status"]
        result_subject, observation_subject = self._event_subjects.get(
            family
        ) or self._family_subjects(family)
        # One header set for both events; only Nats-Msg-Id differs. Its block is written beside it
        # while every value is one nats-py writes unchanged: the key is subject-safe by
        # construction (a call id equal to it too), the message ids are subjects, the status one of
        # the contract's words, the call id and error code checked.
        headers = {"Content-Type": "application/json", KEY_HEADER: key}
        if call_id == key or is_safe_header_value(call_id):
            headers[CALL_ID_HEADER] = call_id
            block = (
                f"{_EVENT_BLOCK}{key}{_CALL_ID_LINE}{call_id}{_STATUS_LINE}{status}\r\n"
            )
        else:
            block = f"{_EVENT_BLOCK}{key}{_STATUS_LINE}{status}\r\n"
        headers[STATUS_HEADER] = status
        plain = status in RESULT_STATUSES
        if error is not None:
            code = error["code"]
            headers[ERROR_CODE_HEADER] = code
            plain = plain and is_safe_header_value(code)
            block = f"{block}{_ERROR_CODE_LINE}{code}\r\n"
        result_id = f"{result_subject}:{key}"
        observation_id = f"{observation_subject}:{key}"
        result_headers: dict[str, str]
        observation_headers: dict[str, str]
        if trace or not plain:
            # Trace headers are the client's: nats-py's encoding of them is the adapter's to apply.
            result_headers = {**headers, MSG_ID_HEADER: result_id}
            observation_headers = {**headers, MSG_ID_HEADER: observation_id}
            result_headers.update(trace)
            observation_headers.update(trace)
        else:
            headers[MSG_ID_HEADER] = result_id
            result_headers = wire_headers(
                headers, f"{block}{_MSG_ID_LINE}{result_id}\r\n\r\n"
            )
            headers[MSG_ID_HEADER] = observation_id
            observation_headers = wire_headers(
                headers, f"{block}{_MSG_ID_LINE}{observation_id}\r\n\r\n"
            )
        result_event = (f"{result_subject}.{key}", result_json, result_headers)
        observation_event = (
            f"{observation_subject}.{key}",
            observation_json,
            observation_headers,
        )
        if target:
            return [(target, reply_json, JSON_HEADERS), result_event, observation_event]
        return [result_event, observation_event]

    def fit_receipt(
        self, receipt: OutputReceipt, trace_size: int = 0
    ) -> tuple[OutputReceipt, bytes]:
        """The receipt, or one with its status and the error RESULT_TOO_LARGE when it does not fit
        in an event; and its JSON."""
        payload = receipt.to_json()
        room = self.room() - _EVENT_HEADERS - trace_size - self.record_allowance
        if len(payload) <= room:
            return receipt, payload
        receipt = check.output_receipt(
            {
                "deliveryId": receipt.delivery_id,
                "status": receipt.status,
                "error": {
                    "code": "RESULT_TOO_LARGE",
                    "message": "The receipt is larger than the server's max_payload",
                    "retryable": False,
                },
                "metadata": {"size": len(payload), "limit": self.max_payload},
            }
        )
        return receipt, receipt.to_json()

    def receipt(
        self,
        receipt: OutputReceipt,
        key: str,
        target: str | None,
        trace: dict[str, str],
    ) -> list[Publish]:
        """The receipt's reply and event; a receipt that does not fit is replaced by one with its status
        and the error RESULT_TOO_LARGE."""
        receipt, payload = self.fit_receipt(receipt, headers_size(trace))
        prefix = self.subjects.prefix
        headers = event_headers(
            key=key,
            id_header=DELIVERY_ID_HEADER,
            identifier=receipt.delivery_id,
            status=receipt.status,
            error_code=receipt.error.code if receipt.error is not None else None,
            msg_id=f"{prefix}.output.receipt:{key}",
            trace=trace,
        )
        publishes: list[Publish] = []
        if target:
            publishes.append((target, payload, JSON_HEADERS))
        publishes.append((f"{prefix}.output.receipt.{key}", payload, headers))
        return publishes
