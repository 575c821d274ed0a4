"""What a host reads of a call's outcome (docs/gateway.md, "What a host gets"), and which tools it
sees: the mapping and the naming rules without a bus."""

import json
from typing import Any

import mcp_types as types
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mcp_types import methods

from interaction_worker.contracts import ExternalResult, McpCapability, ToolDefinition
from interaction_worker.gateway import call_result, tool_error
from interaction_worker.gateway.catalog import Route, build_listing
from interaction_worker.mcp.adapter import content_part

PNG = "iVBORw0KGgo="
OBJECT = {"type": "object"}


def result(**fields: Any) -> ExternalResult:
    return ExternalResult.model_validate(
        {"callId": "c-1", "source": "test", "status": "success", **fields}
    )


def wire(answer: types.CallToolResult, version: str = "2025-11-25") -> dict[str, Any]:
    """The result as the host receives it, through the SDK's own check of the version's shape."""
    dumped = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
    checked: dict[str, Any] = methods.serialize_server_result(
        "tools/call", version, dumped
    )
    return checked


def test_mcp_blocks_pass_through_and_a_string_is_one_text_item() -> None:
    blocks = [
        {"type": "text", "text": "a"},
        {"type": "image", "data": PNG, "mimeType": "image/png"},
        {"type": "audio", "data": PNG, "mimeType": "audio/wav"},
        {"type": "resource", "resource": {"uri": "test://r", "text": "t"}},
    ]
    assert wire(call_result(result(content=blocks)))["content"] == blocks
    assert wire(call_result(result(content="plain")))["content"] == [
        {"type": "text", "text": "plain"}
    ]


def test_other_json_is_a_text_item_holding_it() -> None:
    content = [{"type": "json", "data": {"n": 1}}, {"no": "type"}, 5, "s"]
    assert [
        item["text"] for item in wire(call_result(result(content=content)))["content"]
    ] == [
        '{"n": 1}',
        '{"no": "type"}',
        "5",
        "s",
    ]
    broken = {"type": "image", "data": PNG}  # no mimeType: not an MCP image
    (item,) = wire(call_result(result(content=[broken])))["content"]
    assert json.loads(item["text"]) == broken
    assert wire(call_result(result(content={"a": 1})))["content"] == [
        {"type": "text", "text": '{"a": 1}'}
    ]


def test_what_an_mcp_server_behind_the_fleet_sent_comes_back_as_it_was() -> None:
    sent = [
        types.TextContent(text="t"),
        types.ImageContent(data=PNG, mime_type="image/png"),
        types.AudioContent(data=PNG, mime_type="audio/wav"),
        types.EmbeddedResource(
            resource=types.TextResourceContents(
                uri="test://t", mime_type="text/plain", text="x"
            )
        ),
        types.EmbeddedResource(
            resource=types.BlobResourceContents(uri="test://b", blob=PNG)
        ),
        types.ResourceLink(
            uri="https://example.com/a", name="a", mime_type="text/html", size=3
        ),
    ]
    parts = [content_part(block) for block in sent]
    shown = wire(call_result(result(content=parts)))["content"]
    assert shown == [
        block.model_dump(by_alias=True, mode="json", exclude_none=True)
        for block in sent
    ]


def test_references_are_resource_links_and_structured_content_stays() -> None:
    answer = wire(
        call_result(
            result(
                content="see",
                structuredContent={"k": [1]},
                references=[{"uri": "file:///a.txt", "mediaType": "text/plain"}],
            )
        )
    )
    assert answer["content"] == [
        {"type": "text", "text": "see"},
        {
            "type": "resource_link",
            "uri": "file:///a.txt",
            "name": "file:///a.txt",
            "mimeType": "text/plain",
        },
    ]
    assert answer["structuredContent"] == {"k": [1]}
    assert answer["_meta"] == {
        "interaction/callId": "c-1",
        "interaction/status": "success",
    }


