"""The tools the gateway offers (docs/gateway.md, "Tools"): what `P.tool.list` answers, limited by
`--tool`, and with `--mcp SERVER` the capabilities of that MCP server behind the fleet (`P.mcp.call`
discover), named `SERVER__TOOL`.

The list is read again at most every 5 seconds, whoever asks; a source that does not answer (no
worker, a server down) keeps the tools it had, so a host's list does not flap while a fleet restarts.
When a read finds a list different from the last one, `on_change` is awaited: the sessions hear
`notifications/tools/list_changed`.
"""

import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types

from ..client import InteractionClient, InteractionRequestError, NoWorkerError
from ..contracts import McpCapability, ToolDefinition
from .link import BusLink, BusUnreachable

_LOGGER = logging.getLogger("interaction_worker.gateway")

CACHE_SECONDS = 5.0
# A host waits for `tools/list`: a source that does not answer in this time keeps its last tools.
READ_SECONDS = 10.0
SEPARATOR = "__"
MAX_NAME = 64
# The MCP tool name's characters; the fleet's own names (letters, digits, _ and -) always fit.
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_WORKER = ""  # the key of the fleet's own tools among the sources


@dataclass(frozen=True)
class Route:
    """Where a tool of the gateway goes: a tool of the fleet, or `tool` of the MCP server `server`."""

    tool: str
    server: str | None = None


@dataclass(frozen=True)
class Listing:
    """One read of the tools: as MCP `Tool`s in order, and each name's route."""

    tools: tuple[types.Tool, ...] = ()
    routes: Mapping[str, Route] = field(default_factory=dict)
    fingerprint: str = ""

    def input_schema(self, name: str) -> dict[str, Any] | None:
        for tool in self.tools:
            if tool.name == name:
                return tool.input_schema
        return None


Source = list[ToolDefinition] | list[McpCapability]


