"""InteractionWorker without a transport: capabilities, construction rules and the four node methods (section 10)."""

from collections.abc import Mapping
from typing import Any

import pytest

from interaction_worker import (
    ConfigurationError,
    DeliveryContext,
    ExternalResult,
    InteractionWorker,
    McpRegistry,
    Observation,
    OutputRequest,
    RegistrationError,
    Sandbox,
    ToolCall,
    ToolContext,
    ToolRegistry,
)
from interaction_worker.contracts import ObserveRequest, ToolCallRequest
from interaction_worker.errors import InvalidInput, NotFound, PermissionDenied


class Lookup:
    description = "Find one order"
    input_schema: Mapping[str, Any] = {"type": "object"}
    effects = ("read",)

    def __init__(self, name: str = "lookup") -> None:
        self.name = name
        self.executed: list[dict[str, Any]] = []

    def validate(self, arguments: dict[str, Any]) -> None:
        if not isinstance(arguments.get("query"), str):
            raise ValueError("query must be a string")

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.executed.append(arguments)
        if arguments["query"] == "missing":
            return {
                "status": "failed",
                "content": "no rows",
                "error": {"code": "NO_MATCH", "message": "No match"},
            }
        return {"status": "success", "structuredContent": {"found": True}}


class Collect:
    name = "collect"

    def __init__(self) -> None:
        self.calls: list[OutputRequest] = []

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        self.calls.append(request)
        return {"deliveryId": request.delivery_id, "status": "accepted"}


class NoMcp:
    """An MCP client that must never be reached in these tests."""

    async def list_tools(self, cursor: str | None = None) -> Any:
        raise AssertionError("list_tools called")

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        raise AssertionError("call_tool called")


TOOL = "INTERACTION.ACT.TOOL"
OBSERVE = "INTERACTION.OBSERVE"
MCP = "INTERACTION.ACT.MCP"
OUTPUT = "INTERACTION.OUTPUT"


def tool_call(
    query: Any = "A-1", name: str = "lookup", call_id: str = "c-1"
) -> dict[str, Any]:
    return {"call": {"id": call_id, "name": name, "arguments": {"query": query}}}


# --- capabilities -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param({}, [TOOL, OBSERVE], id="nothing"),
        pytest.param({"tools": []}, [TOOL, OBSERVE], id="empty-tools"),
        pytest.param({"tools": ToolRegistry()}, [TOOL, OBSERVE], id="empty-registry"),
        pytest.param({"mcp": {}}, [TOOL, OBSERVE, MCP], id="empty-mcp-record"),
        pytest.param({"mcp": McpRegistry()}, [TOOL, OBSERVE, MCP], id="mcp-registry"),
        pytest.param({"output": Collect()}, [TOOL, OBSERVE, OUTPUT], id="output"),
        pytest.param(
            {"output": Collect(), "mcp": {"files": NoMcp()}},
            [TOOL, OBSERVE, MCP, OUTPUT],
            id="all",
        ),
    ],
)
def test_capabilities(options: dict[str, Any], expected: list[str]) -> None:
    assert InteractionWorker(**options).capabilities == expected


# --- construction -------------------------------------------------------------------------------


async def test_a_tool_registry_is_kept_by_identity() -> None:
    registry = ToolRegistry()
    worker = InteractionWorker(tools=registry, sandbox=Sandbox(tools=["*"]))
    assert worker.tools is registry
    with pytest.raises(NotFound) as caught:
        await worker.call_tool(tool_call())
    assert caught.value.message == "Unknown tool: lookup"
    unregister = registry.register(Lookup())
    result = await worker.call_tool(tool_call())
    assert result.status == "success"
    assert unregister() is True
    with pytest.raises(NotFound):
        await worker.call_tool(tool_call())


def test_a_list_of_tools_is_registered_in_order() -> None:
    worker = InteractionWorker(tools=[Lookup("b"), Lookup("a"), Lookup("c")])
    assert isinstance(worker.tools, ToolRegistry)
    assert worker.tools.names() == ["b", "a", "c"]


@pytest.mark.parametrize(
    ("names", "message"),
    [
        pytest.param(
            ["ok", "bad name"], "Invalid or duplicate tool: bad name", id="invalid"
        ),
        pytest.param(
            ["x" * 65], "Invalid or duplicate tool: " + "x" * 65, id="too-long"
        ),
        pytest.param(["a", "b", "a"], "Invalid or duplicate tool: a", id="duplicate"),
    ],
)
def test_invalid_tools_fail_at_construction(names: list[str], message: str) -> None:
    with pytest.raises(RegistrationError) as caught:
        InteractionWorker(tools=[Lookup(name) for name in names])
    assert str(caught.value) == message


