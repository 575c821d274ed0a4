"""The wire table (docs/wire.md 2-5): each request kind once, and the header names.

A row says everything the wire says of one kind: its request subject, the events it publishes, the
token of its dead letters, where its id is read and which body field and header carry it, whether
durable mode consumes it from the calls stream, and its request and reply models. The bindings,
the families, the recording and its replays, the console, the durable streams, discovery, metrics,
tracing, the CLI and the generated documents read it; a new kind is a row here first
(docs/architecture.md, "Where a change goes").
"""

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, Protocol

from .bus import (
    CommandCatalogReply,
    CommandCatalogRequest,
    CommandReply,
    CommandRequest,
    ErrorReply,
    ObserveRequest,
    ToolCallRequest,
    ToolList,
    ToolListRequest,
)
from .common import ExternalResult, Observation
from .keys import header_any_case, valid_id
from .mcp import McpDiscoverInput, McpDiscoverOutput, McpInvokeInput, McpInvokeOutput
from .output import OutputReceipt, OutputRequest

DEAD = "dead"  # the first token of every dead letter's subject, `P.dead.KIND.K`

Kind = Literal["tool", "mcp", "observe", "output", "list", "command", "catalog"]

# The header names of the wire (docs/wire.md 3).
CONTENT_TYPE_HEADER = "Content-Type"
KEY_HEADER = "Interaction-Key"
STATUS_HEADER = "Interaction-Status"
ERROR_CODE_HEADER = "Interaction-Error-Code"
CALL_ID_HEADER = "Interaction-Call-Id"
DELIVERY_ID_HEADER = "Interaction-Delivery-Id"
COMMAND_ID_HEADER = "Interaction-Command-Id"
REPLY_TO_HEADER = "Interaction-Reply-To"
MSG_ID_HEADER = "Nats-Msg-Id"
SERVICE_ERROR_HEADER = "Nats-Service-Error"
# Stamped by the server on a request that crossed an account's service import (core NATS only:
# JetStream strips it before storing), naming the requester's account.
REQUEST_INFO_HEADER = "Nats-Request-Info"
# The headers that carry a request's own id, whatever its kind.
ID_HEADERS = (CALL_ID_HEADER, DELIVERY_ID_HEADER, COMMAND_ID_HEADER)


class Carrier(Protocol):
    """What an id reader needs of a message beside its body: its headers (a received message, or a
    recorded one)."""

    @property
    def headers(self) -> Mapping[str, str] | None: ...


IdReader = Callable[[dict[str, Any], Carrier], str | None]


@dataclass(frozen=True, slots=True)
class IdNames:
    """Where a dead letter (and an event) carries its message's id: a body field and a header."""

    field: str
    header: str


CALL_ID = IdNames("callId", CALL_ID_HEADER)
DELIVERY_ID = IdNames("deliveryId", DELIVERY_ID_HEADER)
COMMAND_ID = IdNames("commandId", COMMAND_ID_HEADER)


@dataclass(frozen=True, slots=True)
class Event:
    """An event a kind publishes, on `P.<name>.K` (`P.command.done.<command id>.K` for commands)."""

    name: str
    model: type[Any]
    description: str
    # The event that ends the request: the one a replay holds its reply to.
    outcome: bool = False
    # The tokens after the name: K, or the command's id then K.
    tail: str = "{key}"


@dataclass(frozen=True, slots=True)
class WireKind:
    """One request kind as the wire describes it.

    Attributes:
        request: its subject after the prefix (`tool.call`).
        read_id: the id that keys its subjects, read from the body (or headers) before validation;
            one call, on the hot path.
        ids: the body field and header of its id in its dead letters and events; None when its id is
            no call's, delivery's or command's.
        dead: the KIND token of its dead letters (`P.dead.KIND.K`).
        durable: consumed from the calls stream in durable mode (else served by a core subscription
            beside it, a question with nothing to lose).
        command_protocol: served only by a worker given a command dispatcher (docs/commands.md).
        served_with: the kind whose `serve:` name covers this one too; None when it has its own.
        replayed: sent again by a requests replay (docs/replay.md).
    """

    kind: Kind
    request: str
    request_model: Any
    reply_model: Any
    description: str
    read_id: IdReader
    ids: IdNames | None
    dead: str
    durable: bool
    events: tuple[Event, ...] = ()
    command_protocol: bool = False
    replayed: bool = True
    served_with: Kind | None = None

    @property
    def outcome(self) -> Event | None:
        """The event that ends the request, when it publishes one."""
        return next((event for event in self.events if event.outcome), None)


