"""One message in, its publishes out: the transport-neutral handling shared by both bindings.

This is the one place that turns exceptions into error replies and dead letters (wire.md 4-5). A
message's publishes are computed completely before any is sent, so a refusal never follows a
half-published success, and a refused message publishes no event.
"""

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from pydantic_core import to_json

from ..contracts import (
    ExternalResult,
    JsonRefused,
    McpDiscoverOutput,
    McpInvokeOutput,
    Observation,
    OutputReceipt,
    ToolList,
    js_trim,
    parse_json_object,
)
from ..contracts import validation as check
from ..contracts.keys import NO_KEY, headers_size, is_safe_header_value, subject_key
from ..errors import (
    InteractionWorkerError,
    Internal,
    InvalidInput,
    InvalidJson,
    ResultTooLarge,
)
from ..nodes import (
    DeliveryContext,
    Sandbox,
    ToolContext,
    shortened_observation,
    wire_observation,
)
from .deadlines import Deadlines
from .envelope import (
    JSON_HEADERS,
    DeadLetterInput,
    Publish,
    dead_letter_body,
    dead_letter_headers,
    error_reply,
    event_headers,
    trace_headers,
)
from .subjects import Kind, Subjects, is_publishable_subject

REPLY_TO_HEADER = "Interaction-Reply-To"
_ID_HEADER: dict[Kind, str] = {
    "tool": "Interaction-Call-Id",
    "mcp": "Interaction-Call-Id",
    "observe": "Interaction-Call-Id",
    "output": "Interaction-Delivery-Id",
    "list": "Interaction-Call-Id",  # never used: a tool list is not keyed by a call
}
_LOGGER = logging.getLogger("interaction_worker")
T = TypeVar("T")


class Nodes(Protocol):
    """The four nodes, as `InteractionWorker` offers them."""

    sandbox: Sandbox

    async def call_tool(
        self,
        request: object,
        *,
        context: ToolContext | None = None,
        trusted_json: bool = False,
    ) -> ExternalResult: ...

    async def call_tool_document(
        self,
        request: object,
        *,
        context: ToolContext | None = None,
        trusted_json: bool = False,
    ) -> dict[str, Any]: ...

    async def call_mcp(
        self, request: object
    ) -> McpDiscoverOutput | McpInvokeOutput: ...

    def bounds_own_time(self, name: str) -> bool: ...

    def observe(self, request: object) -> Observation: ...

    def list_tools(self, request: object) -> ToolList: ...

    async def deliver(
        self, request: object, *, context: DeliveryContext | None = None
    ) -> OutputReceipt: ...


@dataclass(slots=True)
class Incoming:
    """A received message, whatever the binding: the subject it came on, its body, headers and reply.

    Not frozen: a frozen dataclass's constructor costs three times as much, once per message."""

    subject: str
    data: bytes
    headers: Mapping[str, str] | None
    reply: str | None


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


def _valid_id(value: object) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= 256 and js_trim(value):
        return value
    return None


def _identifier(kind: Kind, body: dict[str, Any]) -> str | None:
    """The id that keys the message's subjects, when a valid one can be read."""
    if kind == "output":
        return _valid_id(body.get("deliveryId"))
    if kind == "observe":
        result = body.get("result")
        return _valid_id(result.get("callId")) if isinstance(result, dict) else None
    if kind == "mcp" and body.get("operation") == "discover":
        return _valid_id(body.get("server"))
    if kind == "list":
        return _valid_id(body.get("name"))
    call = body.get("call")
    return _valid_id(call.get("id")) if isinstance(call, dict) else None


def _failure(
    call_id: str, source: str, status: str, code: str, message: str
) -> ExternalResult:
    return check.external_result(
        {
            "callId": call_id,
            "source": source,
            "status": status,
            "error": {"code": code, "message": message, "retryable": False},
        }
    )


