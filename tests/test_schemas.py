import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from interaction_worker.asyncapi import ASYNCAPI_FILE, asyncapi_document, asyncapi_text
from interaction_worker.contracts import DeadLetter, ErrorBody, McpCapability
from interaction_worker.contracts import validation as check
from interaction_worker.schema import (
    JSON_SCHEMA_DIALECT,
    SCHEMA_SUFFIX,
    schema_text,
    wire_schemas,
    write_schemas,
)

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "docs" / "schemas"
REGENERATE = (
    "docs/schemas is out of date with the contract models: "
    "run `make schema` (interaction-worker schema --out docs/schemas) and commit the result"
)

PAYLOADS = {
    "Artifact",
    "CommandCatalogReply",
    "CommandCatalogRequest",
    "CommandReply",
    "CommandRequest",
    "DeadLetter",
    "ErrorReply",
    "ExternalResult",
    "InteractionError",
    "McpCapability",
    "McpInput",
    "McpOutput",
    "Message",
    "Observation",
    "ObserveRequest",
    "OutputReceipt",
    "OutputRequest",
    "Reference",
    "ToolCallRequest",
    "ToolDefinition",
    "ToolList",
    "ToolListRequest",
}

CALL = {"id": "call-1", "name": "lookup", "arguments": {"query": "x", "n": [1, None]}}
RESULT = {
    "callId": "call-1",
    "source": "files:read",
    "status": "failed",
    "content": None,
    "error": {"code": "MCP_TOOL_ERROR", "message": "failed", "retryable": False},
    "references": [{"uri": "file://a", "mediaType": "text/plain", "extra": 1}],
    "metadata": {"size": 3},
}


def _validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(wire_schemas()[name])


def test_committed_schemas_match_the_models() -> None:
    for name, schema in wire_schemas().items():
        path = SCHEMA_DIR / f"{name}{SCHEMA_SUFFIX}"
        assert path.is_file(), f"{path.name} is missing. {REGENERATE}"
        assert path.read_text(encoding="utf-8") == schema_text(schema), (
            f"{path.name} differs from wire_schemas(). {REGENERATE}"
        )


def test_no_extra_or_missing_schema_files() -> None:
    committed = {path.name for path in SCHEMA_DIR.glob(f"*{SCHEMA_SUFFIX}")}
    expected = {f"{name}{SCHEMA_SUFFIX}" for name in wire_schemas()}
    assert committed == expected, (
        f"missing: {sorted(expected - committed)}, stale: {sorted(committed - expected)}. "
        + REGENERATE
    )


def test_every_wire_payload_has_a_titled_2020_12_schema() -> None:
    schemas = wire_schemas()
    assert set(schemas) == PAYLOADS
    for name, schema in schemas.items():
        assert schema["$schema"] == JSON_SCHEMA_DIALECT
        assert schema["title"] == name
        jsonschema.Draft202012Validator.check_schema(schema)


def test_absent_optional_fields_are_not_nullable_but_json_values_are() -> None:
    result = wire_schemas()["ExternalResult"]
    properties = result["properties"]
    assert properties["references"] == {
        "items": {"$ref": "#/$defs/Reference"},
        "type": "array",
    }
    assert properties["error"] == {"$ref": "#/$defs/InteractionError"}
    assert "default" not in properties["content"]
    assert result["$defs"]["JsonValue"] == {}


def test_the_mcp_operation_is_required() -> None:
    defs = wire_schemas()["McpInput"]["$defs"]
    assert defs["McpDiscoverInput"]["required"] == ["operation"]
    assert defs["McpInvokeInput"]["required"] == ["operation", "server", "call"]


def test_write_schemas_writes_sorted_files_and_leaves_every_other_file(
    tmp_path: Path,
) -> None:
    # A schema of the user's own, in the same directory and the same naming style.
    own = '{"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Order"}\n'
    (tmp_path / "Order.schema.json").write_text(own, encoding="utf-8")
    (tmp_path / "asyncapi.yaml").write_text("asyncapi: 3.0.0\n", encoding="utf-8")

    written = write_schemas(tmp_path)

    assert written == sorted(written)
    assert {path.name for path in written} == {f"{n}{SCHEMA_SUFFIX}" for n in PAYLOADS}
    assert (tmp_path / "Order.schema.json").read_text(encoding="utf-8") == own
    assert (tmp_path / "asyncapi.yaml").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["Order.schema.json", "asyncapi.yaml", *(p.name for p in written)]
    )  # nothing left beside them
    text = (tmp_path / "ExternalResult.schema.json").read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert text.startswith('{\n  "$defs": {\n')
    assert json.loads(text) == wire_schemas()["ExternalResult"]
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2) + "\n"


