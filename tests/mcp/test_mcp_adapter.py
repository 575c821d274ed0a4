"""The SDK adapter without a transport: content mapping, pages, classification of SDK failures, and
`SdkMcpClient` over an in-process `mcp.Client` of the probe server."""

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client, MCPError, types
from mcp_probe_server import PIXEL, SECRET_TEXT
from mcp_probe_server import mcp as probe_server
from pydantic import ValidationError

from interaction_worker import (
    McpConnectionLost,
    McpProtocolError,
    McpRegistry,
    McpTimeout,
    McpUnavailable,
    Sandbox,
)
from interaction_worker.contracts import McpInvokeOutput
from interaction_worker.errors import InvalidResult
from interaction_worker.mcp import SdkMcpClient, content_part, tool_page
from interaction_worker.mcp.adapter import classify, invalid_page

SCHEMA: dict[str, Any] = {"type": "object"}


@pytest.mark.parametrize(
    ("block", "part"),
    [
        pytest.param(types.TextContent(text="hi"), {"type": "text", "text": "hi"}, id="text"),
        pytest.param(
            types.ImageContent(data=PIXEL, mime_type="image/png"),
            {"type": "reference", "reference": {"uri": f"data:image/png;base64,{PIXEL}", "mediaType": "image/png"}},
            id="image",
        ),
        pytest.param(
            types.AudioContent(data="AAAA", mime_type="audio/wav"),
            {"type": "reference", "reference": {"uri": "data:audio/wav;base64,AAAA", "mediaType": "audio/wav"}},
            id="audio",
        ),
        pytest.param(
            types.ResourceLink(uri="file:///a.md", name="a.md", title="A", description="the a", mime_type="text/markdown", size=3),
            {"type": "reference", "reference": {"uri": "file:///a.md", "mediaType": "text/markdown", "name": "a.md", "title": "A", "description": "the a", "size": 3}},
            id="resource-link",
        ),
        pytest.param(
            types.ResourceLink(uri="file:///b", name="b"),
            {"type": "reference", "reference": {"uri": "file:///b", "name": "b"}},
            id="resource-link-bare",
        ),
        pytest.param(
            types.EmbeddedResource(resource=types.TextResourceContents(uri="mem://n", mime_type="text/plain", text="hello")),
            {"type": "reference", "reference": {"uri": "mem://n", "mediaType": "text/plain", "text": "hello"}},
            id="embedded-text",
        ),
        pytest.param(
            types.EmbeddedResource(resource=types.BlobResourceContents(uri="mem://b", blob=PIXEL)),
            {"type": "reference", "reference": {"uri": "mem://b", "blob": PIXEL}},
            id="embedded-blob",
        ),
        pytest.param(
            types.TextContent(text="annotated", annotations=types.Annotations(priority=1.0), _meta={"k": "v"}),
            {"type": "text", "text": "annotated"},
            id="annotations-dropped",
        ),
        pytest.param({"type": "future", "x": 1}, {"type": "json", "data": {"type": "future", "x": 1}}, id="unknown-kind"),
        pytest.param(
            types.Implementation(name="n", version="1"),
            {"type": "json", "data": {"name": "n", "version": "1"}},
            id="unknown-model",
        ),
    ],
)  # fmt: skip
def test_each_content_block_becomes_one_message_part(
    block: object, part: dict[str, Any]
) -> None:
    assert content_part(block) == part