def test_an_mcp_registry_is_kept_and_a_record_is_registered_in_order() -> None:
    registry = McpRegistry()
    assert InteractionWorker(mcp=registry).mcp is registry
    first, second = NoMcp(), NoMcp()
    worker = InteractionWorker(mcp={"zeta": first, "alpha": second})
    assert worker.mcp is not None
    assert worker.mcp.clients() == [first, second]
    assert worker.mcp.get("zeta") is first


@pytest.mark.parametrize(
    "concurrency",
    [
        pytest.param(0, id="zero"),
        pytest.param(-1, id="negative"),
        pytest.param(1.5, id="float"),
        pytest.param(2.0, id="integral-float"),
        pytest.param(True, id="true"),
        pytest.param(False, id="false"),
        pytest.param("3", id="string"),
        pytest.param(2**53, id="beyond-safe-integer"),
    ],
)
def test_invalid_concurrency(concurrency: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        InteractionWorker(concurrency=concurrency)
    assert str(caught.value) == "Worker concurrency must be a positive integer"


@pytest.mark.parametrize(
    "concurrency",
    [
        pytest.param(None, id="none"),
        pytest.param(1, id="one"),
        pytest.param(3, id="three"),
        pytest.param(2**53 - 1, id="max-safe-integer"),
    ],
)
def test_valid_concurrency(concurrency: int | None) -> None:
    assert InteractionWorker(concurrency=concurrency).concurrency == concurrency


def test_concurrency_is_checked_before_tools() -> None:
    with pytest.raises(ConfigurationError):
        InteractionWorker(tools=[Lookup("bad name")], concurrency=0)


# --- sandbox ------------------------------------------------------------------------------------


async def test_without_a_sandbox_nothing_is_granted() -> None:
    tool = Lookup()
    worker = InteractionWorker(tools=[tool])
    assert worker.sandbox_given is False
    assert worker.tools.list(worker.sandbox) == []
    with pytest.raises(PermissionDenied) as caught:
        await worker.call_tool(tool_call())
    assert caught.value.message == "Permission denied: tools:lookup"
    assert tool.executed == []


async def test_the_given_sandbox_is_used() -> None:
    sandbox = Sandbox(tools=["other"])
    worker = InteractionWorker(tools=[Lookup(), Lookup("other")], sandbox=sandbox)
    assert worker.sandbox is sandbox
    assert worker.sandbox_given is True
    with pytest.raises(PermissionDenied) as caught:
        await worker.call_tool(tool_call())
    assert caught.value.message == "Permission denied: tools:lookup"
    assert (await worker.call_tool(tool_call(name="other"))).source == "other"


# --- nodes that are not registered --------------------------------------------------------------


@pytest.mark.parametrize(
    "request_body",
    [
        pytest.param({"operation": "discover"}, id="valid"),
        pytest.param({"operation": "nope"}, id="invalid"),
        pytest.param(None, id="none"),
    ],
)
async def test_call_mcp_without_mcp_is_not_found(request_body: Any) -> None:
    worker = InteractionWorker(sandbox=Sandbox(mcp=["*"]))
    with pytest.raises(NotFound) as caught:
        await worker.call_mcp(request_body)
    assert caught.value.message == "No available Worker implements INTERACTION.ACT.MCP"
    assert caught.value.code == "NOT_FOUND"
    assert caught.value.status == 404


@pytest.mark.parametrize(
    "request_body",
    [
        pytest.param(
            {"deliveryId": "d", "message": {"role": "user", "content": "x"}}, id="valid"
        ),
        pytest.param({"deliveryId": ""}, id="invalid"),
        pytest.param(None, id="none"),
    ],
)
async def test_deliver_without_a_sink_is_not_found(request_body: Any) -> None:
    with pytest.raises(NotFound) as caught:
        await InteractionWorker().deliver(request_body)
    assert caught.value.message == "No available Worker implements INTERACTION.OUTPUT"


# --- call_tool ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({}, id="no-call"),
        pytest.param({"call": None}, id="null-call"),
        pytest.param({"call": []}, id="list-call"),
        pytest.param({"call": "lookup"}, id="string-call"),
        pytest.param(None, id="no-body"),
        pytest.param([tool_call()], id="list-body"),
        pytest.param(tool_call()["call"], id="bare-call-without-envelope"),
    ],
)
async def test_call_tool_needs_a_call_object(body: Any) -> None:
    tool = Lookup()
    worker = InteractionWorker(tools=[tool], sandbox=Sandbox(tools=["*"]))
    with pytest.raises(InvalidInput) as caught:
        await worker.call_tool(body)
    assert caught.value.message == "call must be an object"
    assert tool.executed == []


