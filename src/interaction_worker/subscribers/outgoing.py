"""What one message publishes: its reply and its events, their headers, and the max_payload rules
(wire.md 1 and 3)."""

from collections.abc import Mapping
from typing import Any

from pydantic_core import to_json

from ..contracts import OutputReceipt
from ..contracts import validation as check
from ..contracts.keys import headers_size, is_safe_header_value
from ..errors import ResultTooLarge
from ..nodes import shortened_observation, wire_observation
from .subjects import Subjects

JSON_HEADERS = {"Content-Type": "application/json"}
_TRACE_HEADERS = ("traceparent", "tracestate")
# Event headers are bounded (the raw id is at most 256 code points); 2 KiB covers them, besides the
# trace headers copied from the request, which are as long as the client made them.
_EVENT_HEADERS = 2048

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
    headers = {"Content-Type": "application/json", "Interaction-Key": key}
    if is_safe_header_value(identifier):
        headers[id_header] = identifier
    headers["Interaction-Status"] = status
    if error_code is not None:
        headers["Interaction-Error-Code"] = error_code
    headers["Nats-Msg-Id"] = msg_id
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
        result, result_json, reply_json = self.fit_result(result, operation, room)
        observation = wire_observation(result)
        observation_json = to_json(observation)
        if len(observation_json) > room:
            shortened = shortened_observation(observation, len(observation_json))
            observation_json = to_json(shortened)
            if len(observation_json) > room:
                # Metadata as large as the room: only the mark stays.
                shortened["metadata"] = {"truncated": True}
                observation_json = to_json(shortened)
        error = result.get("error")
        call_id = result["callId"]
        prefix = self.subjects.prefix
        # One header set for both events; only Nats-Msg-Id differs.
        headers = {"Content-Type": "application/json", "Interaction-Key": key}
        if is_safe_header_value(call_id):
            headers["Interaction-Call-Id"] = call_id
        headers["Interaction-Status"] = result["status"]
        if error is not None:
            headers["Interaction-Error-Code"] = error["code"]
        result_subject = f"{prefix}.{family}.result"
        observation_subject = f"{prefix}.{family}.observation"
        result_headers = {**headers, "Nats-Msg-Id": f"{result_subject}:{key}"}
        observation_headers = {**headers, "Nats-Msg-Id": f"{observation_subject}:{key}"}
        if trace:
            result_headers.update(trace)
            observation_headers.update(trace)
        events: list[Publish] = [
            (f"{result_subject}.{key}", result_json, result_headers),
            (f"{observation_subject}.{key}", observation_json, observation_headers),
        ]
        if target:
            events.insert(0, (target, reply_json, JSON_HEADERS))
        return events

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
            id_header="Interaction-Delivery-Id",
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