def test_a_page_keeps_the_fields_the_registry_reads_under_wire_names() -> None:
    page = tool_page(
        types.ListToolsResult(
            tools=[
                types.Tool(name="a", input_schema=SCHEMA, title="A", icons=[]),
                types.Tool(
                    name="b",
                    description="B",
                    input_schema=SCHEMA,
                    output_schema={"type": "object", "properties": {}},
                ),
            ],
            next_cursor="2",
        )
    )
    assert page.tools == [
        {"name": "a", "inputSchema": SCHEMA},
        {
            "name": "b",
            "inputSchema": SCHEMA,
            "description": "B",
            "outputSchema": {"type": "object", "properties": {}},
        },
    ]
    assert page.next_cursor == "2"


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        pytest.param(types.CONNECTION_CLOSED, McpConnectionLost, id="connection-closed"),
        pytest.param(types.REQUEST_TIMEOUT, McpTimeout, id="timeout"),
        pytest.param(types.INVALID_PARAMS, McpProtocolError, id="invalid-params"),
        pytest.param(types.INTERNAL_ERROR, McpProtocolError, id="internal"),
        pytest.param(0, McpProtocolError, id="legacy-code-0"),
    ],
)  # fmt: skip
def test_sdk_errors_are_classified_by_code_and_never_carry_server_text(
    code: int, kind: type[Exception]
) -> None:
    classified = classify(MCPError(code=code, message=SECRET_TEXT))
    assert type(classified) is kind
    assert "sk-live" not in str(classified)


@pytest.mark.parametrize(
    ("page", "message"),
    [
        pytest.param({"tools": [{"name": "x", "inputSchema": "s"}]}, "Invalid MCP inputSchema", id="input-schema"),
        pytest.param({"tools": [{"name": "x", "inputSchema": {}, "outputSchema": 1}]}, "Invalid MCP outputSchema", id="output-schema"),
        pytest.param({"tools": "many"}, "Invalid MCP tool page", id="tools"),
        pytest.param({"tools": [], "nextCursor": 5}, "Invalid MCP tool page", id="cursor"),
    ],
)  # fmt: skip
def test_a_page_the_sdk_refuses_is_an_invalid_result_with_the_references_message(
    page: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        types.ListToolsResult.model_validate(page)
    error = invalid_page(caught.value)
    assert isinstance(error, InvalidResult)
    assert error.message == message


@pytest.fixture
async def in_process() -> AsyncIterator[SdkMcpClient]:
    async with Client(probe_server) as client:
        yield SdkMcpClient(client, timeout=10)


async def test_the_in_process_probe_answers_in_our_terms(
    in_process: SdkMcpClient,
) -> None:
    page = await in_process.list_tools()
    assert [tool["name"] for tool in page.tools] == [
        "echo",
        "measure",
        "leak",
        "reject",
        "media",
        "slow",
    ]
    assert page.next_cursor is None

    echo = await in_process.call_tool("echo", {"text": "hi"})
    assert (echo.content, echo.structured_content, echo.is_error, echo.error) == (
        [{"type": "text", "text": "hi"}],
        None,
        False,
        None,
    )
    measure = await in_process.call_tool("measure", {"values": [1, 2]})
    assert measure.structured_content == {"count": 2, "total": 3}
    leak = await in_process.call_tool("leak", {})
    assert (leak.is_error, leak.error) == (True, None)
    media = await in_process.call_tool("media", {})
    assert [part["type"] for part in media.content] == ["reference"] * 4
    with pytest.raises(McpProtocolError):
        await in_process.call_tool("reject", {})


async def test_an_is_error_result_gets_mcp_tool_error_and_keeps_the_servers_content(
    in_process: SdkMcpClient,
) -> None:
    registry = McpRegistry()
    registry.register("probe", in_process)
    output = await registry.execute(
        {
            "operation": "invoke",
            "server": "probe",
            "call": {"id": "c-1", "name": "leak", "arguments": {}},
        },
        Sandbox(mcp=["probe"]),
    )
    assert isinstance(output, McpInvokeOutput)
    wire = output.result.to_wire()
    assert wire["status"] == "failed"
    assert wire["error"] == {
        "code": "MCP_TOOL_ERROR",
        "message": "MCP tool reported an execution error",
    }
    assert SECRET_TEXT in wire["content"][0]["text"]


async def test_a_client_whose_context_has_exited_is_unavailable() -> None:
    async with Client(probe_server) as client:
        adapter = SdkMcpClient(client)
    with pytest.raises(McpUnavailable):
        await adapter.list_tools()
    with pytest.raises(McpUnavailable):
        await adapter.call_tool("echo", {"text": "x"})