def _call_id(body: dict[str, Any], msg: Carrier) -> str | None:
    call = body.get("call")
    return valid_id(call.get("id")) if isinstance(call, dict) else None


def _mcp_id(body: dict[str, Any], msg: Carrier) -> str | None:
    # A discover of one server is keyed by the server name, which is not a call id.
    if body.get("operation") == "discover":
        return valid_id(body.get("server"))
    call = body.get("call")
    return valid_id(call.get("id")) if isinstance(call, dict) else None


def _observed_call_id(body: dict[str, Any], msg: Carrier) -> str | None:
    result = body.get("result")
    return valid_id(result.get("callId")) if isinstance(result, dict) else None


def _delivery_id(body: dict[str, Any], msg: Carrier) -> str | None:
    return valid_id(body.get("deliveryId"))


def _tool_name(body: dict[str, Any], msg: Carrier) -> str | None:
    return valid_id(body.get("name"))


def command_id_header(msg: Carrier) -> str | None:
    """The request's `Interaction-Command-Id` as sent (in any case), valid or not."""
    headers = msg.headers
    if not headers:
        return None
    raw = headers.get(COMMAND_ID_HEADER)
    return header_any_case(headers, COMMAND_ID_HEADER) if raw is None else raw


def _command_id(body: dict[str, Any], msg: Carrier) -> str | None:
    return valid_id(command_id_header(msg))


def _no_id(body: dict[str, Any], msg: Carrier) -> str | None:
    return None


def is_discover(body: object) -> bool:
    """An MCP request that asks for a server's capabilities: keyed by the server, no call."""
    return isinstance(body, dict) and body.get("operation") == "discover"


_OBSERVATION = "The observation of that result"

_ROWS = (
    WireKind(
        kind="tool",
        request="tool.call",
        request_model=ToolCallRequest,
        reply_model=ExternalResult | ErrorReply,
        description="Run one tool call. Reply: ExternalResult, or an error reply.",
        read_id=_call_id,
        ids=CALL_ID,
        dead="tool",
        durable=True,
        events=(
            Event("tool.result", ExternalResult, "The result of call K", outcome=True),
            Event("tool.observation", Observation, _OBSERVATION),
        ),
    ),
    WireKind(
        kind="mcp",
        request="mcp.call",
        request_model=McpDiscoverInput | McpInvokeInput,
        reply_model=McpDiscoverOutput | McpInvokeOutput,
        description="MCP discover or invoke (`operation`).",
        read_id=_mcp_id,
        ids=CALL_ID,
        dead="mcp",
        durable=True,
        events=(
            Event(
                "mcp.result",
                ExternalResult,
                "The result of MCP invoke K (source server:tool)",
                outcome=True,
            ),
            Event("mcp.observation", Observation, _OBSERVATION),
        ),
    ),
    WireKind(
        kind="observe",
        request="observe",
        request_model=ObserveRequest,
        reply_model=Observation,
        description="Shape an ExternalResult into an Observation. No events.",
        read_id=_observed_call_id,
        ids=CALL_ID,
        dead="observe",
        durable=False,
    ),
    WireKind(
        kind="output",
        request="output.deliver",
        request_model=OutputRequest,
        reply_model=OutputReceipt,
        description="Deliver one message to the sinks. Reply: OutputReceipt.",
        read_id=_delivery_id,
        ids=DELIVERY_ID,
        dead="output",
        durable=True,
        events=(
            Event(
                "output.receipt",
                OutputReceipt,
                "The receipt of delivery K",
                outcome=True,
            ),
        ),
    ),
    WireKind(
        kind="list",
        request="tool.list",
        request_model=ToolListRequest,
        reply_model=ToolList | ErrorReply,
        description=(
            "The tools this worker serves and its sandbox grants (`{}`), or one of them "
            '(`{"name"}`). No events.'
        ),
        read_id=_tool_name,
        ids=None,  # the name keys the subjects, but a tool list is no call
        dead="list",
        durable=False,
        replayed=False,
    ),
    WireKind(
        kind="command",
        request="command",
        request_model=CommandRequest,
        reply_model=CommandReply | ErrorReply,
        description=(
            "One command of the command protocol served by a worker given a dispatcher in code "
            "(docs/commands.md). Header Interaction-Command-Id: its id (K). Reply: CommandReply, "
            "or an error reply (a rejected command: INVALID_INPUT with `reason` and `path`)."
        ),
        read_id=_command_id,
        ids=COMMAND_ID,
        dead="command",
        durable=True,
        events=(
            Event(
                "command.done",
                CommandReply,
                "The reply of dispatched command K (its Interaction-Command-Id, or an id the "
                "worker made up)",
                outcome=True,
                tail="{command}.{key}",
            ),
        ),
        command_protocol=True,
    ),
    WireKind(
        kind="catalog",
        request="command.catalog",
        request_model=CommandCatalogRequest,
        reply_model=CommandCatalogReply | ErrorReply,
        description=(
            "The commands served and granted, and the JSON Schema to give a model. No events."
        ),
        read_id=_no_id,
        ids=None,
        # The catalog's refusals are the command family's (docs/wire.md 5 names the kinds).
        dead="command",
        durable=False,
        command_protocol=True,
        replayed=False,
        served_with="command",
    ),
)