class MessageHandler:
    """Runs one message through the worker's nodes and says what to publish.

    Args:
        max_payload: the server's limit; replies and events that would exceed it are replaced.
        tool_timeout: seconds a tool may run before it is cancelled with TOOL_TIMEOUT.
        clock: the `receivedAt` of dead letters.
    """

    def __init__(
        self,
        worker: Nodes,
        *,
        subjects: Subjects,
        reply_prefixes: tuple[str, ...] = ("_INBOX.",),
        max_payload: int = 1024 * 1024,
        tool_timeout: float | None = 60.0,
        clock: Callable[[], str] | None = None,
        logger: logging.Logger = _LOGGER,
    ) -> None:
        self.worker = worker
        self.subjects = subjects
        self.reply_prefixes = reply_prefixes
        self.max_payload = max_payload
        # Header bytes a binding adds to every publish beyond the handler's own (FastStream's).
        self.header_allowance = 0
        self.tool_timeout = tool_timeout
        self.clock = clock or UtcTimestamps()
        # Dead letters' Nats-Msg-Id in core mode: unique without a system call per refusal.
        self._letter_prefix = uuid.uuid4().hex
        self._letter_ids = itertools.count(1)
        self.logger = logger
        # Set when shutdown cancels running calls: their cancellation becomes a WORKER_SHUTDOWN outcome.
        self.shutting_down = False
        self.deadlines = Deadlines()

    def _room(self) -> int:
        """The bytes one publish may take, headers included."""
        return self.max_payload - self.header_allowance

    def reply_target(
        self, msg: Incoming
    ) -> tuple[str | None, InteractionWorkerError | None]:
        """Where the reply goes: a valid Interaction-Reply-To header, else the reply subject."""
        requested = msg.headers.get(REPLY_TO_HEADER) if msg.headers else None
        if requested is None:
            return msg.reply or None, None
        if is_publishable_subject(requested, self.reply_prefixes):
            return requested, None
        return msg.reply or None, InvalidInput(
            "Interaction-Reply-To must be a subject under an allowed reply prefix"
        )

    async def handle(self, kind: Kind, msg: Incoming) -> list[Publish]:
        if msg.headers:
            target, reply_error = self.reply_target(msg)
        else:
            target, reply_error = msg.reply or None, None
        key, identifier, keyed_by_call = NO_KEY, None, True
        try:
            try:
                body = parse_json_object(msg.data)
            except JsonRefused as refused:
                raise InvalidJson(f"Invalid JSON: {refused.message}") from None
            identifier = _identifier(kind, body)
            # A discover of one server is keyed by the server name, a tool list by the tool name:
            # neither is a call id.
            keyed_by_call = kind != "list" and not (
                kind == "mcp" and body.get("operation") == "discover"
            )
            if identifier is not None:
                key = subject_key(identifier)
            if reply_error is not None:
                raise reply_error
            if kind == "tool":  # the common case, without one more coroutine
                result = await self._call_tool(body, identifier)
                trace = trace_headers(msg.headers) if msg.headers else {}
                return self._result_publishes("tool", result, key, target, trace, None)
            return await self._run(kind, body, key, identifier, target, msg)
        except InteractionWorkerError as error:
            return self.refuse(
                kind,
                msg,
                error,
                key=key,
                identifier=identifier,
                target=target,
                keyed_by_call=keyed_by_call,
            )
        except Exception:
            self.logger.exception("unexpected error on %s", msg.subject)
            return self.refuse(
                kind,
                msg,
                Internal(),
                key=key,
                identifier=identifier,
                target=target,
                keyed_by_call=keyed_by_call,
            )

    def refuse(
        self,
        kind: Kind,
        msg: Incoming,
        error: InteractionWorkerError,
        *,
        key: str = NO_KEY,
        identifier: str | None = None,
        target: str | None = None,
        keyed_by_call: bool = True,
    ) -> list[Publish]:
        """The error reply (when there is somewhere to send it) and the dead letter."""
        publishes: list[Publish] = []
        if target:
            body, headers = error_reply(error)
            publishes.append((target, body, headers))
        is_call = keyed_by_call
        id_field = ("deliveryId" if kind == "output" else "callId") if is_call else None
        headers = dead_letter_headers(
            key=key,
            id_header=_ID_HEADER[kind] if is_call else None,
            identifier=identifier,
            error=error,
            msg_id=f"{self._letter_prefix}-{next(self._letter_ids)}",
            trace=trace_headers(msg.headers),
        )
        letter = DeadLetterInput(
            subject=msg.subject,
            data=msg.data,
            headers=msg.headers,
            error=error,
            id_field=id_field,
            identifier=identifier if is_call else None,
            received_at=self.clock(),
        )
        body = dead_letter_body(letter, self._room() - headers_size(headers))
        publishes.append((self.subjects.dead(kind, key), body, headers))
        return publishes

    async def _run(
        self,
        kind: Kind,
        body: dict[str, Any],
        key: str,
        identifier: str | None,
        target: str | None,
        msg: Incoming,
    ) -> list[Publish]:
        trace = trace_headers(msg.headers)
        if kind == "mcp":
            output = await self._cancellable(self.worker.call_mcp(body), body, "mcp")
            if isinstance(output, ExternalResult):
                return self._result_publishes(
                    "mcp", output.to_wire(), key, target, trace, "invoke"
                )
            if isinstance(output, McpInvokeOutput):
                return self._result_publishes(
                    "mcp", output.result.to_wire(), key, target, trace, "invoke"
                )
            payload = output.to_json()
            if len(payload) + headers_size(JSON_HEADERS) > self._room():
                raise ResultTooLarge(
                    "The discover reply is larger than the server's max_payload"
                )
            return [(target, payload, JSON_HEADERS)] if target else []
        if kind == "observe" or kind == "list":
            answer = (
                self.worker.observe(body)
                if kind == "observe"
                else self.worker.list_tools(body)
            )
            payload = answer.to_json()
            if len(payload) + headers_size(JSON_HEADERS) > self._room():
                raise ResultTooLarge()
            return [(target, payload, JSON_HEADERS)] if target else []
        receipt = await self._deliver(body, identifier)
        return self._receipt_publishes(receipt, key, target, trace)

    async def _call_tool(
        self, body: dict[str, Any], identifier: str | None
    ) -> dict[str, Any]:
        """The tool's result as its wire document (see `InteractionWorker.call_tool_document`).

        A tool that bounds its own time runs without the `tool_timeout` deadline."""
        timeout = self.tool_timeout
        context = None
        deadline = None
        if timeout is not None:
            requested = body.get("call")
            # The body is not validated yet: a name that is not a string fails in the call itself.
            name = requested.get("name") if type(requested) is dict else None
            if type(name) is not str or not self.worker.bounds_own_time(name):
                deadline = asyncio.get_running_loop().time() + timeout
        if identifier is not None:
            context = ToolContext(identifier, self.worker.sandbox, deadline=deadline)
        call = self.worker.call_tool_document(body, context=context, trusted_json=True)
        task = asyncio.current_task()
        if deadline is None or task is None:
            result = await self._cancellable(call, body, "tool")
            return result.to_wire() if isinstance(result, ExternalResult) else result
        self.deadlines.watch(task, deadline)
        try:
            result = await call
        except asyncio.CancelledError:
            if not self.deadlines.unwatch(task):
                return self._shutdown_result(body, "tool").to_wire()
            task.uncancel()
            return _failure(
                body["call"]["id"],
                body["call"]["name"],
                "timeout",
                "TOOL_TIMEOUT",
                "Tool call timed out",
            ).to_wire()
        if self.deadlines.unwatch(task):
            task.uncancel()  # the tool swallowed the cancellation and finished: keep its result
        return result

    async def _cancellable(
        self, work: Awaitable[T], body: dict[str, Any], kind: Kind
    ) -> T | ExternalResult:
        """Await `work`; a cancellation by shutdown becomes a `cancelled` WORKER_SHUTDOWN result."""
        try:
            return await work
        except asyncio.CancelledError:
            return self._shutdown_result(body, kind)

    def _shutdown_result(self, body: dict[str, Any], kind: Kind) -> ExternalResult:
        """Called while handling a CancelledError: re-raises it unless shutdown caused it."""
        task = asyncio.current_task()
        if not self.shutting_down or task is None:
            raise asyncio.CancelledError
        task.uncancel()
        call = body["call"]
        source = call["name"] if kind == "tool" else f"{body['server']}:{call['name']}"
        return _failure(
            call["id"],
            source,
            "cancelled",
            "WORKER_SHUTDOWN",
            "The worker shut down before the call finished",
        )

    async def _deliver(
        self, body: dict[str, Any], identifier: str | None
    ) -> OutputReceipt:
        context = DeliveryContext(identifier) if identifier is not None else None
        try:
            return await self.worker.deliver(body, context=context)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not self.shutting_down or task is None or identifier is None:
                raise
            task.uncancel()
            return check.output_receipt(
                {
                    "deliveryId": identifier,
                    "status": "unknown",
                    "error": {
                        "code": "WORKER_SHUTDOWN",
                        "message": "The worker shut down before the sink answered",
                        "retryable": False,
                    },
                }
            )

    def _result_publishes(
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
        result_json = to_json(result)
        reply_json = (
            b'{"operation":"invoke","result":' + result_json + b"}"
            if operation == "invoke"
            else result_json
        )
        # Event headers are bounded (the raw id is at most 256 code points); 2 KiB covers them, besides
        # the trace headers copied from the request, which are as long as the client made them.
        room = self._room() - 2048 - (headers_size(trace) if trace else 0)
        if len(reply_json) > room:
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
            )
            return self._result_publishes(
                family, too_large.to_wire(), key, target, trace, operation
            )
        observation = wire_observation(result)
        observation_json = to_json(observation)
        if len(observation_json) > room:
            shortened = shortened_observation(observation, len(observation_json))
            observation_json = to_json(shortened)
            if (
                len(observation_json) > room
            ):  # metadata as large as the room: only the mark stays
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

    def _receipt_publishes(
        self,
        receipt: OutputReceipt,
        key: str,
        target: str | None,
        trace: dict[str, str],
    ) -> list[Publish]:
        payload = receipt.to_json()
        if len(payload) + 2048 + headers_size(trace) > self._room():
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
            payload = receipt.to_json()
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
