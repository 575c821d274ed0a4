"""MCP payloads: the discover | invoke input union, its outputs and the capability."""

from typing import Annotated, Literal

from pydantic import Field

from ._base import WireModel
from .common import ExternalResult, JsonObject, ToolCall


class McpDiscoverInput(WireModel):
    operation: Literal["discover"] = "discover"
    server: str | None = Field(default=None, min_length=1, max_length=256)


class McpInvokeInput(WireModel):
    operation: Literal["invoke"] = "invoke"
    server: str = Field(min_length=1, max_length=256)
    call: ToolCall


McpInput = Annotated[
    McpDiscoverInput | McpInvokeInput, Field(discriminator="operation")
]


class McpCapability(WireModel):
    """One tool an MCP server offers. Unknown keys are dropped."""

    server: str
    name: str
    description: str | None = None
    input_schema: JsonObject
    output_schema: JsonObject | None = None


class McpDiscoverOutput(WireModel):
    """The tools found. `unavailable`: the optional servers that did not answer a discover of all
    servers, in registration order; absent when every server answered."""

    operation: Literal["discover"] = "discover"
    capabilities: list[McpCapability]
    unavailable: list[Annotated[str, Field(min_length=1, max_length=256)]] | None = None


class McpInvokeOutput(WireModel):
    operation: Literal["invoke"] = "invoke"
    result: ExternalResult


McpOutput = Annotated[
    McpDiscoverOutput | McpInvokeOutput, Field(discriminator="operation")
]
