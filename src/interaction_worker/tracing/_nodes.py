"""The side effects of a traced worker's requests (docs/tracing.md): a child span of
the request's from the moment a node starts its side effect (`nodes/side_effects.py`: right before a
tool's `execute`, an MCP `tools/call` or a sink's `deliver`) to the node's answer.

The request span's name gains its target at that moment (`interaction.tool.call lookup`): only a tool
or server that exists and is granted names a span, so a client's invented names never multiply span
names. The nodes themselves know nothing of this: the hook they await is set here, around their call.
"""

from collections.abc import Awaitable, Callable
from contextvars import Token
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from ..commands import CommandDispatcher
from ..contracts import (
    ExternalResult,
    McpDiscoverOutput,
    McpInvokeOutput,
    Observation,
    OutputReceipt,
    ToolList,
)
from ..nodes import DeliveryContext, Sandbox, ToolContext
from ..nodes.side_effects import starting
from ..subscribers import Nodes, Subjects

_MAX_ID = 256  # wire.md 1: a longer id is refused, and not worth an attribute


class _SideEffect:
    """A child span from the moment a node starts its side effect to the node's answer.

    While the node runs, `nodes.side_effects.starting` is a hook that first awaits the hook it
    replaces (the ledger's `started` mark: if that fails, nothing starts and no span is opened), then
    opens the span as the current one and names the request span's target."""

    def __init__(
        self,
        tracer: Tracer,
        name: str,
        kind: SpanKind,
        attributes: dict[str, AttributeValue],
        request_name: str | None = None,
    ) -> None:
        self.tracer = tracer
        self.name = name
        self.kind = kind
        self.attributes = attributes
        self.request_name = request_name
        self.span: Span | None = None
        self._outer: Callable[[], Awaitable[None]] | None = None
        self._hook: Token[Callable[[], Awaitable[None]] | None] | None = None
        self._current: Token[otel_context.Context] | None = None

    async def _starts(self) -> None:
        if self._outer is not None:
            await self._outer()
        if self.request_name is not None:
            trace.get_current_span().update_name(self.request_name)
        self.span = self.tracer.start_span(
            self.name, kind=self.kind, attributes=self.attributes
        )
        self._current = otel_context.attach(trace.set_span_in_context(self.span))

    def answered(self, status: str, code: str | None) -> None:
        """The node's outcome: a failed one (a tool's error, say) puts the span in error."""
        span = self.span
        if span is None:
            return
        span.set_attribute("interaction.status", status)
        if code is not None:
            span.set_attribute("interaction.error.code", code)
            span.set_attribute("error.type", code)
            span.set_status(Status(StatusCode.ERROR, code))

    def __enter__(self) -> "_SideEffect":
        self._outer = starting.get()
        self._hook = starting.set(self._starts)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._hook is not None:
            starting.reset(self._hook)
        span = self.span
        if span is None:
            return
        if self._current is not None:
            otel_context.detach(self._current)
        if error is not None:
            # The type only: a tool's exception text may hold what must not leave the process,
            # which is why the wire never carries it either (errors.py).
            span.set_attribute("error.type", type(error).__name__)
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        span.end()


def _field(value: object, name: str) -> object:
    return value.get(name) if isinstance(value, dict) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and len(value) <= _MAX_ID else None


def _named(attributes: dict[str, AttributeValue], name: str, value: object) -> None:
    text = _text(value)
    if text is not None:
        attributes[name] = text


class TracedNodes:
    """The worker's nodes as a traced handler runs them: tool calls, MCP invokes and deliveries
    under a child span from their side effect's start (`_SideEffect`); the rest as they are."""

    def __init__(self, nodes: Nodes, tracer: Tracer, subjects: Subjects) -> None:
        self.nodes = nodes
        self.tracer = tracer
        self._tool_call = subjects.request("tool")
        self._mcp_call = subjects.request("mcp")

    @property
    def sandbox(self) -> Sandbox:
        return self.nodes.sandbox

    @sandbox.setter
    def sandbox(self, value: Sandbox) -> None:
        self.nodes.sandbox = value

    @property
    def commands(self) -> CommandDispatcher | None:
        """As it is: a command runs under its request's span."""
        return self.nodes.commands

    async def call_tool(
        self,
        request: object,
        *,
        context: ToolContext | None = None,
        trusted_json: bool = False,
    ) -> ExternalResult:
        """As it is: the bus calls `call_tool_document`."""
        return await self.nodes.call_tool(
            request, context=context, trusted_json=trusted_json
        )

    async def call_tool_document(
        self,
        request: object,
        *,
        context: ToolContext | None = None,
        trusted_json: bool = False,
    ) -> dict[str, Any]:
        call = _field(request, "call")
        name = _text(_field(call, "name")) or ""
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
        }
        _named(attributes, "gen_ai.tool.call.id", _field(call, "id"))
        with _SideEffect(
            self.tracer,
            f"execute_tool {name}",
            SpanKind.INTERNAL,
            attributes,
            f"{self._tool_call} {name}",
        ) as effect:
            result = await self.nodes.call_tool_document(
                request, context=context, trusted_json=trusted_json
            )
            error = result.get("error")
            effect.answered(
                str(result.get("status")),
                str(error["code"]) if isinstance(error, dict) else None,
            )
            return result

    async def call_mcp(self, request: object) -> McpDiscoverOutput | McpInvokeOutput:
        if _field(request, "operation") != "invoke":
            return await self.nodes.call_mcp(request)  # a discover: no side effect
        server = _text(_field(request, "server")) or ""
        call = _field(request, "call")
        name = _text(_field(call, "name")) or ""
        attributes: dict[str, AttributeValue] = {
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "interaction.mcp.server": server,
        }
        _named(attributes, "gen_ai.tool.call.id", _field(call, "id"))
        with _SideEffect(
            self.tracer,
            f"tools/call {name}",
            SpanKind.CLIENT,
            attributes,
            f"{self._mcp_call} {server}:{name}",
        ) as effect:
            output = await self.nodes.call_mcp(request)
            if isinstance(output, McpInvokeOutput):
                result = output.result
                effect.answered(
                    result.status,
                    result.error.code if result.error is not None else None,
                )
            return output

    async def deliver(
        self, request: object, *, context: DeliveryContext | None = None
    ) -> OutputReceipt:
        attributes: dict[str, AttributeValue] = {}
        _named(attributes, "interaction.delivery.id", _field(request, "deliveryId"))
        with _SideEffect(
            self.tracer, "sink.deliver", SpanKind.INTERNAL, attributes
        ) as effect:
            receipt = await self.nodes.deliver(request, context=context)
            effect.answered(
                receipt.status,
                receipt.error.code if receipt.error is not None else None,
            )
            return receipt

    def bounds_own_time(self, name: str) -> bool:
        return self.nodes.bounds_own_time(name)

    def rerunnable(self, name: str) -> bool:
        return self.nodes.rerunnable(name)

    def observe(self, request: object) -> Observation:
        return self.nodes.observe(request)

    def list_tools(self, request: object) -> ToolList:
        return self.nodes.list_tools(request)
