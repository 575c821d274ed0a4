"""Bus envelopes: the request bodies, the error reply and the dead letter (wire.md sections 2, 4, 5)."""

from typing import Literal

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


class ErrorReply(WireModel):
    """The body of an error reply, in the NATS services convention (headers carry the same)."""

    error: ErrorBody


class DeadLetter(WireModel):
    """A refused message, kept on `P.dead.KIND.K` so that nothing is lost."""

    subject: str
    error: ErrorBody
    call_id: str | None = None
    delivery_id: str | None = None
    payload: str
    encoding: Literal["base64"] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    received_at: str
    attempts: int = 1
    truncated: bool | None = None
    size: int | None = None
    sha256: str | None = None
