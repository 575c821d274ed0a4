"""Tracing (docs/tracing.md) on a real nats-server: a worker served as `run` serves it, with the SDK's
in-memory exporter on an injected provider. Spans are read once the service has stopped, when every
request has ended its span."""

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from bus_doubles import SECRET_TEXT, Boom, ListSink, McpDouble
from bus_harness import WAIT, Bus, Serve, reply_prefixes, unique_prefix
from nats.aio.msg import Msg
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanContext, SpanKind, StatusCode

from interaction_worker import InteractionWorker, Sandbox, ToolContext
from interaction_worker.config import DurableSettings
from interaction_worker.service import ConnectionStats, ServeOptions, serve

pytest_plugins = ["bus_fixtures"]

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
PARENT_ID = 0x00F067AA0BA902B7
TRACEPARENT = f"00-{TRACE_ID:032x}-{PARENT_ID:016x}-01"
TRACE_HEADERS = {"traceparent": TRACEPARENT, "tracestate": "vendor=1"}


class Spy:
    """Records the span current while it executes."""

    name = "spy"
    input_schema: Mapping[str, Any] = {"type": "object"}

    def __init__(self) -> None:
        self.current: list[SpanContext] = []

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.current.append(trace.get_current_span().get_span_context())
        return {"status": "success", "content": "seen"}


@dataclass
class Traced:
    bus: Bus
    exporter: InMemorySpanExporter
    stop: asyncio.Event
    task: asyncio.Task[ConnectionStats]

    @property
    def prefix(self) -> str:
        return self.bus.prefix

    async def spans(self) -> Sequence[ReadableSpan]:
        """Every span, once the service has stopped (its requests answered, their spans ended)."""
        self.stop.set()
        with anyio.fail_after(WAIT):
            await self.task
        return self.exporter.get_finished_spans()


@contextlib.asynccontextmanager
async def traced(
    nats_url: str, worker: InteractionWorker, *, tracing: bool = True, **options: Any
) -> AsyncIterator[Traced]:
    """`service.serve` of `worker` with `tracing.enabled` as given and an in-memory provider."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    prefix = unique_prefix()
    ready, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(
        serve(
            worker,
            ServeOptions(
                url=nats_url,
                prefix=prefix,
                reply_prefixes=reply_prefixes(prefix),
                tracing=tracing,
                **options,
            ),
            ready=lambda url: ready.set(),
            stop=stop,
            install_signal_handlers=False,
            tracer_provider=provider,
        )
    )
    watcher = Serve("nats-py", nats_url)
    try:
        waiting = asyncio.ensure_future(ready.wait())
        await asyncio.wait(
            {task, waiting}, timeout=WAIT, return_when=asyncio.FIRST_COMPLETED
        )
        waiting.cancel()
        if task.done():
            task.result()
        assert ready.is_set(), "the worker did not start"
        yield Traced(await watcher.bus(nats_url, prefix), exporter, stop, task)
    finally:
        stop.set()
        await watcher.close()
        await asyncio.wait({task})


def call(call_id: str, name: str) -> dict[str, Any]:
    return {"call": {"id": call_id, "name": name, "arguments": {}}}


def context_of(msg: Msg) -> tuple[int, int]:
    """The trace id and parent (span) id of a message's traceparent."""
    assert msg.headers is not None
    version, trace_id, span_id, flags = msg.headers["traceparent"].split("-")
    assert version == "00"
    assert (
        int(flags, 16) & 1
    )  # sampled (the SDK may set the W3C "random" flag beside it)
    return int(trace_id, 16), int(span_id, 16)


def of_kind(spans: Sequence[ReadableSpan], kind: SpanKind) -> list[ReadableSpan]:
    return [span for span in spans if span.kind is kind]


def producers(spans: Sequence[ReadableSpan]) -> dict[object, ReadableSpan]:
    """The PRODUCER spans by the subject they published on."""
    return {
        (span.attributes or {})["messaging.destination.name"]: span
        for span in of_kind(spans, SpanKind.PRODUCER)
    }


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else int(span.parent.span_id)