class ToolCatalog:
    """The gateway's tools, read through `link`.

    Args:
        link: the bus.
        tools: the fleet's tools to offer (`--tool`); empty: all of them.
        servers: the MCP servers behind the fleet whose capabilities are offered too (`--mcp`).
        on_change: awaited when a read finds a list different from the one before.
        ttl: seconds a read is reused.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        link: BusLink,
        *,
        tools: Collection[str] = (),
        servers: Sequence[str] = (),
        on_change: Callable[[], Awaitable[None]] | None = None,
        ttl: float = CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.link = link
        self.only = frozenset(tools) or None
        self.servers = tuple(dict.fromkeys(servers))
        self.on_change = on_change
        self.ttl = ttl
        self.clock = clock
        self.current = Listing()
        self._sources: dict[str, Source] = {}
        self._read_at: float | None = None
        self._reads = 0
        self._lock = anyio.Lock()

    async def listing(self, *, fresh: bool = False) -> Listing:
        """The tools, read again when the last read is older than `ttl`; with `fresh`, read again
        unless another read ended while this call waited for it."""
        if not fresh and self._recent():
            return self.current
        reads = self._reads
        async with self._lock:
            if (self._reads != reads) if fresh else self._recent():
                return self.current
            await self._read()
            return self.current

    def _recent(self) -> bool:
        return self._read_at is not None and self.clock() - self._read_at < self.ttl

    async def _read(self) -> None:
        try:
            client = await self.link.client()
        except BusUnreachable:
            client = None
        sources = {_WORKER: await self._source(client, None)}
        for server in self.servers:
            sources[server] = await self._source(client, server)
        self._sources = sources
        listing, warnings = build_listing(sources, self.servers, self.only)
        first = self._read_at is None
        self._read_at = self.clock()
        self._reads += 1
        previous, self.current = self.current, listing
        if listing.fingerprint != previous.fingerprint or first:
            for warning in warnings:
                _LOGGER.warning("%s", warning)
        if not first and listing.fingerprint != previous.fingerprint:
            if self.on_change is not None:
                await self.on_change()

    async def _source(
        self, client: InteractionClient | None, server: str | None
    ) -> Source:
        key = _WORKER if server is None else server
        what = "the fleet's tools" if server is None else f"MCP server {server}"
        kept = self._sources.get(key, [])
        if client is None:
            return kept
        try:
            with anyio.fail_after(READ_SECONDS):
                if server is None:
                    return await client.list_tools()
                return (await client.mcp_discover(server)).capabilities
        except NoWorkerError:
            reason = "no worker serves the prefix"
        except InteractionRequestError as error:
            reason = f"{error.code}: {error.message}"
        except TimeoutError:
            reason = "no answer in time"
        except ValueError:
            reason = "the answer could not be read"
        _LOGGER.warning("cannot list %s (%s); keeping the last list", what, reason)
        return kept


def build_listing(
    sources: Mapping[str, Source],
    servers: Sequence[str],
    only: frozenset[str] | None,
) -> tuple[Listing, list[str]]:
    """The listing of `sources` (the fleet's tools under "", each server's capabilities under its
    name), and a warning for each tool left out."""
    tools: list[types.Tool] = []
    routes: dict[str, Route] = {}
    warnings: list[str] = []
    fleet = [d for d in sources.get(_WORKER, []) if isinstance(d, ToolDefinition)]
    for definition in fleet:
        if only is not None and definition.name not in only:
            continue
        if not _object_schema(definition.input_schema):
            warnings.append(
                f"tool {definition.name} left out: its inputSchema is not an object schema"
            )
            continue
        tools.append(
            types.Tool(
                name=definition.name,
                description=definition.description,
                input_schema=definition.input_schema,
            )
        )
        routes[definition.name] = Route(definition.name)
    for name in sorted((only or set()) - {d.name for d in fleet}):
        warnings.append(f"--tool {name}: no worker offers it")
    named: dict[str, list[McpCapability]] = {}
    for server in servers:
        for capability in sources.get(server, []):
            if isinstance(capability, McpCapability):
                named.setdefault(f"{server}{SEPARATOR}{capability.name}", []).append(
                    capability.model_copy(update={"server": server})
                )
    for name, capabilities in named.items():
        capability = capabilities[0]
        problem = _name_problem(name, clashes=len(capabilities) > 1 or name in routes)
        if problem is None and not _object_schema(capability.input_schema):
            problem = "its inputSchema is not an object schema"
        if problem is not None:
            warnings.append(f"tool {_shown(name)} left out: {problem}")
            continue
        output_schema = capability.output_schema
        if output_schema is not None and not _object_schema(output_schema):
            warnings.append(
                f"tool {name}: its outputSchema is left out, it is not an object schema"
            )
            output_schema = None
        tools.append(
            types.Tool(
                name=name,
                description=capability.description,
                input_schema=capability.input_schema,
                output_schema=output_schema,
            )
        )
        routes[name] = Route(capability.name, capability.server)
    return Listing(tuple(tools), routes, _fingerprint(tools)), warnings


def _name_problem(name: str, *, clashes: bool) -> str | None:
    if len(name) > MAX_NAME:
        return f"the name is longer than {MAX_NAME} characters"
    if not _NAME.fullmatch(name):
        return "a tool name has only letters, digits, '_', '-' and '.'"
    if clashes:
        return "the name clashes with another tool"
    return None


def _shown(name: str) -> str:
    """A name for a log line: bounded, and printable."""
    text = name if len(name) <= 2 * MAX_NAME else name[: 2 * MAX_NAME] + "…"
    return json.dumps(text, ensure_ascii=True)[1:-1]


def _object_schema(schema: Mapping[str, Any]) -> bool:
    # Hosts of the 2025 protocol refuse a whole list holding one tool whose schema is not an
    # object's: such a tool is left out instead.
    return schema.get("type") == "object"


def _fingerprint(tools: Sequence[types.Tool]) -> str:
    return json.dumps(
        [
            tool.model_dump(mode="json", by_alias=True, exclude_none=True)
            for tool in tools
        ],
        sort_keys=True,
        ensure_ascii=True,
    )
