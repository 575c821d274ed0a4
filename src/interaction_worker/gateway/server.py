"""The gateway as an MCP server (docs/gateway.md): the SDK's low-level `Server`, whose `tools/list`
is the catalog and whose `tools/call` is one call over the bus.

A call waits for its outcome up to `timeout` seconds. When the host sent a progress token, it hears
a progress notification at once and then every 2 seconds (the seconds waited: the bus carries no
progress of the tool's own). A host's `notifications/cancelled` ends the wait; the call runs on,
since the bus has no remote cancellation.
"""

import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server import CacheHint, NotificationOptions, Server, ServerRequestContext
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import ListenHandler, ServerEvent, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..client import InteractionRequestError, NoWorkerError, ToolOutcome
from ..contracts import MAX_ID_LENGTH
from ..subscribers.discovery import package_version
from .catalog import CACHE_SECONDS, Route, ToolCatalog
from .link import BusLink, BusUnreachable
from .outcome import CALL_ID, call_result, tool_error
from .watch import POLL_SECONDS, ToolWatch

_LOGGER = logging.getLogger("interaction_worker.gateway")

NAME = "interaction-worker"
DEFAULT_TIMEOUT = 75.0
PROGRESS_SECONDS = 2.0
CALL_ID_PREFIX = "mcp-"


@dataclass(frozen=True)
class GatewayOptions:
    """What `interaction-worker mcp-serve` offers and how long it waits.

    Attributes:
        tools: the fleet's tools to offer (`--tool`); empty: all.
        servers: MCP servers behind the fleet whose capabilities are offered too (`--mcp`).
        timeout: seconds a call may wait for its outcome (`--timeout`).
        poll_interval: seconds between reads of the tools while a session listens.
        cache_seconds: seconds a read of the tools is reused.
    """

    tools: tuple[str, ...] = ()
    servers: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    poll_interval: float = POLL_SECONDS
    cache_seconds: float = CACHE_SECONDS