async def test_a_tool_call_continues_the_callers_trace_and_its_events_carry_it_on(
    nats_url: str,
) -> None:
    spy = Spy()
    worker = InteractionWorker(tools=[spy], sandbox=Sandbox(tools=["spy"]))
    async with traced(nats_url, worker) as served:
        bus, p = served.bus, served.prefix
        sent = await bus.send("tool", call("call-1", "spy"), headers=TRACE_HEADERS)
        reply = await bus.reply(sent)
        (result,) = await bus.wait_subject(f"{p}.tool.result.call-1")
        (observation,) = await bus.wait_subject(f"{p}.tool.observation.call-1")
        spans = await served.spans()

    (request,) = of_kind(spans, SpanKind.CONSUMER)
    assert request.name == f"{p}.tool.call spy"
    assert request.parent is not None and request.parent.is_remote
    assert (request.parent.trace_id, request.parent.span_id) == (TRACE_ID, PARENT_ID)
    attributes = request.attributes or {}
    assert attributes["messaging.system"] == "nats"
    assert attributes["messaging.destination.name"] == f"{p}.tool.call"
    assert attributes["interaction.call.id"] == "call-1"
    assert attributes["interaction.status"] == "success"
    assert request.status.status_code is StatusCode.UNSET

    (tool,) = [span for span in spans if span.name == "execute_tool spy"]
    assert tool.kind is SpanKind.INTERNAL
    assert parent_id(tool) == span_id(request)
    assert (tool.attributes or {})["gen_ai.tool.call.id"] == "call-1"
    assert spy.current == [tool.context]  # the tool ran as its span's child

    published = producers(spans)
    assert set(published) == {sent.reply, result.subject, observation.subject}
    assert {parent_id(span) for span in published.values()} == {span_id(request)}
    for event in (result, observation):
        assert context_of(event) == (TRACE_ID, span_id(published[event.subject]))
        assert event.headers is not None
        assert event.headers["tracestate"] == "vendor=1"
    assert "traceparent" not in (
        reply.headers or {}
    )  # a reply's headers are as they were


async def test_a_refused_call_has_an_error_span_and_its_dead_letter_carries_the_trace(
    nats_url: str,
) -> None:
    worker = InteractionWorker(tools=[Spy()], sandbox=Sandbox(tools=["spy", "ghost"]))
    async with traced(nats_url, worker) as served:
        bus, p = served.bus, served.prefix
        await bus.send("tool", call("call-2", "ghost"), headers=TRACE_HEADERS)
        (dead,) = await bus.wait(bus.is_dead)
        spans = await served.spans()

    (request,) = of_kind(spans, SpanKind.CONSUMER)
    assert request.name == f"{p}.tool.call"  # an unknown tool does not name a span
    assert request.status.status_code is StatusCode.ERROR
    assert request.status.description == "NOT_FOUND"
    assert (request.attributes or {})["error.type"] == "NOT_FOUND"
    assert of_kind(spans, SpanKind.INTERNAL) == []  # nothing started
    assert context_of(dead) == (TRACE_ID, span_id(producers(spans)[dead.subject]))


async def test_a_tool_that_raises_has_an_error_span_without_its_exceptions_text(
    nats_url: str,
) -> None:
    worker = InteractionWorker(tools=[Boom()], sandbox=Sandbox(tools=["boom"]))
    async with traced(nats_url, worker) as served:
        bus = served.bus
        await bus.send("tool", call("call-5", "boom"), headers=TRACE_HEADERS)
        await bus.wait(bus.is_dead)
        spans = await served.spans()

    (tool,) = [span for span in spans if span.name == "execute_tool boom"]
    assert tool.status.status_code is StatusCode.ERROR
    assert (tool.attributes or {})["error.type"] == "RuntimeError"
    (request,) = of_kind(spans, SpanKind.CONSUMER)
    assert request.status.description == "INTERNAL"
    exported = "".join(span.to_json() for span in spans)
    assert SECRET_TEXT not in exported and "sk-live" not in exported


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="none"),
        # A tracestate belongs to the trace its traceparent names: without one, it goes too.
        pytest.param({"traceparent": "00-xyz-01", "tracestate": "a=1"}, id="invalid"),
    ],
)
async def test_without_a_valid_traceparent_a_delivery_starts_a_trace_of_its_own(
    nats_url: str, headers: dict[str, str]
) -> None:
    worker = InteractionWorker(output=ListSink())
    async with traced(nats_url, worker) as served:
        bus, p = served.bus, served.prefix
        body = {"deliveryId": "d-1", "message": {"role": "assistant", "content": "hi"}}
        await bus.send("output", body, headers=headers)
        (receipt,) = await bus.wait_subject(f"{p}.output.receipt.d-1")
        spans = await served.spans()

    (request,) = of_kind(spans, SpanKind.CONSUMER)
    assert request.name == f"{p}.output.deliver"
    assert request.parent is None
    (sink,) = [span for span in spans if span.name == "sink.deliver"]
    assert parent_id(sink) == span_id(request)
    assert (sink.attributes or {})["interaction.delivery.id"] == "d-1"
    assert request.context is not None
    assert context_of(receipt) == (
        request.context.trace_id,
        span_id(producers(spans)[receipt.subject]),
    )
    assert "tracestate" not in (receipt.headers or {})