def test_write_schemas_creates_the_directory(tmp_path: Path) -> None:
    written = write_schemas(tmp_path / "a" / "b")
    assert len(written) == len(PAYLOADS)
    assert all(path.parent == tmp_path / "a" / "b" for path in written)


VALID = [
    pytest.param("ToolCallRequest", {"call": CALL}, id="tool-call"),
    pytest.param("ToolListRequest", {}, id="tool-list-all"),
    pytest.param("ToolListRequest", {"name": "grep"}, id="tool-list-one"),
    pytest.param(
        "ToolList",
        {"tools": [{"name": "grep", "inputSchema": {"type": "object"}}]},
        id="tool-list",
    ),
    pytest.param("McpInput", {"operation": "discover"}, id="mcp-discover-all-servers"),
    pytest.param(
        "McpInput", {"operation": "discover", "server": "files"}, id="mcp-discover"
    ),
    pytest.param(
        "McpInput",
        {"operation": "invoke", "server": "files", "call": CALL},
        id="mcp-invoke",
    ),
    pytest.param("ObserveRequest", {"result": RESULT}, id="observe-request"),
    pytest.param(
        "OutputRequest",
        {
            "deliveryId": "d-1",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "hi"}],
            },
            "artifacts": [{"name": "report", "reference": {"uri": "s3://b/k"}}],
        },
        id="output-request",
    ),
    pytest.param("ExternalResult", RESULT, id="external-result"),
    pytest.param(
        "ExternalResult",
        check.external_result(
            {"callId": "c", "source": "s", "status": "success", "content": "ok"}
        ).to_wire(),
        id="external-result-from-validator",
    ),
    pytest.param(
        "McpOutput",
        {
            "operation": "discover",
            "capabilities": [
                McpCapability(
                    server="files", name="read", input_schema={"type": "object"}
                ).to_wire()
            ],
        },
        id="mcp-discover-output",
    ),
    pytest.param(
        "McpOutput",
        {"operation": "discover", "capabilities": [], "unavailable": ["web"]},
        id="mcp-discover-output-with-unavailable-servers",
    ),
    pytest.param(
        "McpOutput", {"operation": "invoke", "result": RESULT}, id="mcp-invoke-output"
    ),
    pytest.param(
        "Observation",
        {
            "callId": "call-1",
            "source": "lookup",
            "status": "success",
            "message": {"role": "tool", "name": "lookup", "content": "found"},
            "structuredContent": None,
        },
        id="observation",
    ),
    pytest.param(
        "OutputReceipt",
        {
            "deliveryId": "d-1",
            "status": "unknown",
            "error": {
                "code": "SINKS_INCOMPLETE",
                "message": "Some sinks did not answer",
            },
            "metadata": {"sinks": {"console#0": {"status": "accepted"}}},
        },
        id="output-receipt",
    ),
    pytest.param(
        "ErrorReply",
        {
            "error": {
                "code": "INVALID_INPUT",
                "message": "call.id must be a nonempty string",
            }
        },
        id="error-reply",
    ),
    pytest.param(
        "DeadLetter",
        DeadLetter(
            subject="interaction.tool.call",
            error=ErrorBody(code="INVALID_JSON", message="Invalid JSON"),
            payload="e30=",
            encoding="base64",
            received_at="2026-11-29T21:00:00Z",
        ).to_wire(),
        id="dead-letter",
    ),
    pytest.param(
        "ToolDefinition",
        {
            "name": "grep",
            "inputSchema": {"type": "object"},
            "effects": ["read"],
            "requiresApproval": False,
        },
        id="tool-definition",
    ),
    pytest.param(
        "InteractionError", {"code": "E", "message": "m"}, id="interaction-error"
    ),
    pytest.param(
        "Reference", {"uri": "file://x", "digest": "sha256:0"}, id="reference"
    ),
    pytest.param(
        "Message", {"role": "user", "content": None}, id="message-null-content"
    ),
    pytest.param(
        "Artifact",
        {"name": "a", "reference": {"uri": "u"}, "kept": True},
        id="artifact-extra-key",
    ),
]


