"""What an McpClient returns, read as the wire reads it: pages of tools, capabilities and results.

A client may answer with SDK models, dataclasses or plain mappings, in camelCase or snake_case; these
functions accept each, and anything else is a protocol error of the server (INVALID_RESULT).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ..contracts import (
    ContractError,
    ExternalResult,
    InteractionError,
    McpCapability,
    json_value,
    nonempty,
)
from ..contracts import validation as check
from ..errors import InvalidResult


@dataclass
class McpToolPage:
    """One page of `tools/list`: `next_cursor` None means no more pages ("" is an error)."""

    tools: list[Mapping[str, Any]] = field(default_factory=list)
    next_cursor: str | None = None


@dataclass
class McpToolResult:
    """The answer of `tools/call`, in our terms (an McpClient may also return a mapping)."""

    content: Any = None
    structured_content: Any = None
    references: list[Any] | None = None
    is_error: bool | None = None
    error: Any = None


_SNAKE_FIELDS = {"structured_content": "structuredContent", "is_error": "isError"}


def answer_fields(value: object) -> dict[str, Any] | None:
    """An McpClient's answer as wire-named fields; None when it is not an object.

    A mapping may use the wire's names or McpToolResult's (docs/configuration.md 2); the wire's win.
    Models inside the answer (an InteractionError, References) become their wire mappings.
    """
    if isinstance(value, McpToolResult):
        fields: dict[str, Any] = {}
        for key, attribute in (
            ("content", "content"),
            ("structuredContent", "structured_content"),
            ("references", "references"),
            ("isError", "is_error"),
            ("error", "error"),
        ):
            item = getattr(value, attribute)
            if item is not None:
                fields[key] = plain(item)
        return fields
    if isinstance(value, BaseModel):
        return dump(value)
    if isinstance(value, Mapping):
        fields = {key: plain(item) for key, item in value.items()}
        for snake, camel in _SNAKE_FIELDS.items():
            if snake in fields:
                fields.setdefault(camel, fields.pop(snake))
        return fields
    if isinstance(value, list):
        return {}
    return None


def plain(value: object) -> object:
    """A model, or a list's models, as wire mappings; one level only, so a cycle is left to the
    JSON check instead of recursing forever."""
    if isinstance(value, BaseModel):
        return dump(value)
    if isinstance(value, list) and any(isinstance(item, BaseModel) for item in value):
        return [dump(item) if isinstance(item, BaseModel) else item for item in value]
    return value


def dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


def tool_page(page: object) -> tuple[list[Any], bool, object]:
    if isinstance(page, McpToolPage):
        tools: object = page.tools
        has_cursor, cursor = page.next_cursor is not None, page.next_cursor
    elif isinstance(page, Mapping):
        tools = page.get("tools")
        key = "nextCursor" if "nextCursor" in page else "next_cursor"
        has_cursor, cursor = key in page, page.get(key)
    else:
        raise InvalidResult("Invalid MCP tool page")
    if not isinstance(tools, list):
        raise InvalidResult("Invalid MCP tool page")
    return tools, has_cursor, cursor


def capability(server: str, tool: object) -> McpCapability:
    fields: Mapping[str, Any] = tool if isinstance(tool, Mapping) else {}
    name = nonempty(fields.get("name"), "MCP tool name")
    input_schema = fields.get("inputSchema")
    if not isinstance(input_schema, dict):
        raise ContractError("Invalid MCP inputSchema")
    json_value(input_schema, "MCP inputSchema")
    built: dict[str, Any] = {
        "server": server,
        "name": name,
        "input_schema": input_schema,
    }
    # The reference copies `description` unchecked; only a string can be published as one.
    if isinstance(fields.get("description"), str):
        built["description"] = fields["description"]
    if "outputSchema" in fields:
        output_schema = fields["outputSchema"]
        if not isinstance(output_schema, dict):
            raise ContractError("Invalid MCP outputSchema")
        json_value(output_schema, "MCP outputSchema")
        built["output_schema"] = output_schema
    return McpCapability.trusted(**built)


def result_of(
    outcome: dict[str, Any],
    call_id: str,
    source: str,
    fallback: InteractionError | None,
) -> ExternalResult:
    try:
        return check.external_result(
            {**outcome, "callId": call_id, "source": source}, fallback
        )
    except ContractError as error:
        raise InvalidResult(error.message) from None