async def test_an_mcp_invoke_names_its_server_and_tool_and_has_a_client_span(
    nats_url: str,
) -> None:
    worker = InteractionWorker(mcp={"docs": McpDouble()}, sandbox=Sandbox(mcp=["docs"]))
    async with traced(nats_url, worker) as served:
        bus, p = served.bus, served.prefix
        body = {
            "operation": "invoke",
            "server": "docs",
            "call": {"id": "m-1", "name": "search", "arguments": {"q": "x"}},
        }
        await bus.send("mcp", body, headers=TRACE_HEADERS)
        await bus.wait_subject(f"{p}.mcp.result.m-1")
        spans = await served.spans()

    (request,) = of_kind(spans, SpanKind.CONSUMER)
    assert request.name == f"{p}.mcp.call docs:search"
    (client,) = of_kind(spans, SpanKind.CLIENT)
    assert client.name == "tools/call search"
    assert parent_id(client) == span_id(request)
    assert (client.attributes or {})["interaction.mcp.server"] == "docs"


async def test_in_durable_mode_the_side_effect_span_opens_after_the_ledgers_mark(
    nats_url: str,
) -> None:
    """Durable mode runs calls under the ledger, whose `started` mark is the side-effect hook the
    tool span's hook chains to."""
    spy = Spy()
    worker = InteractionWorker(tools=[spy], sandbox=Sandbox(tools=["spy"]))
    tag = uuid.uuid4().hex[:10].upper()
    durable = DurableSettings(
        enabled=True,
        calls_stream=f"CALLS_{tag}",
        events_stream=f"EVENTS_{tag}",
        dead_stream=f"DEAD_{tag}",
    )
    async with traced(nats_url, worker, durable=durable) as served:
        bus, p = served.bus, served.prefix
        await bus.send(
            "tool", call("call-3", "spy"), headers=TRACE_HEADERS, reply=False
        )
        (result,) = await bus.wait_subject(f"{p}.tool.result.call-3")
        spans = await served.spans()
        js = bus.client.jetstream()
        for stream in (
            durable.calls_stream,
            durable.events_stream,
            durable.dead_stream,
        ):
            await js.delete_stream(stream)

    (request,) = of_kind(spans, SpanKind.CONSUMER)
    assert request.name == f"{p}.tool.call spy"
    (tool,) = [span for span in spans if span.name == "execute_tool spy"]
    assert spy.current == [tool.context]
    assert context_of(result) == (TRACE_ID, span_id(producers(spans)[result.subject]))


async def test_a_dead_letter_that_fills_max_payload_leaves_room_for_its_traceparent(
    nats_url: str,
) -> None:
    """A message that came without trace headers gains a traceparent on its dead letter, which is
    cut to the server's max_payload: the handler leaves room for the header."""
    async with traced(nats_url, InteractionWorker()) as served:
        bus = served.bus
        body = b"x" * (bus.client.max_payload - 64)  # not JSON: refused
        await bus.send("tool", body)
        (dead,) = await bus.wait(bus.is_dead)
        spans = await served.spans()

    letter = json.loads(dead.data)
    assert letter["truncated"] is True
    assert len(dead.data) > bus.client.max_payload - 1024  # cut, not dropped
    (request,) = of_kind(spans, SpanKind.CONSUMER)
    assert request.context is not None
    assert context_of(dead)[0] == request.context.trace_id


async def test_with_tracing_off_nothing_is_traced_and_events_carry_the_requests_headers(
    nats_url: str,
) -> None:
    spy = Spy()
    worker = InteractionWorker(tools=[spy], sandbox=Sandbox(tools=["spy"]))
    async with traced(nats_url, worker, tracing=False) as served:
        bus, p = served.bus, served.prefix
        await bus.send("tool", call("call-4", "spy"), headers=TRACE_HEADERS)
        (result,) = await bus.wait_subject(f"{p}.tool.result.call-4")
        spans = await served.spans()

    assert spans == ()
    assert result.headers is not None
    assert {name: result.headers[name] for name in TRACE_HEADERS} == TRACE_HEADERS
    assert spy.current == [trace.INVALID_SPAN_CONTEXT]