@pytest.mark.parametrize(("name", "payload"), VALID)
def test_valid_payloads_match_their_schema(name: str, payload: Any) -> None:
    _validator(name).validate(payload)


INVALID = [
    pytest.param("ToolCallRequest", {}, id="tool-call-missing"),
    pytest.param("ToolListRequest", {"name": ""}, id="tool-list-empty-name"),
    pytest.param("ToolList", {}, id="tool-list-missing-tools"),
    pytest.param(
        "ToolCallRequest",
        {"call": {**CALL, "id": ""}},
        id="tool-call-empty-id",
    ),
    pytest.param(
        "ToolCallRequest",
        {"call": {**CALL, "id": "x" * 257}},
        id="tool-call-id-too-long",
    ),
    pytest.param(
        "ToolCallRequest",
        {"call": {**CALL, "arguments": []}},
        id="tool-call-arguments-array",
    ),
    pytest.param("McpInput", {}, id="mcp-operation-missing"),
    pytest.param("McpInput", {"operation": "list"}, id="mcp-operation-unknown"),
    pytest.param(
        "McpInput", {"operation": "discover", "server": None}, id="mcp-server-null"
    ),
    pytest.param(
        "McpInput", {"operation": "invoke", "server": "files"}, id="mcp-call-missing"
    ),
    pytest.param(
        "ExternalResult", {**RESULT, "status": "done"}, id="result-bad-status"
    ),
    pytest.param("ExternalResult", {**RESULT, "error": None}, id="result-error-null"),
    pytest.param(
        "ExternalResult", {**RESULT, "references": None}, id="result-references-null"
    ),
    pytest.param(
        "ExternalResult",
        {**RESULT, "error": {"code": "bad code", "message": "m"}},
        id="result-bad-error-code",
    ),
    pytest.param(
        "OutputReceipt", {"deliveryId": "d", "status": "sent"}, id="receipt-bad-status"
    ),
    pytest.param(
        "OutputRequest",
        {"deliveryId": "d", "message": {"role": "robot", "content": "x"}},
        id="output-bad-role",
    ),
    pytest.param(
        "Message",
        {"role": "user", "content": "x", "name": None},
        id="message-name-null",
    ),
    pytest.param("Message", {"role": "user"}, id="message-content-missing"),
    pytest.param("Reference", {"mediaType": "text/plain"}, id="reference-no-uri"),
    pytest.param(
        "InteractionError",
        {"code": "E", "message": "m", "retryable": "yes"},
        id="error-retryable-string",
    ),
    pytest.param("McpOutput", {"operation": "invoke"}, id="mcp-output-result-missing"),
    pytest.param(
        "McpOutput",
        {"operation": "discover", "capabilities": [], "unavailable": None},
        id="mcp-discover-unavailable-null",
    ),
    pytest.param(
        "McpOutput",
        {"operation": "discover", "capabilities": [], "unavailable": [""]},
        id="mcp-discover-unavailable-blank-server",
    ),
    pytest.param(
        "DeadLetter",
        {"subject": "s", "error": {"code": "E"}, "payload": "", "receivedAt": "t"},
        id="dead-letter-error-message-missing",
    ),
]


@pytest.mark.parametrize(("name", "payload"), INVALID)
def test_invalid_payloads_fail_their_schema(name: str, payload: Any) -> None:
    with pytest.raises(jsonschema.ValidationError):
        _validator(name).validate(payload)


def test_committed_asyncapi_document_matches_the_code() -> None:
    path = SCHEMA_DIR / ASYNCAPI_FILE
    assert path.is_file(), f"{path.name} is missing. {REGENERATE}"
    assert path.read_text(encoding="utf-8") == asyncapi_text(), (
        f"{path.name} differs from the code. {REGENERATE}"
    )


def test_asyncapi_document_names_every_subject() -> None:
    channels = set(asyncapi_document()["channels"])
    assert {
        "interaction.tool.call",
        "interaction.mcp.call",
        "interaction.observe",
        "interaction.output.deliver",
        "interaction.tool.result.{key}",
        "interaction.tool.observation.{key}",
        "interaction.mcp.result.{key}",
        "interaction.mcp.observation.{key}",
        "interaction.output.receipt.{key}",
        "interaction.dead.{kind}.{key}",
        "interaction.tool.list",
        "interaction.command",
        "interaction.command.catalog",
        "interaction.command.done.{command}.{key}",
    } <= channels
