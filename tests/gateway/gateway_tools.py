"""Tools a served worker offers for the gateway's tests: the names and behaviour the official MCP
conformance suite's server scenarios call (`test_simple_text`, ...), and a few of the tests' own."""

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from interaction_worker import InteractionWorker, Sandbox, ToolContext

# A 1x1 red PNG and 8 samples of silent 8-bit WAV, as the scenarios ask for a minimal image and sound.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
WAV = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="
NO_ARGUMENTS: Mapping[str, Any] = {"type": "object", "properties": {}}
# Long enough for three of the gateway's progress notifications (at once, then every 2 s).
PROGRESS_TOOL_SECONDS = 4.5


@dataclass
class Fixed:
    """A tool answering the same outcome to every call; `seconds` it takes first."""

    name: str
    description: str
    outcome: Mapping[str, Any]
    input_schema: Mapping[str, Any] = field(default_factory=lambda: dict(NO_ARGUMENTS))
    seconds: float = 0.0

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        if self.seconds:
            await asyncio.sleep(self.seconds)
        return dict(self.outcome)


def _success(*content: Mapping[str, Any]) -> dict[str, Any]:
    return {"status": "success", "content": list(content)}


TEXT = {"type": "text", "text": "This is a simple text response for testing."}
IMAGE = {"type": "image", "data": PNG, "mimeType": "image/png"}
RESOURCE = {
    "type": "resource",
    "resource": {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    },
}
MIXED_RESOURCE = {
    "type": "resource",
    "resource": {
        "uri": "test://mixed-content-resource",
        "mimeType": "application/json",
        "text": '{"test":"data","value":123}',
    },
}


def conformance_tools() -> list[Fixed]:
    """The tools of the suite's tools-* and json-schema-2020-12 scenarios; the ones that need what
    the bus cannot carry (a tool's logs, sampling, elicitation) are left out and listed with their
    reason in conformance/expected-failures.yml."""
    return [
        Fixed("test_simple_text", "Returns simple text", _success(TEXT)),
        Fixed("test_image_content", "Returns an image", _success(IMAGE)),
        Fixed(
            "test_audio_content",
            "Returns a sound",
            _success({"type": "audio", "data": WAV, "mimeType": "audio/wav"}),
        ),
        Fixed(
            "test_embedded_resource", "Returns an embedded resource", _success(RESOURCE)
        ),
        Fixed(
            "test_multiple_content_types",
            "Returns text, an image and a resource",
            _success(
                {"type": "text", "text": "Multiple content types test:"},
                IMAGE,
                MIXED_RESOURCE,
            ),
        ),
        Fixed(
            "test_error_handling",
            "Always fails",
            {
                "status": "failed",
                "error": {
                    "code": "TOOL_ERROR",
                    "message": "This tool intentionally returns an error for testing",
                },
            },
        ),
        Fixed(
            "test_tool_with_progress",
            "Takes a while",
            _success({"type": "text", "text": "Progress test completed"}),
            seconds=PROGRESS_TOOL_SECONDS,
        ),
        Fixed(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features",
            _success({"type": "text", "text": "ok"}),
            input_schema={
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "type": "object",
                        "properties": {
                            "street": {"type": "string"},
                            "city": {"type": "string"},
                        },
                    }
                },
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                },
                "additionalProperties": False,
            },
        ),
    ]


def conformance_worker() -> InteractionWorker:
    tools = conformance_tools()
    return InteractionWorker(
        tools=tools, sandbox=Sandbox(tools=[tool.name for tool in tools])
    )
