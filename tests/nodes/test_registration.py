"""What is registered in code is checked when it is registered: a tool's definition and methods, an MCP
client's methods, a sink's deliver. A wrong one is refused, naming it and the attribute, so that it
never fails later at every call, or at every listing for every client."""

import math
from collections.abc import AsyncIterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest

from interaction_worker import (
    InteractionWorker,
    RegistrationError,
    Sandbox,
    ToolContext,
    ToolRegistry,
)
from interaction_worker.nodes import McpRegistry
from interaction_worker.sinks import FanoutSink

GRANT_ALL = Sandbox(tools=["*"])


class Tool:
    """A valid tool; each case changes one attribute."""

    name = "lookup"
    description: Any = "Find one order"
    input_schema: Any = {"type": "object", "properties": {"q": {"type": "string"}}}
    effects: Any = ("read",)
    requires_approval: Any = False

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return {"status": "success", "content": "ok"}


def tool_with(**attributes: Any) -> Tool:
    tool = Tool()
    for name, value in attributes.items():
        setattr(tool, name, value)
    return tool


class NoSchema:
    name = "lookup"

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return {"status": "success", "content": "ok"}


class AsyncValidate(Tool):
    async def validate(self, arguments: dict[str, Any]) -> None:  # type: ignore[override]
        raise ValueError("never run")


class AsyncGeneratorValidate(Tool):
    async def validate(  # type: ignore[override]
        self, arguments: dict[str, Any]
    ) -> AsyncIterator[None]:
        yield None


class CallableAsyncValidate:
    async def __call__(self, arguments: dict[str, Any]) -> None:
        return None


class PlainExecute(Tool):
    def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return {"status": "success", "content": "ok"}


SCHEMA_PROBLEM = "input_schema must be a JSON Schema object (string keys, JSON values)"
EFFECTS_PROBLEM = "effects must be a list of read, write, execute, network"


@pytest.mark.parametrize(
    ("tool", "problem"),
    [
        pytest.param(
            NoSchema(),
            "input_schema is required (a JSON Schema object)",
            id="no-schema",
        ),
        pytest.param(
            tool_with(input_schema=None),
            "input_schema must be a JSON Schema object",
            id="schema-none",
        ),
        pytest.param(
            tool_with(input_schema=[{"type": "object"}]),
            "input_schema must be a JSON Schema object",
            id="schema-list",
        ),
        pytest.param(
            tool_with(input_schema='{"type": "object"}'),
            "input_schema must be a JSON Schema object",
            id="schema-string",
        ),
        pytest.param(
            tool_with(input_schema=True),
            "input_schema must be a JSON Schema object",
            id="schema-boolean",
        ),
        pytest.param(
            tool_with(input_schema={1: "object"}), SCHEMA_PROBLEM, id="schema-int-key"
        ),
        pytest.param(
            tool_with(input_schema={"type": "object", "enum": {"a", "b"}}),
            SCHEMA_PROBLEM,
            id="schema-set-value",
        ),
        pytest.param(
            tool_with(input_schema={"type": "object", "maximum": math.nan}),
            SCHEMA_PROBLEM,
            id="schema-nan",
        ),
        pytest.param(
            tool_with(input_schema={"type": "object", "default": object()}),
            SCHEMA_PROBLEM,
            id="schema-object-value",
        ),
        pytest.param(
            tool_with(input_schema={"type": "string"}),
            'input_schema must describe an object ("type": "object")',
            id="schema-of-a-string",
        ),
        pytest.param(
            tool_with(input_schema={"type": "object", "properties": ["q"]}),
            "input_schema.properties must be an object",
            id="schema-properties-list",
        ),
        pytest.param(
            tool_with(input_schema={"type": "object", "required": "q"}),
            "input_schema.required must be a list of strings",
            id="schema-required-string",
        ),
        pytest.param(
            tool_with(input_schema={"type": "object", "required": [1]}),
            "input_schema.required must be a list of strings",
            id="schema-required-int",
        ),
        pytest.param(tool_with(effects="read"), EFFECTS_PROBLEM, id="effects-string"),
        pytest.param(
            tool_with(effects=("read", "delete")), EFFECTS_PROBLEM, id="effects-unknown"
        ),
        pytest.param(tool_with(effects=["READ"]), EFFECTS_PROBLEM, id="effects-case"),
        pytest.param(tool_with(effects=[1]), EFFECTS_PROBLEM, id="effects-int"),
        pytest.param(tool_with(effects=5), EFFECTS_PROBLEM, id="effects-number"),
        pytest.param(
            tool_with(effects={"read": True}), EFFECTS_PROBLEM, id="effects-mapping"
        ),
        pytest.param(
            tool_with(description=5),
            "description must be a string",
            id="description-number",
        ),
        pytest.param(
            tool_with(requires_approval="yes"),
            "requires_approval must be true or false",
            id="requires-approval-string",
        ),
        pytest.param(
            AsyncValidate(),
            "validate must be a plain method, not async",
            id="async-validate",
        ),
        pytest.param(
            AsyncGeneratorValidate(),
            "validate must be a plain method, not async",
            id="async-generator-validate",
        ),
        pytest.param(
            tool_with(validate=CallableAsyncValidate()),
            "validate must be a plain method, not async",
            id="async-callable-validate",
        ),
        pytest.param(
            tool_with(validate=None), "validate must be a method", id="no-validate"
        ),
        pytest.param(
            PlainExecute(), "execute must be an async method", id="plain-execute"
        ),
        pytest.param(
            tool_with(execute="run"), "execute must be an async method", id="no-execute"
        ),
    ],
)
def test_a_tool_that_is_not_a_tool_is_refused_at_registration(
    tool: Any, problem: str
) -> None:
    registry = ToolRegistry()
    with pytest.raises(RegistrationError) as caught:
        registry.register(tool)
    assert str(caught.value) == f"Invalid tool lookup: {problem}"
    assert registry.names() == []
    assert registry.list(GRANT_ALL) == []


