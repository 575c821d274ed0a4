"""The spans of a traced worker (their names and attributes: docs/tracing.md).

One request, one CONSUMER span, `<request subject>` (`interaction.tool.call`), whose parent is the
request's W3C `traceparent` when it has a valid one, else the root of a new trace. It is opened by
the handler (`TracedHandler`) and is the current span while the message is handled, so that the
request's own work (a tool's HTTP client, say) nests under it; it ends once the message's publishes
are sent, each under a PRODUCER span of its own (`Spans.traced`). The message's events and dead
letter carry their PRODUCER span's context as `traceparent`/`tracestate` in place of the ones
copied from the request: whoever consumes them continues this trace.

Side effects get a child span of their own (`_nodes.TracedNodes`), which also names the request
span's target (`interaction.tool.call lookup`).

The handler and the nodes are wrapped only when tracing is on; off, nothing here runs at all.
"""

from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from ..contracts.keys import headers_size
from ..contracts.wire import (
    ERROR_CODE_HEADER,
    ID_HEADERS,
    KEY_HEADER,
    MSG_ID_HEADER,
    STATUS_HEADER,
)
from ..errors import InteractionWorkerError
from ..subscribers import (
    KINDS,
    Incoming,
    Kind,
    MessageHandler,
    Nodes,
    Publish,
    Subjects,
)
from ..subscribers.delivery import Redeliver
from ..subscribers.dispatcher import Publisher
from . import TracerProvider
from ._nodes import TracedNodes

_TRACE_HEADERS = ("traceparent", "tracestate")
# What a traceparent adds to an event that came without one (its tracestate, if any, is the
# request's, already counted): the handler leaves room for it in every publish.
TRACEPARENT_BYTES = headers_size(
    {"traceparent": f"00-{'0' * 32}-{'0' * 16}-01"}
) - headers_size({})
# The id headers of events and dead letters (wire.md 3), as span attributes.
# `Interaction-Call-Id` is `interaction.call.id`.
_ID_HEADERS = tuple((header, header.lower().replace("-", ".")) for header in ID_HEADERS)
_MAX_ID = 256  # wire.md 1: a longer id is refused, and not worth an attribute


class _Traced(list[Publish]):
    """A message's publishes and its request span, which the traced publish ends once they are sent."""

    __slots__ = ("span",)

    def __init__(self, publishes: list[Publish], span: Span) -> None:
        super().__init__(publishes)
        self.span = span