def test_structured_content_without_content_is_also_text_and_a_2025_host_gets_only_objects() -> (
    None
):
    alone = wire(call_result(result(structuredContent={"a": 1})))
    assert alone["content"] == [{"type": "text", "text": '{"a": 1}'}]
    listed = wire(call_result(result(structuredContent=[1, 2]), object_only=True))
    assert "structuredContent" not in listed
    assert listed["content"] == [{"type": "text", "text": "[1, 2]"}]
    modern = wire(call_result(result(structuredContent=[1, 2])), "2026-07-28")
    assert modern["structuredContent"] == [1, 2]


def test_a_failure_says_its_code_and_message_first() -> None:
    for status in ("failed", "timeout", "cancelled", "unknown"):
        answer = wire(
            call_result(
                result(
                    status=status,
                    content="partial",
                    error={"code": "TOOL_TIMEOUT", "message": "Tool timed out"},
                )
            )
        )
        assert answer["isError"] is True
        assert [item["text"] for item in answer["content"]] == [
            "TOOL_TIMEOUT: Tool timed out",
            "partial",
        ]
        assert answer["_meta"]["interaction/status"] == status
    refused = wire(tool_error("c-2", "PERMISSION_DENIED", "Tool is not allowed"))
    assert refused["isError"] is True
    assert refused["content"] == [
        {"type": "text", "text": "PERMISSION_DENIED: Tool is not allowed"}
    ]
    assert refused["_meta"] == {
        "interaction/callId": "c-2",
        "interaction/status": "refused",
    }


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["type", "text", "data", "mimeType", "uri", "reference", "resource"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=40, deadline=None)
@given(content=json_values, structured=json_values)
@example(content=[{"type": []}], structured=None)  # a type that is no string
def test_any_outcome_makes_a_result_every_host_accepts(
    content: Any, structured: Any
) -> None:
    document = result(content=content, structuredContent=structured)
    for version in ("2025-11-25", "2026-07-28"):
        wire(call_result(document, object_only=version != "2026-07-28"), version)


def capability(server: str, name: str, **fields: Any) -> McpCapability:
    return McpCapability.model_validate(
        {"server": server, "name": name, "inputSchema": OBJECT, **fields}
    )


def test_names_too_long_clashing_or_not_a_tool_name_are_left_out() -> None:
    fleet = [
        ToolDefinition.model_validate({"name": n, "inputSchema": OBJECT})
        for n in ("read", "a__b", "c____d")
    ]
    sources: dict[str, Any] = {
        "": fleet,
        "a": [
            capability("a", "b"),
            capability("a", "ok", outputSchema={"type": "array"}),
        ],
        "c_": [capability("c_", "_d")],
        "c": [capability("c", "__d")],
        "long": [capability("long", "x" * 59), capability("long", "x" * 58)],
        "sp ace": [capability("sp ace", "t")],
    }
    listing, warnings = build_listing(sources, ["a", "c_", "c", "long", "sp ace"], None)
    assert [tool.name for tool in listing.tools] == [
        "read",
        "a__b",
        "c____d",
        "a__ok",
        f"long__{'x' * 58}",
    ]
    assert listing.routes["a__ok"] == Route("ok", "a")
    assert listing.routes["a__b"] == Route(
        "a__b"
    )  # the fleet's own tool keeps its name
    assert (
        listing.tools[3].output_schema is None
    )  # not an object's: left out, the tool kept
    assert warnings == [
        "tool a__b left out: the name clashes with another tool",
        "tool a__ok: its outputSchema is left out, it is not an object schema",
        "tool c____d left out: the name clashes with another tool",
        f"tool long__{'x' * 59} left out: the name is longer than 64 characters",
        "tool sp ace__t left out: a tool name has only letters, digits, '_', '-' and '.'",
    ]


def test_tool_limits_the_fleets_tools_and_says_which_it_did_not_find() -> None:
    fleet = [
        ToolDefinition.model_validate({"name": n, "inputSchema": OBJECT})
        for n in ("read", "write")
    ]
    listing, warnings = build_listing({"": fleet}, [], frozenset({"read", "gone"}))
    assert [tool.name for tool in listing.tools] == ["read"]
    assert warnings == ["--tool gone: no worker offers it"]