def test_a_worker_built_with_a_wrong_tool_is_refused() -> None:
    with pytest.raises(RegistrationError, match="Invalid tool lookup: validate"):
        InteractionWorker(tools=[AsyncValidate()])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("attributes", "listed"),
    [
        pytest.param(
            {"effects": frozenset({"network", "read"})},
            {"effects": ["read", "network"]},
            id="a-set-of-effects-in-documented-order",
        ),
        pytest.param({"effects": []}, {"effects": []}, id="no-effects"),
        pytest.param(
            {
                "input_schema": MappingProxyType(
                    {"type": "object", "required": ("q",), "properties": {}}
                )
            },
            {
                "inputSchema": {"type": "object", "required": ["q"], "properties": {}},
            },
            id="read-only-mapping-and-tuples",
        ),
        pytest.param(
            {"input_schema": {"properties": {"q": True}}},
            {"inputSchema": {"properties": {"q": True}}},
            id="schema-without-type",
        ),
        pytest.param(
            {"description": None, "requires_approval": None, "effects": None},
            {"description": None, "requiresApproval": None, "effects": None},
            id="optional-attributes-absent",
        ),
    ],
)
def test_python_spellings_of_a_definition_are_listed_as_json(
    attributes: Mapping[str, Any], listed: Mapping[str, Any]
) -> None:
    registry = ToolRegistry([tool_with(**attributes)])
    (definition,) = registry.list(GRANT_ALL)
    wire = definition.to_wire()
    for key, value in listed.items():
        assert wire.get(key) == value


def test_a_definition_is_read_once_at_registration() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    tool = tool_with(input_schema=schema)
    registry = ToolRegistry([tool])
    schema["properties"]["bad"] = {1, 2}
    tool.effects = "nonsense"
    tool.input_schema = None
    (definition,) = registry.list(GRANT_ALL)
    assert definition.to_wire()["inputSchema"] == {"type": "object", "properties": {}}
    assert definition.to_wire()["effects"] == ["read"]
    assert registry.describe("lookup", GRANT_ALL) == definition


def test_the_definition_goes_with_unregister() -> None:
    registry = ToolRegistry()
    unregister = registry.register(Tool())
    assert unregister() is True
    assert registry.list(GRANT_ALL) == []
    registry.register(tool_with(description="again"))
    (definition,) = registry.list(GRANT_ALL)
    assert definition.description == "again"


# --- MCP clients and sinks: the same rule ------------------------------------------------------


class McpClientDouble:
    async def list_tools(self, cursor: str | None = None) -> Any:
        return {"tools": []}

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        return {"content": "ok"}


class SyncListing(McpClientDouble):
    def list_tools(self, cursor: str | None = None) -> Any:
        return {"tools": []}


class NoCall:
    async def list_tools(self, cursor: str | None = None) -> Any:
        return {"tools": []}


@pytest.mark.parametrize(
    ("client", "method"),
    [
        pytest.param(SyncListing(), "list_tools", id="plain-list-tools"),
        pytest.param(NoCall(), "call_tool", id="no-call-tool"),
        pytest.param(object(), "list_tools", id="not-a-client"),
    ],
)
def test_an_mcp_client_without_async_methods_is_refused(
    client: Any, method: str
) -> None:
    registry = McpRegistry()
    with pytest.raises(RegistrationError) as caught:
        registry.register("files", client)
    assert str(caught.value) == (
        f"Invalid MCP server files: its client's {method} must be an async method"
    )
    assert registry.servers() == []
    with pytest.raises(RegistrationError, match="Invalid MCP server files"):
        InteractionWorker(mcp={"files": client})


def test_an_mcp_client_with_async_methods_is_registered() -> None:
    registry = McpRegistry()
    registry.register("files", McpClientDouble())
    assert registry.servers() == ["files"]


class SyncSink:
    name = "collect"

    def deliver(self, request: Any, context: Any) -> Any:
        return {"deliveryId": request.delivery_id, "status": "accepted"}


class AsyncSink:
    async def deliver(self, request: Any, context: Any) -> Any:
        return {"deliveryId": request.delivery_id, "status": "accepted"}


def test_a_sink_without_an_async_deliver_is_refused() -> None:
    with pytest.raises(RegistrationError) as caught:
        InteractionWorker(output=SyncSink())
    assert str(caught.value) == "Invalid sink collect: deliver must be an async method"
    with pytest.raises(RegistrationError) as caught:
        FanoutSink([AsyncSink(), SyncSink()])
    assert str(caught.value) == (
        'Invalid sink "collect": deliver must be an async method'
    )
    InteractionWorker(output=FanoutSink([AsyncSink()]))
