"""Bus envelopes: the request bodies, the error reply and the dead letter (wire.md sections 2, 4, 5)."""

from typing import Any, Literal

from pydantic import Field

from ._base import WireModel
from .common import ExternalResult, ToolCall, ToolDefinition


class ToolCallRequest(WireModel):
    """The body of `P.tool.call`."""

    call: ToolCall


class ToolListRequest(WireModel):
    """The body of `P.tool.list`: every tool (`{}`), or the one named."""

    name: str | None = Field(default=None, min_length=1, max_length=64)


class ToolList(WireModel):
    """The reply of `P.tool.list`: the tools this worker serves and its sandbox grants."""

    tools: list[ToolDefinition]


class ObserveRequest(WireModel):
    """The body of `P.observe`."""

    result: ExternalResult


class ErrorBody(WireModel):
    code: str
    message: str
    # A rejected command's: the protocol's code (`UNKNOWN_FIELD`, ...) and a JSON Pointer.
    reason: str | None = None
    path: str | None = None


class ErrorReply(WireModel):
    """The body of an error reply, in the NATS services convention (headers carry the same)."""

    error: ErrorBody


class DeadLetter(WireModel):
    """A refused message, kept on `P.dead.KIND.K` so that nothing is lost."""

    subject: str
    error: ErrorBody
    call_id: str | None = None
    delivery_id: str | None = None
    command_id: str | None = None
    payload: str
    encoding: Literal["base64"] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    received_at: str
    attempts: int = 1
    truncated: bool | None = None
    size: int | None = None
    sha256: str | None = None


class CommandRequest(WireModel):
    """The body of `P.command`: a command object of the served protocol, validated by the
    protocol itself (its command field names the command; its other fields are the command's)."""

    model_config = {"extra": "allow"}


class CommandReply(WireModel):
    """The reply of `P.command`, and the body of its `P.command.done.ID.K` event."""

    id: str
    result: Any


class CommandCatalogRequest(WireModel):
    """The body of `P.command.catalog`: `{}`."""

    model_config = {"extra": "forbid"}


class CommandField(WireModel):
    """A field of a command: whether it is required, and the JSON Schema that describes it to a model
    (not enforced by the protocol)."""

    required: bool
    json_schema: dict[str, Any]


class CommandEntry(WireModel):
    id: str
    category: Literal["query", "action", "presentation", "input", "receipt"] | None = (
        None
    )
    description: str | None = None
    fields: dict[str, CommandField]


class CommandCatalogReply(WireModel):
    """The reply of `P.command.catalog`: the commands served (and granted), and the JSON Schema to
    give a model (docs/commands.md)."""

    command_field: str
    commands: list[CommandEntry]
    schema_for_model: dict[str, Any] | bool = Field(alias="modelJsonSchema")
