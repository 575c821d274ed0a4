"""InteractionWorker: the registries, the sink and the sandbox behind the four nodes.

Each node method takes a request body as a JSON value (or its model) and returns the output model, or
raises an `InteractionWorkerError` whose code is the wire's; the bus bindings call these methods.
"""

import logging
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypedDict, Unpack

from .commands import CommandDispatcher
from .config import DurableSettings, IdempotencySettings
from .contracts import (
    ContractError,
    ExternalResult,
    McpDiscoverOutput,
    McpInvokeOutput,
    Observation,
    OutputReceipt,
    ToolList,
)
from .contracts import validation as check
from .contracts._base import WireModel
from .contracts.serving import SERVE_NAMES, ServeName, serve_problem
from .errors import (
    ConfigurationError,
    InvalidInput,
    NotFound,
)
from .ledger import KeyValueStore, Ledger
from .nodes import (
    DeliveryContext,
    McpClient,
    McpRegistry,
    OutputSink,
    RegisteredTool,
    Sandbox,
    ToolContext,
    ToolRegistry,
    check_sink,
    deliver_output,
    is_rerunnable,
    observe_request,
)
from .nodes.lifecycle import close_resources, start_resources
from .subscribers import DurableBinding, MessageHandler, NatsBinding, bindings
from .subscribers.binding_options import BindingOptions, Tracing
from .subscribers.bindings import NatsClient, NatsRouter
from .subscribers.event_writer import EventWriter
from .tracing import TracerProvider, request_tracing

_LOGGER = logging.getLogger("interaction_worker.mcp")

TOOL_NODE = "INTERACTION.ACT.TOOL"
OBSERVE_NODE = "INTERACTION.OBSERVE"
MCP_NODE = "INTERACTION.ACT.MCP"
OUTPUT_NODE = "INTERACTION.OUTPUT"


def _serve(names: object, commands: bool) -> tuple[ServeName, ...]:
    """The serve names in their documented order (docs/configuration.md, `serve`)."""
    if names is None:
        return SERVE_NAMES
    problem = serve_problem(names)
    if problem is not None:
        raise ConfigurationError(f"Worker serve {problem}")
    assert isinstance(names, Iterable)
    given = set(names)
    if not commands and given == {"command"}:
        raise ConfigurationError(
            "serve names only command, which is served only with a command protocol "
            "(commands=, Interaction.bind)"
        )
    return tuple(name for name in SERVE_NAMES if name in given)


def _body(value: object) -> object:
    return value.to_wire() if isinstance(value, WireModel) else value


class HandlerKeywords(TypedDict, total=False):
    """`message_handler`'s settings: those of `BindingOptions` a handler takes."""

    prefix: str
    reply_prefixes: tuple[str, ...]
    account_inboxes: bool
    max_payload: int
    tool_timeout: float | None
    tracing: Tracing | None


class OptionKeywords(TypedDict, total=False):
    """A binding's settings as keywords: `BindingOptions`' fields."""

    prefix: str
    queue: str | None
    reply_prefixes: tuple[str, ...]
    account_inboxes: bool
    tool_timeout: float | None
    max_pending: int
    max_payload: int
    idempotency: IdempotencySettings | None
    tracing: Tracing | None
    ledger_store: KeyValueStore | None
    events: EventWriter | None


class BindingKeywords(OptionKeywords, total=False):
    """`OptionKeywords`, and an OpenTelemetry TracerProvider for `tracing`."""

    tracer_provider: TracerProvider | None


