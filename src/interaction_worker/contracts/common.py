"""The shared payloads: JSON values, references, messages, tool calls, results and observations."""

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, JsonValue

from ._base import WireModel

JsonObject = dict[str, JsonValue]
MessageRole = Literal["system", "user", "assistant", "tool"]
ResultStatus = Literal["success", "failed", "cancelled", "timeout", "unknown"]
ToolEffect = Literal["read", "write", "execute", "network"]

MESSAGE_ROLES: frozenset[str] = frozenset(("system", "user", "assistant", "tool"))
RESULT_STATUSES: frozenset[str] = frozenset(
    ("success", "failed", "cancelled", "timeout", "unknown")
)


class Reference(WireModel):
    """A pointer to content held elsewhere. Extra keys are kept, as the reference keeps them."""

    model_config = ConfigDict(extra="allow")

    uri: str
    media_type: str | None = None
    digest: str | None = None


class TextPart(WireModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["text"] = "text"
    text: str


class JsonPart(WireModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["json"] = "json"
    data: JsonValue


class ReferencePart(WireModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["reference"] = "reference"
    reference: Reference


MessagePart = Annotated[
    TextPart | JsonPart | ReferencePart, Field(discriminator="type")
]


class Message(WireModel):
    """A chat message. `content` is a string, any JSON value, or a list of parts (not checked for shape,
    only for JSON-ness, as the reference). Extra keys are kept."""

    model_config = ConfigDict(extra="allow")

    role: MessageRole
    name: str | None = None
    content: JsonValue


class InteractionError(WireModel):
    """A safe, structured error. Validation projects it: every key but these three is dropped."""

    code: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    message: str = Field(min_length=1)
    retryable: bool | None = None


class ToolCall(WireModel):
    """One call of a tool. Unknown keys are dropped."""

    id: str = Field(min_length=1, max_length=256)
    name: str = Field(min_length=1)
    arguments: JsonObject


class ToolDefinition(WireModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    input_schema: JsonObject
    effects: list[ToolEffect] | None = None
    requires_approval: bool | None = None


class ToolReturn(WireModel):
    """What a tool's `execute` returns: an ExternalResult without `callId` and `source`."""

    status: ResultStatus
    content: JsonValue = None
    structured_content: JsonValue = None
    references: list[Reference] | None = None
    error: InteractionError | None = None
    metadata: JsonValue = None


class ExternalResult(WireModel):
    """The outcome of a tool call or an MCP invoke.

    Unknown top-level keys are dropped (the reference passes them through unchecked; we publish only
    what the contract names). `metadata` need only be JSON, as in the reference.
    """

    call_id: str = Field(min_length=1, max_length=256)
    source: str = Field(min_length=1)
    status: ResultStatus
    content: JsonValue = None
    structured_content: JsonValue = None
    references: list[Reference] | None = None
    error: InteractionError | None = None
    metadata: JsonValue = None


class Observation(WireModel):
    """An ExternalResult shaped into a tool message for the agent's context (no `content` key)."""

    call_id: str
    source: str
    status: ResultStatus
    message: Message
    structured_content: JsonValue = None
    references: list[Reference] | None = None
    error: InteractionError | None = None
    metadata: JsonValue = None