WIRE: Mapping[Kind, WireKind] = MappingProxyType({row.kind: row for row in _ROWS})
KINDS: tuple[Kind, ...] = tuple(WIRE)
COMMAND_KINDS: tuple[Kind, ...] = tuple(
    k for k, row in WIRE.items() if row.command_protocol
)
DURABLE_KINDS: tuple[Kind, ...] = tuple(k for k, row in WIRE.items() if row.durable)
CORE_KINDS: tuple[Kind, ...] = tuple(k for k, row in WIRE.items() if not row.durable)
EVENTS: tuple[Event, ...] = tuple(event for row in _ROWS for event in row.events)
# The first token of each event's name (`tool` of `tool.result`), then the dead letters': what a
# recording's `--only` and the console call a family.
EVENT_FAMILIES: tuple[str, ...] = (
    *dict.fromkeys(event.name.split(".", 1)[0] for event in EVENTS),
    DEAD,
)


@dataclass(frozen=True, slots=True)
class Subjects:
    """Every subject of one prefix."""

    prefix: str = "interaction"

    def request(self, kind: Kind) -> str:
        return f"{self.prefix}.{WIRE[kind].request}"

    def dead(self, kind: Kind, key: str) -> str:
        return f"{self.prefix}.{DEAD}.{WIRE[kind].dead}.{key}"

    def command_done(self, command_id: str, key: str) -> str:
        return f"{self.prefix}.command.done.{command_id}.{key}"

    def event_family(self, name: str) -> str:
        """`tool.result` → `interaction.tool.result`; the family part of an event's Nats-Msg-Id."""
        return f"{self.prefix}.{name}"

    def all_requests(self) -> dict[Kind, str]:
        return {kind: self.request(kind) for kind in KINDS}

    def events(self) -> tuple[str, ...]:
        """The wildcard subject of each event, then the dead letters'."""
        return (
            *(f"{self.prefix}.{event.name}.>" for event in EVENTS),
            f"{self.prefix}.{DEAD}.>",
        )


_SUBJECT = re.compile(r"[^\s*>.]+(?:\.[^\s*>.]+)*")


def is_publishable_subject(subject: str, prefixes: tuple[str, ...]) -> bool:
    """A literal subject (no wildcards, no empty token) under one of `prefixes`."""
    return (
        len(subject) <= 512
        and subject.isprintable()
        and _SUBJECT.fullmatch(subject) is not None
        and any(subject.startswith(prefix) for prefix in prefixes)
    )