class InteractionWorker:
    """The INTERACTION worker without a transport.

    Args:
        tools: tools to register, or a `ToolRegistry` kept by identity (later register/unregister
            calls are seen).
        mcp: MCP clients by server name, or an `McpRegistry` kept by identity.
        output: the sink that receives deliveries; without one, OUTPUT answers NOT_FOUND.
        sandbox: the permission policy; without one nothing is granted, as the seed's factory (but
            command ids, which the dispatcher already limits).
        concurrency: the most executions in flight (None: no limit).
        commands: a dispatcher of the command protocol (`Interaction.bind`, docs/commands.md):
            with one, the worker also serves `P.command` and `P.command.catalog`.
        serve: the kinds this worker serves (docs/configuration.md, `serve`), among tool, mcp,
            observe, output, list and command (this one only with `commands`); None: all of them.

    Raises:
        ConfigurationError: a value breaks its rule; `serve` names an unknown kind, one twice,
            none, or only `command` without `commands`.
    """

    def __init__(
        self,
        *,
        tools: Sequence[RegisteredTool] | ToolRegistry | None = None,
        mcp: Mapping[str, McpClient] | McpRegistry | None = None,
        output: OutputSink | None = None,
        sandbox: Sandbox | None = None,
        concurrency: int | None = None,
        commands: CommandDispatcher | None = None,
        serve: Sequence[ServeName] | None = None,
    ) -> None:
        if concurrency is not None and (
            isinstance(concurrency, bool)
            or not isinstance(concurrency, int)
            or not 1 <= concurrency <= 2**53 - 1  # the reference's Number.isSafeInteger
        ):
            raise ConfigurationError("Worker concurrency must be a positive integer")
        self.tools = (
            tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools or ())
        )
        if isinstance(mcp, McpRegistry) or mcp is None:
            self.mcp = mcp
        else:
            self.mcp = McpRegistry()
            for server, client in mcp.items():
                self.mcp.register(server, client)
        if output is not None:
            check_sink(output)
        self.output = output
        self.sandbox = sandbox if sandbox is not None else Sandbox()
        self.sandbox_given = sandbox is not None
        self.concurrency = concurrency
        if commands is not None and not isinstance(commands, CommandDispatcher):
            raise ConfigurationError(
                "Worker commands must be a CommandDispatcher (Interaction.bind)"
            )
        self.commands = commands
        self.serve_given = serve is not None
        self.serve = _serve(serve, commands is not None)

    @property
    def capabilities(self) -> list[str]:
        """The seed's nodes this worker implements: those it has and serves (`serve`)."""
        has = {
            TOOL_NODE: "tool",
            OBSERVE_NODE: "observe",
            MCP_NODE: "mcp" if self.mcp is not None else None,
            OUTPUT_NODE: "output" if self.output is not None else None,
        }
        return [node for node, kind in has.items() if kind in self.serve]

    async def call_tool(
        self,
        request: object,
        *,
        context: ToolContext | None = None,
        trusted_json: bool = False,
    ) -> ExternalResult:
        """INTERACTION.ACT.TOOL: `{"call": ToolCall}` → ExternalResult."""
        body = _body(request)
        call: Any = body.get("call") if isinstance(body, dict) else None
        return await self.tools.call(
            call, self.sandbox, context=context, trusted_json=trusted_json
        )

    def call_tool_document(
        self,
        request: object,
        *,
        context: ToolContext | None = None,
        trusted_json: bool = False,
    ) -> Coroutine[Any, Any, dict[str, Any]]:
        """`call_tool`, with the result as the wire document its model would serialise to: what the
        bus publishes, without building the model. The registry's call itself, to await: the bus
        pays for no coroutine of the worker's."""
        call: Any
        # The bus's body is a dict: a model's class check (an ABC's) is asked only of the rest.
        if type(request) is dict:
            call = request.get("call")
        else:
            body = _body(request)
            call = body.get("call") if isinstance(body, dict) else None
        return self.tools.call_document(call, self.sandbox, context, trusted_json)

    def bounds_own_time(self, name: str) -> bool:
        """Whether the tool `name` ends its calls in time by itself, so `tool_timeout` is not armed."""
        return self.tools.bounds_own_time(name)

    def rerunnable(self, name: str) -> bool:
        """Whether the tool `name` may run again after a crash cut its call (declared idempotent, or
        read-only: wire.md 8); False for an unknown name."""
        tool = self.tools.get(name)
        return tool is not None and is_rerunnable(tool)

    def list_tools(self, request: object) -> ToolList:
        """`P.tool.list`: `{}` → the tools served and granted; `{"name"}` → that one tool."""
        try:
            query = check.tool_list_request(_body(request))
        except ContractError as error:
            raise InvalidInput(error.message) from None
        if query.name is None:
            return ToolList.trusted(tools=self.tools.list(self.sandbox))
        return ToolList.trusted(tools=[self.tools.describe(query.name, self.sandbox)])

    async def call_mcp(self, request: object) -> McpDiscoverOutput | McpInvokeOutput:
        """INTERACTION.ACT.MCP: discover | invoke."""
        if self.mcp is None:
            raise NotFound(f"No available Worker implements {MCP_NODE}")
        return await self.mcp.execute(_body(request), self.sandbox)

    def observe(self, request: object) -> Observation:
        """INTERACTION.OBSERVE: `{"result": ExternalResult}` → Observation."""
        return observe_request(_body(request))

    async def deliver(
        self, request: object, *, context: DeliveryContext | None = None
    ) -> OutputReceipt:
        """INTERACTION.OUTPUT: `{"deliveryId", "message", "artifacts"?}` → OutputReceipt."""
        if self.output is None:
            raise NotFound(f"No available Worker implements {OUTPUT_NODE}")
        return await deliver_output(_body(request), self.output, context)

    async def astart(self, client: NatsClient) -> None:
        """Start what the worker holds that has `async start(client)`: first the sink, which gets
        the worker's connection to publish on the bus, then the MCP clients, which connect to their
        servers all at once, so that servers slow to connect (or to fail) cost the start the
        longest of their bounds rather than their sum.

        Raises:
            what a resource that cannot start raised. When MCP clients fail, the others, once
            started, are closed before the start fails, and every failure is named: one failure is
            raised as it is; several `McpClientError`s become one McpUnavailable whose message is
            theirs joined with "; ", in the order the servers were registered.
        """
        await start_resources(self.output, self.mcp, client)

    async def aclose(self) -> None:
        """Close what the worker holds that has a close: sinks, then MCP clients."""
        await close_resources(self.output, self.mcp)

    def message_handler(
        self,
        *,
        ledger: Ledger | None = None,
        durable: bool = False,
        **keywords: Unpack[HandlerKeywords],
    ) -> MessageHandler:
        """The transport-neutral handling of this worker's messages (both bindings use it); with
        `tracing`, its traced subclass (docs/tracing.md); `durable`, a durable binding's."""
        return bindings.message_handler(
            self,
            BindingOptions(**keywords),
            ledger=ledger,
            durable=durable,
            serve=self.serve,
        )

    def nats_binding(
        self,
        client: NatsClient,
        options: BindingOptions | None = None,
        **keywords: Unpack[BindingKeywords],
    ) -> NatsBinding:
        """The standalone serving path on a connected nats-py client; `start()` it to serve.

        Its settings are `options`, with `keywords` (the names of `BindingOptions`' fields) over them.
        With `idempotency` enabled, calls and deliveries run under the ledger (wire.md 8), in the
        JetStream bucket it names, which `start()` creates or binds (or in `ledger_store`). With
        `tracer_provider` (an OpenTelemetry TracerProvider; the `otel` extra), every request is
        traced (docs/tracing.md)."""
        return bindings.nats_binding(
            self,
            client,
            _options(options, keywords),
            concurrency=self.concurrency,
            serve=self.serve,
        )

    def durable_binding(
        self,
        client: NatsClient,
        options: BindingOptions | None = None,
        *,
        durable: DurableSettings,
        **keywords: Unpack[BindingKeywords],
    ) -> DurableBinding:
        """Durable mode (wire.md 7) on a connected nats-py client: calls from JetStream pull
        consumers; `start()` creates or checks the streams and consumers, then serves.

        The ledger is on unless `idempotency.enabled` is False; in durable mode a call whose id is
        claimed by a running attempt comes back later instead of waiting. With `tracer_provider`,
        every request is traced (docs/tracing.md)."""
        return bindings.durable_binding(
            self,
            client,
            durable,
            _options(options, keywords),
            concurrency=self.concurrency,
            serve=self.serve,
        )

    def router(
        self,
        options: BindingOptions | None = None,
        **keywords: Unpack[BindingKeywords],
    ) -> NatsRouter:
        """A FastStream router serving the same subjects, to include in your own broker.

        With `idempotency` enabled, calls and deliveries run under the ledger (wire.md 8), in the
        JetStream bucket it names, created or bound on the broker's connection at first use."""
        return bindings.router(
            self,
            _options(options, keywords),
            concurrency=self.concurrency,
            serve=self.serve,
        )


def _options(
    options: BindingOptions | None, keywords: BindingKeywords
) -> BindingOptions:
    """`options` (or the defaults) with `keywords` over them; a tracer provider becomes its spans."""
    provider = keywords.pop("tracer_provider", None)
    chosen = replace(options or BindingOptions(), **_fields(keywords))
    if provider is None:
        return chosen
    return replace(chosen, tracing=request_tracing(provider))


def _fields(keywords: OptionKeywords) -> OptionKeywords:
    return keywords
