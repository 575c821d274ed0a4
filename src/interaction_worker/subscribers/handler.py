"""One message in, its publishes out: the transport-neutral handling shared by both bindings.

Where its reply goes (`incoming`), what an outcome publishes (`outgoing`), and, for any exception on
the way, its refusal (`refusals`: the error reply and the dead letter). A message's publishes are
computed completely before any is sent, so a refusal never follows a half-published success.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from ..contracts import (
    ExternalResult,
    JsonRefused,
    McpDiscoverOutput,
    McpInvokeOutput,
    Observation,
    OutputReceipt,
    ToolList,
    parse_json_object,
)
from ..contracts import validation as check
from ..contracts.keys import NO_KEY, subject_key
from ..errors import InteractionWorkerError, InvalidJson
from ..nodes import DeliveryContext, Sandbox, ToolContext
from .dead_letters import CALL_ID, DELIVERY_ID, IdNames, UtcTimestamps
from .deadlines import Deadlines
from .incoming import Incoming, reply_target, valid_id
from .outgoing import Outgoing, Publish, trace_headers
from .refusals import Refusals
from .subjects import Kind, Subjects

_ID_NAMES: dict[Kind, IdNames] = {
    "tool": CALL_ID,
    "mcp": CALL_ID,
    "observe": CALL_ID,
    "output": DELIVERY_ID,
    "list": CALL_ID,  # never used: a tool list is not keyed by a call
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


def _identifier(kind: Kind, body: dict[str, Any]) -> str | None:
    """The id that keys the message's subjects, when a valid one can be read."""
    if kind == "output":
        return valid_id(body.get("deliveryId"))
    if kind == "observe":
        result = body.get("result")
        return valid_id(result.get("callId")) if isinstance(result, dict) else None
    if kind == "mcp" and body.get("operation") == "discover":
        return valid_id(body.get("server"))
    if kind == "list":
        return valid_id(body.get("name"))
    call = body.get("call")
    return valid_id(call.get("id")) if isinstance(call, dict) else None


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
        self.outgoing = Outgoing(subjects, max_payload)
        self.refusals = Refusals(self.outgoing, clock or UtcTimestamps(), logger)
        self.tool_timeout = tool_timeout
        # Set when shutdown cancels running calls: their cancellation becomes a WORKER_SHUTDOWN outcome.
        self.shutting_down = False
        self.deadlines = Deadlines()

    @property
    def max_payload(self) -> int:
        return self.outgoing.max_payload

    @max_payload.setter
    def max_payload(self, value: int) -> None:
        self.outgoing.max_payload = value

    @property
    def header_allowance(self) -> int:
        """Header bytes a binding adds to every publish beyond the handler's own (FastStream's)."""
        return self.outgoing.header_allowance

    @header_allowance.setter
    def header_allowance(self, value: int) -> None:
        self.outgoing.header_allowance = value

    def reply_target(
        self, msg: Incoming
    ) -> tuple[str | None, InteractionWorkerError | None]:
        """Where the reply goes: a valid Interaction-Reply-To header, else the reply subject."""
        return reply_target(msg, self.reply_prefixes)

    async def handle(self, kind: Kind, msg: Incoming) -> list[Publish]:
        if msg.headers:
            target, reply_error = reply_target(msg, self.reply_prefixes)
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
                return self.outgoing.result("tool", result, key, target, trace, None)
            return await self._run(kind, body, key, identifier, target, msg)
        except Exception as error:
            return self.refusals.refuse(
                kind,
                msg,
                error,
                key=key,
                identifier=identifier,
                target=target,
                id_names=_ID_NAMES[kind] if keyed_by_call else None,
            )

    def refuse(
        self,
        kind: Kind,
        msg: Incoming,
        error: InteractionWorkerError,
        *,
        target: str | None = None,
    ) -> list[Publish]:
        """The error reply (when there is somewhere to send it) and the dead letter of a message
        refused before it was read (OVERLOADED, SHUTTING_DOWN)."""
        return self.refusals.refuse(kind, msg, error, target=target)

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
                return self.outgoing.result(
                    "mcp", output.to_wire(), key, target, trace, "invoke"
                )
            if isinstance(output, McpInvokeOutput):
                return self.outgoing.result(
                    "mcp", output.result.to_wire(), key, target, trace, "invoke"
                )
            return self.outgoing.reply(
                target,
                output.to_json(),
                "The discover reply is larger than the server's max_payload",
            )
        if kind == "observe" or kind == "list":
            answer = (
                self.worker.observe(body)
                if kind == "observe"
                else self.worker.list_tools(body)
            )
            return self.outgoing.reply(target, answer.to_json())
        receipt = await self._deliver(body, identifier)
        return self.outgoing.receipt(receipt, key, target, trace)

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