class Spans:
    """The tracer and the W3C propagator of one traced binding.

    Raises:
        TypeError: the provider gives no OpenTelemetry tracer.
    """

    def __init__(self, provider: TracerProvider) -> None:
        tracer = provider.get_tracer("interaction_worker")
        if not isinstance(tracer, trace.Tracer):
            raise TypeError("tracer_provider must be an OpenTelemetry TracerProvider")
        self.tracer = tracer
        # W3C trace context only, whatever OTEL_PROPAGATORS says: the wire carries these two headers.
        self.propagator = TraceContextTextMapPropagator()

    def handler(self, nodes: Nodes, **options: Any) -> MessageHandler:
        return TracedHandler(nodes, spans=self, **options)

    def receive(self, name: str, msg: Incoming) -> Span:
        """The request's CONSUMER span, a child of its `traceparent` (never of whatever span happens
        to be current in the binding's task)."""
        parent = self.propagator.extract(msg.headers or {})
        attributes: dict[str, AttributeValue] = {
            "messaging.system": "nats",
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": msg.subject,
            "messaging.message.body.size": len(msg.data),
        }
        return self.tracer.start_span(
            name, context=parent, kind=SpanKind.CONSUMER, attributes=attributes
        )

    def answered(
        self, span: Span, publishes: list[Publish], dead: str
    ) -> list[Publish]:
        """`publishes` carrying `span`; the span described by the first event or dead letter (its
        key, id, status, error code), in error when the message was refused (a dead letter)."""
        for subject, _, headers in publishes:
            key = headers.get(KEY_HEADER)
            if key is None:
                continue  # a reply: its headers say nothing of the outcome
            span.set_attribute("interaction.key", key)
            for header, attribute in _ID_HEADERS:
                identifier = headers.get(header)
                if identifier is not None:
                    span.set_attribute(attribute, identifier)
            status = headers.get(STATUS_HEADER)
            if status is not None:
                span.set_attribute("interaction.status", status)
            code = headers.get(ERROR_CODE_HEADER)
            if code is not None:
                span.set_attribute("interaction.error.code", code)
            if subject.startswith(dead):
                span.set_attribute("error.type", code or "refused")
                span.set_status(Status(StatusCode.ERROR, code))
            break
        return _Traced(publishes, span)

    def abandoned(self, span: Span, error: BaseException) -> None:
        """End the span of a message that publishes nothing now: it comes back later (durable
        mode's Redeliver), or its handling was cancelled."""
        if isinstance(error, Redeliver):
            span.set_attribute("interaction.redelivered", True)
        else:
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        span.end()

    def traced(self, publish: Publisher) -> Publisher:
        tracer, carry = self.tracer, self._carry

        async def publish_traced(publishes: list[Publish]) -> None:
            request = publishes.span if isinstance(publishes, _Traced) else None
            parent = None if request is None else trace.set_span_in_context(request)
            try:
                for subject, payload, headers in publishes:
                    event = KEY_HEADER in headers
                    attributes: dict[str, AttributeValue] = {
                        "messaging.system": "nats",
                        "messaging.operation.type": "send",
                        "messaging.operation.name": "publish",
                        "messaging.destination.name": subject,
                        "messaging.message.body.size": len(payload),
                    }
                    if event:
                        # The key, last, makes every event's subject its own: the name keeps the rest.
                        name = f"publish {subject.rpartition('.')[0]}"
                        msg_id = headers.get(MSG_ID_HEADER)
                        if msg_id is not None:
                            attributes["messaging.message.id"] = msg_id
                    else:
                        name = "publish (temporary)"  # a reply, to the client's own subject
                        attributes["messaging.destination.temporary"] = True
                    with tracer.start_as_current_span(
                        name,
                        context=parent,
                        kind=SpanKind.PRODUCER,
                        attributes=attributes,
                    ) as span:
                        if event:
                            headers = carry(headers, span)
                        await publish([(subject, payload, headers)])
            finally:
                if request is not None:
                    request.end()

        return publish_traced

    def _carry(self, headers: dict[str, str], span: Span) -> dict[str, str]:
        """The event's headers with `span`'s context in place of the request's trace headers."""
        carried = {
            name: value for name, value in headers.items() if name not in _TRACE_HEADERS
        }
        self.propagator.inject(carried, context=trace.set_span_in_context(span))
        return carried


class TracedHandler(MessageHandler):
    """A `MessageHandler` whose requests run under their CONSUMER span (see the module's docstring);
    its publishes, handed to `Spans.traced`'s publish, end the span once sent.

    Every publish leaves room for the traceparent it may gain (`TRACEPARENT_BYTES`).
    """

    def __init__(
        self, worker: Nodes, *, spans: Spans, subjects: Subjects, **options: Any
    ) -> None:
        super().__init__(
            TracedNodes(worker, spans.tracer, subjects), subjects=subjects, **options
        )
        self.spans = spans
        self.header_allowance += TRACEPARENT_BYTES
        self._names: dict[Kind, str] = {kind: subjects.request(kind) for kind in KINDS}
        self._dead = f"{subjects.prefix}.dead."

    async def handle(self, kind: Kind, msg: Incoming) -> list[Publish]:
        spans = self.spans
        span = spans.receive(self._names[kind], msg)
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            publishes = await super().handle(kind, msg)
        except BaseException as error:
            spans.abandoned(span, error)
            raise
        finally:
            otel_context.detach(token)
        return spans.answered(span, publishes, self._dead)

    async def resolve_exhausted(
        self, kind: Kind, msg: Incoming, attempts: int
    ) -> list[Publish]:
        spans = self.spans
        span = spans.receive(self._names[kind], msg)
        span.set_attribute("interaction.exhausted", True)
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            publishes = await super().resolve_exhausted(kind, msg, attempts)
        except BaseException as error:
            spans.abandoned(span, error)
            raise
        finally:
            otel_context.detach(token)
        return spans.answered(span, publishes, self._dead)

    def refuse(
        self,
        kind: Kind,
        msg: Incoming,
        error: InteractionWorkerError,
        *,
        target: str | None = None,
    ) -> list[Publish]:
        span = self.spans.receive(self._names[kind], msg)
        publishes = super().refuse(kind, msg, error, target=target)
        return self.spans.answered(span, publishes, self._dead)