async def test_call_tool_validate_error() -> None:
    tool = Lookup()
    worker = InteractionWorker(tools=[tool], sandbox=Sandbox(tools=["lookup"]))
    with pytest.raises(InvalidInput) as caught:
        await worker.call_tool(tool_call(query=5))
    assert caught.value.message == "query must be a string"
    assert tool.executed == []


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(tool_call(), id="dict"),
        pytest.param(
            ToolCallRequest(
                call=ToolCall(id="c-1", name="lookup", arguments={"query": "A-1"})
            ),
            id="model",
        ),
    ],
)
async def test_call_tool(body: Any) -> None:
    worker = InteractionWorker(tools=[Lookup()], sandbox=Sandbox(tools=["lookup"]))
    result = await worker.call_tool(body)
    assert isinstance(result, ExternalResult)
    assert result.to_wire() == {
        "callId": "c-1",
        "source": "lookup",
        "status": "success",
        "structuredContent": {"found": True},
    }


async def test_call_tool_passes_a_given_context() -> None:
    seen: list[ToolContext] = []

    class Spy(Lookup):
        async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
            seen.append(context)
            return await super().execute(arguments, context)

    sandbox = Sandbox(tools=["*"])
    worker = InteractionWorker(tools=[Spy()], sandbox=sandbox)
    await worker.call_tool(tool_call())
    context = ToolContext("given", sandbox, deadline=1.0)
    await worker.call_tool(tool_call(), context=context)
    assert seen[0].call_id == "c-1"
    assert seen[0].sandbox is sandbox
    assert seen[1] is context


# --- observe end to end -------------------------------------------------------------------------


async def test_call_then_observe_a_success() -> None:
    worker = InteractionWorker(tools=[Lookup()], sandbox=Sandbox(tools=["lookup"]))
    result = await worker.call_tool(tool_call())
    for body in ({"result": result.to_wire()}, ObserveRequest(result=result)):
        observation = worker.observe(body)
        assert isinstance(observation, Observation)
        assert observation.to_wire() == {
            "callId": "c-1",
            "source": "lookup",
            "status": "success",
            "message": {
                "role": "tool",
                "name": "lookup",
                "content": [{"type": "json", "data": {"found": True}}],
            },
            "structuredContent": {"found": True},
        }


async def test_call_then_observe_a_failure() -> None:
    worker = InteractionWorker(tools=[Lookup()], sandbox=Sandbox(tools=["lookup"]))
    result = await worker.call_tool(tool_call(query="missing", call_id="c-2"))
    assert result.status == "failed"
    observation = worker.observe({"result": result.to_wire()})
    assert observation.to_wire() == {
        "callId": "c-2",
        "source": "lookup",
        "status": "failed",
        "message": {
            "role": "tool",
            "name": "lookup",
            "content": [
                {"type": "text", "text": "failed: NO_MATCH: No match"},
                {"type": "text", "text": "no rows"},
            ],
        },
        "error": {"code": "NO_MATCH", "message": "No match"},
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param({}, "External result is required", id="no-result"),
        pytest.param(None, "External result is required", id="no-body"),
        pytest.param(
            {"result": {"callId": "c", "source": "s", "status": "timeout"}},
            "Interaction error is required",
            id="timeout-without-error",
        ),
    ],
)
def test_observe_refuses_an_invalid_result(body: Any, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        InteractionWorker().observe(body)
    assert caught.value.message == message


async def test_observe_needs_no_permission() -> None:
    observation = InteractionWorker().observe(
        {
            "result": {
                "callId": "c",
                "source": "anything",
                "status": "success",
                "content": "x",
            }
        }
    )
    assert observation.message.content == "x"


async def test_deliver_end_to_end() -> None:
    sink = Collect()
    worker = InteractionWorker(output=sink)
    receipt = await worker.deliver(
        {"deliveryId": "d-1", "message": {"role": "assistant", "content": "Done."}}
    )
    assert receipt.to_wire() == {"deliveryId": "d-1", "status": "accepted"}
    assert [request.delivery_id for request in sink.calls] == ["d-1"]
