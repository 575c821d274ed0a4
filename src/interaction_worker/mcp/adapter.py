"""The SDK's answers in our terms: a `tools/list` page as an McpToolPage, a `tools/call` result as an
McpToolResult, and the SDK's failures as the McpClient protocol's exceptions (docs/configuration.md 2).

Content mapping (each SDK content block becomes one message part, in order):

    text                        {"type": "text", "text": ...}
    image, audio                {"type": "reference", "reference": {"uri": "data:<mime>;base64,<data>",
                                 "mediaType": <mime>}}: the bytes travel with the result, as a data: URI
    resource_link               {"type": "reference", "reference": {"uri", "mediaType"?, "name", "title"?,
                                 "description"?, "size"?}}
    resource (embedded)         {"type": "reference", "reference": {"uri", "mediaType"?, "text"}} for a text
                                resource, {..., "blob": <base64>} for a binary one
    anything else               {"type": "json", "data": <the block as the wire has it>}

Annotations and `_meta` of a block are dropped. `structuredContent` is kept as the server sent it
(absent when the server sent none or null), `isError` is kept, and the result carries no `error`: the
registry gives an `isError` result MCP_TOOL_ERROR, so server text never becomes an error message.
`content` is always present (a list, maybe empty), as the SDK's result always has it.
"""

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import anyio
from mcp import Client, InputRequiredRoundsExceededError, MCPError, types
from pydantic import BaseModel, ValidationError

from ..errors import (
    InvalidResult,
    McpConnectionLost,
    McpProtocolError,
    McpTimeout,
    McpUnavailable,
)
from ..nodes import McpToolPage, McpToolResult


class SdkMcpClient:
    """Our McpClient over an entered SDK `Client` (stdio, streamable HTTP or in-process).

    Args:
        client: the SDK client, inside its `async with`; its `read_timeout_seconds` bounds `tools/list`.
        timeout: seconds a `tools/call` may take (None: the client's own read timeout).
        on_lost: called when a call finds the connection closed, so its owner can reconnect.
    """

    def __init__(
        self,
        client: Client,
        *,
        timeout: float | None = None,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.timeout = timeout
        self._on_lost = on_lost

    async def list_tools(self, cursor: str | None = None) -> McpToolPage:
        with self._failures():
            try:
                result = await self._session().list_tools(
                    cursor=cursor, cache_mode="bypass"
                )
            except ValidationError as error:
                raise invalid_page(error) from None
        return tool_page(result)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> McpToolResult:
        with self._failures():
            try:
                result = await self._session().call_tool(
                    name, arguments, read_timeout_seconds=self.timeout
                )
            except ValidationError:
                raise InvalidResult("Invalid MCP tool result") from None
        return tool_result(result)

    def _session(self) -> Client:
        try:
            self.client.session  # noqa: B018 - raises once the client's context has exited
        except RuntimeError:
            raise McpUnavailable("MCP client is not connected") from None
        return self.client

    @contextmanager
    def _failures(self) -> Iterator[None]:
        """The SDK's failures as the protocol's exceptions (`classify`)."""
        try:
            yield
        except MCPError as error:
            classified = classify(error)
            if isinstance(classified, McpConnectionLost) and self._on_lost:
                self._on_lost()
            raise classified from None
        except InputRequiredRoundsExceededError:
            raise McpProtocolError("MCP server kept asking for input") from None
        except (
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            anyio.EndOfStream,
            OSError,
            TimeoutError,  # the transport's own bounded write, not our timeout
        ):
            if self._on_lost:
                self._on_lost()
            raise McpConnectionLost("MCP connection lost") from None


def tool_page(result: types.ListToolsResult) -> McpToolPage:
    """A `tools/list` page with the fields our registry reads, named as on the wire."""
    tools: list[Mapping[str, Any]] = []
    for tool in result.tools:
        fields: dict[str, Any] = {"name": tool.name, "inputSchema": tool.input_schema}
        if tool.description is not None:
            fields["description"] = tool.description
        if tool.output_schema is not None:
            fields["outputSchema"] = tool.output_schema
        tools.append(fields)
    return McpToolPage(tools=tools, next_cursor=result.next_cursor)


def tool_result(result: types.CallToolResult) -> McpToolResult:
    """A `tools/call` result; `content` mapped block by block (module docstring)."""
    return McpToolResult(
        content=[content_part(block) for block in result.content],
        structured_content=result.structured_content,
        is_error=result.is_error,
    )


def content_part(block: object) -> dict[str, Any]:
    """One SDK content block as a message part (module docstring)."""
    if isinstance(block, types.TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, types.ImageContent | types.AudioContent):
        uri = f"data:{block.mime_type};base64,{block.data}"
        return _reference({"uri": uri, "mediaType": block.mime_type})
    if isinstance(block, types.ResourceLink):
        fields: dict[str, Any] = {"uri": block.uri}
        if block.mime_type is not None:
            fields["mediaType"] = block.mime_type
        fields["name"] = block.name
        for key in ("title", "description", "size"):
            value = getattr(block, key)
            if value is not None:
                fields[key] = value
        return _reference(fields)
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        fields = {"uri": resource.uri}
        if resource.mime_type is not None:
            fields["mediaType"] = resource.mime_type
        if isinstance(resource, types.TextResourceContents):
            fields["text"] = resource.text
        else:
            fields["blob"] = resource.blob
        return _reference(fields)
    data = (
        block.model_dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(block, BaseModel)
        else block
    )
    return {"type": "json", "data": data}


def _reference(fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "reference", "reference": fields}


def classify(error: MCPError) -> Exception:
    """An SDK `MCPError` as the protocol's exception.

    The SDK raises the same class for an error answer and for a connection that ended: it tells
    them apart only by code. CONNECTION_CLOSED (-32000) is a lost connection (the request may have
    been received), REQUEST_TIMEOUT (-32001) our own timeout (the SDK has sent
    `notifications/cancelled`), anything else the server's error answer. A server that answers
    -32000 itself is taken for a lost connection too: its outcome is then reported as unknown.
    """
    if error.code == types.CONNECTION_CLOSED:
        return McpConnectionLost("MCP connection lost")
    if error.code == types.REQUEST_TIMEOUT:
        return McpTimeout("MCP request timed out")
    return McpProtocolError(f"MCP server answered with error {error.code}")


def invalid_page(error: ValidationError) -> InvalidResult:
    """A `tools/list` answer the SDK refused, with the reference's message where one fits."""
    fields = {str(part) for item in error.errors() for part in item["loc"]}
    if fields & {"inputSchema", "input_schema"}:
        return InvalidResult("Invalid MCP inputSchema")
    if fields & {"outputSchema", "output_schema"}:
        return InvalidResult("Invalid MCP outputSchema")
    return InvalidResult("Invalid MCP tool page")
