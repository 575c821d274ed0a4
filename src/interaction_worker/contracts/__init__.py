"""The wire contract: pydantic models of every payload and the reference's validation rules.

This package imports only pydantic (and the standard library), so clients can use it on its own.
"""

from ._checks import (
    MAX_ID_LENGTH,
    ContractError,
    identifier,
    json_object,
    json_value,
    nonempty,
)
from ._safety import is_safe_message
from ._text import js_trim
from .bus import (
    DeadLetter,
    ErrorBody,
    ErrorReply,
    ObserveRequest,
    ToolCallRequest,
    ToolList,
    ToolListRequest,
)
from .common import (
    ExternalResult,
    InteractionError,
    JsonObject,
    JsonPart,
    Message,
    MessagePart,
    MessageRole,
    Observation,
    Reference,
    ReferencePart,
    ResultStatus,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolEffect,
    ToolOutcome,
)
from .mcp import (
    McpCapability,
    McpDiscoverInput,
    McpDiscoverOutput,
    McpInput,
    McpInvokeInput,
    McpInvokeOutput,
    McpOutput,
)
from .output import Artifact, OutputReceipt, OutputRequest, ReceiptStatus
from .strict_json import JsonRefused, parse_json, parse_json_object

__all__ = [
    "MAX_ID_LENGTH",
    "Artifact",
    "ContractError",
    "DeadLetter",
    "ErrorBody",
    "ErrorReply",
    "ExternalResult",
    "InteractionError",
    "JsonObject",
    "JsonPart",
    "JsonRefused",
    "McpCapability",
    "McpDiscoverInput",
    "McpDiscoverOutput",
    "McpInput",
    "McpInvokeInput",
    "McpInvokeOutput",
    "McpOutput",
    "Message",
    "MessagePart",
    "MessageRole",
    "Observation",
    "ObserveRequest",
    "OutputReceipt",
    "OutputRequest",
    "ReceiptStatus",
    "Reference",
    "ReferencePart",
    "ResultStatus",
    "TextPart",
    "ToolCall",
    "ToolCallRequest",
    "ToolDefinition",
    "ToolEffect",
    "ToolList",
    "ToolListRequest",
    "ToolOutcome",
    "identifier",
    "is_safe_message",
    "js_trim",
    "json_object",
    "json_value",
    "nonempty",
    "parse_json",
    "parse_json_object",
]