class Gateway:
    """The fleet's tools as an MCP server, through `link`; `run_watch` must run beside it (for
    `tools/list_changed`), `server` serves each session."""

    def __init__(
        self, link: BusLink, options: GatewayOptions = GatewayOptions()
    ) -> None:
        self.link = link
        self.options = options
        self.catalog = ToolCatalog(
            link,
            tools=options.tools,
            servers=options.servers,
            on_change=self._changed,
            ttl=options.cache_seconds,
        )
        self.watch = ToolWatch(self._poll, interval=options.poll_interval)
        self.server: Server[Any] = _Server(
            NAME,
            version=package_version(),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=ListenHandler(self.watch),
            # The 2026 protocol's hosts may keep the list as long as the gateway does.
            cache_hints={
                "tools/list": CacheHint(ttl_ms=int(options.cache_seconds * 1000))
            },
            get_tool_input_schema=self._input_schema,
        )
        self.server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self._session
        )

    def initialization_options(self) -> InitializationOptions:
        """Capabilities: `tools` with `listChanged`, nothing else."""
        return self.server.create_initialization_options()

    async def run_watch(self) -> None:
        await self.watch.run()

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        return self.catalog.current.input_schema(name)

    # --- the handlers --------------------------------------------------------------------------

    async def _list_tools(
        self,
        ctx: ServerRequestContext[Any],
        params: types.PaginatedRequestParams | None,
    ) -> types.ListToolsResult:
        if params is not None and params.cursor is not None:
            # The list comes in one page: no cursor was handed out.
            raise MCPError(types.INVALID_PARAMS, "Invalid cursor")
        listing = await self.catalog.listing()
        return types.ListToolsResult(tools=list(listing.tools))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        meta = _meta(ctx.params)
        call_id = _call_id(meta)
        route = await self._route(params.name)
        arguments = dict(params.arguments or {})
        async with anyio.create_task_group() as group:
            if meta.get("progressToken") is not None:
                group.start_soon(_progress, ctx)
            answer = await self._answer(route, arguments, call_id)
            group.cancel_scope.cancel()
        if answer is None:
            # The tool went away between the list and the call.
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        if isinstance(answer, types.CallToolResult):
            return answer
        object_only = ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        return call_result(answer.result, object_only=object_only)

    async def _answer(
        self, route: Route, arguments: dict[str, Any], call_id: str
    ) -> ToolOutcome | types.CallToolResult | None:
        """The outcome, a tool error saying why there is none, or None for an unknown tool."""
        try:
            return await self._send(route, arguments, call_id)
        except InteractionRequestError as error:
            if error.code == "NOT_FOUND":
                return None
            return tool_error(call_id, error.code, error.message)
        except NoWorkerError:
            return tool_error(
                call_id, "NO_WORKER", "no worker serves the fleet's prefix"
            )
        except BusUnreachable as error:
            return tool_error(call_id, "UNAVAILABLE", str(error))
        except TimeoutError:
            wait = f"{self.options.timeout:g}"
            return tool_error(
                call_id,
                "TIMEOUT",
                f"no outcome within {wait} s; the call may still run",
                status="unknown",
            )
        except ValueError:
            return tool_error(
                call_id, "INVALID_RESULT", "the worker's answer could not be read"
            )

    async def _route(self, name: str) -> Route:
        """The route of a listed tool; a name not listed is looked up once more in a fresh list
        (a tool that just came), then refused as the MCP specification asks (-32602)."""
        route = (await self.catalog.listing()).routes.get(name)
        if route is None:
            route = (await self.catalog.listing(fresh=True)).routes.get(name)
        if route is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")
        return route

    async def _send(
        self, route: Route, arguments: dict[str, Any], call_id: str
    ) -> ToolOutcome:
        client = await self.link.client()
        with anyio.fail_after(self.options.timeout):
            if route.server is None:
                return await client.call_tool(route.tool, arguments, call_id=call_id)
            return await client.mcp_invoke(
                route.server, route.tool, arguments, call_id=call_id
            )

    async def _session(
        self, ctx: ServerRequestContext[Any], params: types.NotificationParams
    ) -> None:
        """A session of the 2025 protocol listens for changes from its `initialized` until it ends:
        the SDK cancels its handlers then."""
        send, receive = anyio.create_memory_object_stream[None](1)

        def heard(event: ServerEvent) -> None:
            if isinstance(event, ToolsListChanged):
                try:
                    send.send_nowait(None)
                except anyio.WouldBlock:
                    pass  # one notification already waits: it says the same

        unsubscribe = self.watch.subscribe(heard)
        try:
            async with receive:
                async for _ in receive:
                    await ctx.session.send_tool_list_changed()
        finally:
            unsubscribe()
            send.close()

    async def _changed(self) -> None:
        await self.watch.publish(ToolsListChanged())

    async def _poll(self) -> None:
        await self.catalog.listing(fresh=True)


class _Server(Server[Any]):
    """The SDK's server announcing `tools.listChanged` on every transport: the HTTP session manager
    asks the server for its initialization options instead of taking them."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


def _meta(params: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = (params or {}).get("_meta")
    return meta if isinstance(meta, Mapping) else {}


def _call_id(meta: Mapping[str, Any]) -> str:
    """The host's `_meta.interaction/callId` (so its retries are idempotent through the ledger),
    else a fresh `mcp-<uuid>`."""
    if CALL_ID not in meta:
        return f"{CALL_ID_PREFIX}{uuid.uuid4()}"
    given = meta[CALL_ID]
    if not isinstance(given, str) or not 1 <= len(given) <= MAX_ID_LENGTH:
        raise MCPError(
            types.INVALID_PARAMS,
            f"_meta.{CALL_ID} must be a string of 1 to {MAX_ID_LENGTH} characters",
        )
    return given


async def _progress(ctx: ServerRequestContext[Any]) -> None:
    started = time.monotonic()
    while True:
        elapsed = round(time.monotonic() - started, 1)
        try:
            await ctx.session.report_progress(
                elapsed, message=f"waiting for the fleet ({elapsed:g} s)"
            )
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return  # the host is gone; the call's own wait ends with its request
        await anyio.sleep(PROGRESS_SECONDS)
