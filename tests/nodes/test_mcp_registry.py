"""McpRegistry: limits, registration, input before permission before existence, invoke and discover
(reference sections 2.6 and 4; wire.md section 4)."""

import json
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from interaction_worker import (
    ConfigurationError,
    InteractionError,
    InteractionWorker,
    McpClient,
    McpConnectionLost,
    McpProtocolError,
    McpRegistry,
    McpTimeout,
    McpToolPage,
    McpToolResult,
    McpUnavailable,
    Reference,
    RegistrationError,
    Sandbox,
)
from interaction_worker.contracts import (
    McpDiscoverOutput,
    McpInvokeInput,
    McpInvokeOutput,
    ToolCall,
)
from interaction_worker.errors import (
    InteractionWorkerError,
    InvalidInput,
    InvalidResult,
    NotFound,
    PermissionDenied,
    Timeout,
    Unavailable,
)
from interaction_worker.nodes.mcp_registry import MCP_TOOL_ERROR

SCHEMA: dict[str, Any] = {"type": "object"}
ALL = Sandbox(mcp=["*"])
# What the double raises: server text that must never reach a result or an error message.
LEAK = "secret sk-abc at /srv/mcp/server.py"


class FakeMcpClient:
    """A double of our McpClient protocol: scripted answers, and a record of every call.

    `pages` answers `list_tools` in order, `results` answers `call_tool` in order; an exception in
    either list is raised instead of returned. Pages may be `McpToolPage` objects or raw mappings, so
    a test can send malformed pages no real server would.
    """

    def __init__(
        self, *, pages: list[Any] | None = None, results: list[Any] | None = None
    ) -> None:
        self.pages = list(pages or [])
        self.results = list(results or [])
        self.calls: list[tuple[str, Any]] = []

    @property
    def cursors(self) -> list[str | None]:
        return [cursor for kind, cursor in self.calls if kind == "list_tools"]

    async def list_tools(self, cursor: str | None = None) -> Any:
        self.calls.append(("list_tools", cursor))
        assert self.pages, "list_tools called more often than scripted"
        return _answer(self.pages.pop(0))

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        self.calls.append(("call_tool", (name, arguments)))
        assert self.results, "call_tool called more often than scripted"
        return _answer(self.results.pop(0))


def _answer(item: Any) -> Any:
    if isinstance(item, BaseException):
        raise item
    return item


def tool(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "inputSchema": SCHEMA, **fields}


def page(*names: str, cursor: str | None = None) -> McpToolPage:
    return McpToolPage(tools=[tool(name) for name in names], next_cursor=cursor)


def registry(**clients: McpClient) -> McpRegistry:
    mcp = McpRegistry()
    for server, client in clients.items():
        mcp.register(server, client)
    return mcp


@contextmanager
def raises(kind: type[Exception], message: str) -> Iterator[None]:
    """The exact class and the exact message."""
    with pytest.raises(kind, match=f"^{re.escape(message)}$") as caught:
        yield
    assert type(caught.value) is kind


def invoke(
    server: str = "files", name: str = "read", arguments: Any = None
) -> dict[str, Any]:
    call = {"id": "c-1", "name": name, "arguments": arguments or {"path": "a"}}
    return {"operation": "invoke", "server": server, "call": call}


async def invoke_result(response: Any) -> dict[str, Any]:
    """The wire form of the ExternalResult that `response` from the server becomes."""
    output = await registry(files=FakeMcpClient(results=[response])).execute(
        invoke(), ALL
    )
    assert isinstance(output, McpInvokeOutput)
    return output.result.to_wire()


async def discover(
    mcp: McpRegistry, sandbox: Sandbox = ALL, **fields: Any
) -> list[dict[str, Any]]:
    output = await mcp.execute({"operation": "discover", **fields}, sandbox)
    assert isinstance(output, McpDiscoverOutput)
    return [capability.to_wire() for capability in output.capabilities]


# --- limits -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(0, id="zero"),
        pytest.param(-1, id="negative"),
        pytest.param(1.5, id="float"),
        pytest.param(1.0, id="integral-float"),
        pytest.param(True, id="bool"),
        pytest.param("3", id="string"),
        pytest.param(2**53, id="unsafe-integer"),
    ],
)
@pytest.mark.parametrize("key", ["max_discovery_pages", "max_capabilities"])
def test_invalid_discovery_limits_are_refused(key: str, value: Any) -> None:
    with raises(ConfigurationError, "MCP discovery limits must be positive integers"):
        McpRegistry(**{key: value})


def test_limits_default_and_accept_the_largest_safe_integer() -> None:
    default = McpRegistry()
    assert (default.max_discovery_pages, default.max_capabilities) == (100, 1000)
    largest = McpRegistry(max_discovery_pages=2**53 - 1, max_capabilities=1)
    assert (largest.max_discovery_pages, largest.max_capabilities) == (2**53 - 1, 1)


# --- register ---------------------------------------------------------------------------------


@pytest.mark.parametrize("server", ["", "  ", "\u00a0\u2028", None, 5])
def test_register_refuses_a_blank_server(server: Any) -> None:
    with raises(RegistrationError, "server must be a nonempty string"):
        McpRegistry().register(server, FakeMcpClient())


def test_register_refuses_a_server_name_longer_than_an_id() -> None:
    mcp = McpRegistry()
    mcp.register("s" * 256, FakeMcpClient())
    with raises(RegistrationError, "server must be 1 to 256 characters"):
        mcp.register("s" * 257, FakeMcpClient())


def test_register_refuses_a_duplicate_server() -> None:
    mcp = registry(x=FakeMcpClient())
    with raises(RegistrationError, "Duplicate MCP server: x"):
        mcp.register("x", FakeMcpClient())


def test_unregister_removes_only_its_own_client_once() -> None:
    first, second = FakeMcpClient(), FakeMcpClient()
    mcp = McpRegistry()
    unregister_first = mcp.register("x", first)
    mcp.register("y", FakeMcpClient())
    assert mcp.servers() == ["x", "y"]

    assert unregister_first() is True
    assert unregister_first() is False
    assert mcp.servers() == ["y"]
    assert mcp.get("x") is None

    unregister_second = mcp.register("x", second)
    assert unregister_first() is False  # the name now belongs to another client
    assert mcp.get("x") is second
    assert mcp.servers() == ["y", "x"]
    assert unregister_second() is True
    assert first.calls == second.calls == []  # nothing is closed or called


# --- input errors come before any client call ---------------------------------------------------

LONG = "x" * 257
INPUT_ERRORS = [
    pytest.param(None, "MCP input must be an object", id="input-null"),
    pytest.param([], "MCP input must be an object", id="input-list"),
    pytest.param("discover", "MCP input must be an object", id="input-string"),
    pytest.param({}, "Invalid MCP operation", id="operation-missing"),
    pytest.param({"operation": None}, "Invalid MCP operation", id="operation-null"),
    pytest.param(
        {"operation": "list"}, "Invalid MCP operation", id="operation-unknown"
    ),
    pytest.param(
        {"operation": "Discover"}, "Invalid MCP operation", id="operation-case"
    ),
    pytest.param(
        {"operation": "discover", "server": None},
        "server must be a nonempty string",
        id="discover-server-null",
    ),
    pytest.param(
        {"operation": "discover", "server": " "},
        "server must be a nonempty string",
        id="discover-server-blank",
    ),
    pytest.param(
        {"operation": "discover", "server": 1},
        "server must be a nonempty string",
        id="discover-server-number",
    ),
    pytest.param(
        {"operation": "discover", "server": LONG},
        "server must be 1 to 256 characters",
        id="discover-server-too-long",
    ),
    pytest.param(
        {"operation": "invoke", "call": invoke()["call"]},
        "server must be a nonempty string",
        id="invoke-server-missing",
    ),
    pytest.param(
        {**invoke(), "server": ""},
        "server must be a nonempty string",
        id="invoke-server-empty",
    ),
    pytest.param(
        {"operation": "invoke", "server": "files"},
        "call must be an object",
        id="call-missing",
    ),
    pytest.param({**invoke(), "call": None}, "call must be an object", id="call-null"),
    pytest.param({**invoke(), "call": []}, "call must be an object", id="call-list"),
    pytest.param(
        {**invoke(), "call": "read"}, "call must be an object", id="call-string"
    ),
    pytest.param(
        {**invoke(), "call": {"name": "read", "arguments": {}}},
        "call.id must be a nonempty string",
        id="call-id-missing",
    ),
    pytest.param(
        {**invoke(), "call": {"id": " ", "name": "read", "arguments": {}}},
        "call.id must be a nonempty string",
        id="call-id-blank",
    ),
    pytest.param(
        {**invoke(), "call": {"id": 7, "name": "read", "arguments": {}}},
        "call.id must be a nonempty string",
        id="call-id-number",
    ),
    pytest.param(
        {**invoke(), "call": {"id": LONG, "name": "read", "arguments": {}}},
        "call.id must be 1 to 256 characters",
        id="call-id-too-long",
    ),
    pytest.param(
        {**invoke(), "call": {"id": "c", "arguments": {}}},
        "call.name must be a nonempty string",
        id="call-name-missing",
    ),
    pytest.param(
        {**invoke(), "call": {"id": "c", "name": "", "arguments": {}}},
        "call.name must be a nonempty string",
        id="call-name-empty",
    ),
    pytest.param(
        {**invoke(), "call": {"id": "c", "name": "read"}},
        "call.arguments must be an object",
        id="arguments-missing",
    ),
    pytest.param(
        {**invoke(), "call": {"id": "c", "name": "read", "arguments": None}},
        "call.arguments must be an object",
        id="arguments-null",
    ),
    pytest.param(
        {**invoke(), "call": {"id": "c", "name": "read", "arguments": ["a"]}},
        "call.arguments must be an object",
        id="arguments-list",
    ),
    pytest.param(
        {**invoke(), "call": {"id": "c", "name": "read", "arguments": "a=1"}},
        "call.arguments must be an object",
        id="arguments-string",
    ),
    pytest.param(
        {**invoke(), "call": {"id": "c", "name": "read", "arguments": {"n": math.inf}}},
        "call.arguments.n must be JSON-serializable",
        id="arguments-infinity",
    ),
]


@pytest.mark.parametrize(("value", "message"), INPUT_ERRORS)
async def test_invalid_input_is_refused_before_any_client_call(
    value: Any, message: str
) -> None:
    client = FakeMcpClient(pages=[page("read")], results=[{"content": "x"}])
    with raises(InvalidInput, message):
        await registry(files=client).execute(value, ALL)
    assert client.calls == []


async def test_input_errors_come_before_permission() -> None:
    with raises(InvalidInput, "call must be an object"):
        await registry().execute({"operation": "invoke", "server": "ghost"}, Sandbox())


# --- permission before existence ----------------------------------------------------------------


@pytest.mark.parametrize(
    "request_body",
    [
        pytest.param(invoke("ghost"), id="invoke"),
        pytest.param({"operation": "discover", "server": "ghost"}, id="discover"),
    ],
)
async def test_an_unknown_unpermitted_server_is_denied(request_body: Any) -> None:
    mcp = registry(files=FakeMcpClient())
    with raises(PermissionDenied, "Permission denied: mcp:ghost"):
        await mcp.execute(request_body, Sandbox(mcp=["files"]))


@pytest.mark.parametrize(
    "request_body",
    [
        pytest.param(invoke("ghost"), id="invoke"),
        pytest.param({"operation": "discover", "server": "ghost"}, id="discover"),
    ],
)
@pytest.mark.parametrize("grant", [["ghost"], ["*"]])
async def test_an_unknown_permitted_server_is_not_found(
    request_body: Any, grant: list[str]
) -> None:
    with raises(NotFound, "Unknown MCP server: ghost"):
        await registry(files=FakeMcpClient()).execute(request_body, Sandbox(mcp=grant))


async def test_a_registered_unpermitted_server_is_denied_without_a_call() -> None:
    client = FakeMcpClient(pages=[page("read")], results=[{"content": "x"}])
    mcp = registry(files=client)
    with raises(PermissionDenied, "Permission denied: mcp:files"):
        await mcp.execute(invoke(), Sandbox(mcp=["docs"]))
    with raises(PermissionDenied, "Permission denied: mcp:files"):
        await mcp.execute({"operation": "discover"}, Sandbox())
    assert client.calls == []


# --- invoke -----------------------------------------------------------------------------------


async def test_invoke_passes_a_shallow_copy_and_names_the_result() -> None:
    nested = {"depth": 1}
    arguments = {"path": "a.txt", "options": nested}
    content = [{"type": "text", "text": "hello"}]
    client = FakeMcpClient(results=[{"content": content}])

    output = await registry(files=client).execute(
        invoke(arguments=arguments), Sandbox(mcp=["files"])
    )

    [(kind, (name, sent))] = client.calls
    assert (kind, name) == ("call_tool", "read")
    assert sent == arguments
    assert sent is not arguments
    assert sent["options"] is nested
    assert isinstance(output, McpInvokeOutput)
    assert output.to_wire() == {
        "operation": "invoke",
        "result": {
            "callId": "c-1",
            "source": "files:read",
            "status": "success",
            "content": content,
        },
    }


async def test_invoke_takes_our_tool_result_dataclass() -> None:
    result = await invoke_result(
        McpToolResult(
            structured_content={"lines": 3},
            references=[{"uri": "file://a.txt"}],
            is_error=False,
        )
    )
    assert result == {
        "callId": "c-1",
        "source": "files:read",
        "status": "success",
        "structuredContent": {"lines": 3},
        "references": [{"uri": "file://a.txt"}],
    }


async def test_invoke_takes_a_mapping_with_the_dataclass_field_names() -> None:
    failed = await invoke_result({"is_error": True, "content": "boom"})
    assert failed["status"] == "failed"
    assert failed["error"] == MCP_TOOL_ERROR.to_wire()
    success = await invoke_result({"structured_content": {"ok": True}})
    assert success["structuredContent"] == {"ok": True}


async def test_invoke_takes_a_model_result() -> None:
    class SdkLikeResult(BaseModel):
        model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True)

        content: list[dict[str, Any]]
        is_error: bool = False

    result = await invoke_result(
        SdkLikeResult(content=[{"type": "text", "text": "x"}], is_error=True)
    )
    assert result["status"] == "failed"
    assert result["content"] == [{"type": "text", "text": "x"}]
    assert result["error"] == MCP_TOOL_ERROR.to_wire()


async def test_is_error_without_an_error_fails_with_mcp_tool_error() -> None:
    result = await invoke_result({"isError": True})
    assert result == {
        "callId": "c-1",
        "source": "files:read",
        "status": "failed",
        "error": {
            "code": "MCP_TOOL_ERROR",
            "message": "MCP tool reported an execution error",
        },
    }
    assert "retryable" not in json.dumps(result)


@pytest.mark.parametrize(
    "error",
    [
        pytest.param({"code": "E", "message": "Bearer abc"}, id="bearer"),
        pytest.param({"code": "E", "message": "key sk-abc1"}, id="sk-key"),
        pytest.param({"code": "E", "message": "at /etc/passwd"}, id="path"),
        pytest.param({"code": "bad code", "message": "m"}, id="bad-code"),
        pytest.param({"code": "E", "message": "m", "retryable": "no"}, id="retryable"),
        pytest.param("boom", id="string"),
        pytest.param(None, id="null"),
    ],
)
async def test_is_error_with_an_invalid_error_is_replaced_silently(
    error: Any,
) -> None:
    content = [{"type": "text", "text": "partial output"}]
    result = await invoke_result({"isError": True, "error": error, "content": content})
    assert result["status"] == "failed"
    assert result["error"] == MCP_TOOL_ERROR.to_wire()
    assert result["content"] == content


async def test_is_error_with_a_safe_error_keeps_its_projection() -> None:
    error = {"code": "FILE_MISSING", "message": "No such file", "retryable": False}
    result = await invoke_result(
        {
            "isError": True,
            "error": {**error, "stack": "at x (y.ts:1:2)", "token": "t"},
            "structuredContent": {"exit": 1},
        }
    )
    assert result == {
        "callId": "c-1",
        "source": "files:read",
        "status": "failed",
        "structuredContent": {"exit": 1},
        "error": error,
    }


async def test_is_error_with_a_model_error_keeps_it() -> None:
    error = InteractionError(code="DISK_FULL", message="Disk full", retryable=True)
    result = await invoke_result(McpToolResult(is_error=True, error=error))
    assert result["error"] == {
        "code": "DISK_FULL",
        "message": "Disk full",
        "retryable": True,
    }


async def test_models_inside_a_result_become_wire_mappings() -> None:
    reference = Reference(uri="file://a.txt", media_type="text/plain")
    result = await invoke_result({"content": "x", "references": [reference]})
    assert result["references"] == [{"uri": "file://a.txt", "mediaType": "text/plain"}]


async def test_a_mapping_prefers_the_wire_names() -> None:
    result = await invoke_result({"isError": False, "is_error": True, "content": "x"})
    assert result["status"] == "success"


async def test_cyclic_content_is_an_invalid_result() -> None:
    content: list[Any] = []
    content.append(content)
    with raises(InvalidResult, "content.0 must not contain a cycle"):
        await invoke_result({"content": content})


async def test_a_success_keeps_a_safe_error() -> None:
    result = await invoke_result(
        {"content": "x", "error": {"code": "W", "message": "m"}}
    )
    assert result["status"] == "success"
    assert result["error"] == {"code": "W", "message": "m"}


@pytest.mark.parametrize(
    "response",
    [
        pytest.param(
            {
                "isError": False,
                "content": "x",
                "error": {"code": "E", "message": "Bearer abc"},
            },
            id="is-error-false",
        ),
        pytest.param(
            {"content": "x", "error": {"code": "E", "message": "Bearer abc"}},
            id="is-error-absent",
        ),
    ],
)
async def test_a_success_with_an_unsafe_error_is_an_invalid_result(
    response: Any,
) -> None:
    with raises(InvalidResult, "Unsafe interaction error message"):
        await invoke_result(response)


@pytest.mark.parametrize(
    "response",
    [
        pytest.param({}, id="empty"),
        pytest.param({"isError": False}, id="is-error-false"),
        pytest.param([], id="array"),
        pytest.param(McpToolResult(), id="empty-dataclass"),
    ],
)
async def test_a_success_without_content_is_an_invalid_result(response: Any) -> None:
    with raises(InvalidResult, "Successful external result has no content"):
        await invoke_result(response)


@pytest.mark.parametrize(
    "response",
    [
        pytest.param({"content": None}, id="content-null"),
        pytest.param({"content": ""}, id="content-empty"),
        pytest.param({"references": []}, id="references-empty"),
    ],
)
async def test_present_but_empty_content_counts_as_content(response: Any) -> None:
    assert (await invoke_result(response))["status"] == "success"


@pytest.mark.parametrize("is_error", ["true", 1, 0, None, []])
async def test_a_non_boolean_is_error_is_an_invalid_result(is_error: Any) -> None:
    with raises(InvalidResult, "Invalid MCP isError"):
        await invoke_result({"isError": is_error, "content": "x"})


@pytest.mark.parametrize("response", [None, "ok", 3, True])
async def test_a_non_object_response_is_an_invalid_result(response: Any) -> None:
    with raises(InvalidResult, "Invalid MCP tool result"):
        await invoke_result(response)


@pytest.mark.parametrize(
    ("response", "message"),
    [
        pytest.param(
            {"content": math.nan}, "content must be JSON-serializable", id="nan"
        ),
        pytest.param({"references": "x"}, "references must be an array", id="refs"),
        pytest.param(
            {"references": [{}]}, "reference.uri must be a nonempty string", id="uri"
        ),
    ],
)
async def test_a_result_that_breaks_the_contract_is_an_invalid_result(
    response: Any, message: str
) -> None:
    with raises(InvalidResult, message):
        await invoke_result(response)


@pytest.mark.parametrize(
    ("failure", "status", "code", "retryable"),
    [
        pytest.param(
            McpUnavailable, "failed", "MCP_UNAVAILABLE", True, id="unavailable"
        ),
        pytest.param(McpTimeout, "timeout", "MCP_TIMEOUT", False, id="timeout"),
        pytest.param(
            McpConnectionLost, "unknown", "MCP_CONNECTION_LOST", False, id="lost"
        ),
        pytest.param(McpProtocolError, "failed", "MCP_ERROR", False, id="protocol"),
    ],
)
async def test_client_failures_on_invoke_become_results_without_server_text(
    failure: type[Exception], status: str, code: str, retryable: bool
) -> None:
    result = await invoke_result(failure(LEAK))
    error = result.pop("error")
    assert result == {"callId": "c-1", "source": "files:read", "status": status}
    assert (error["code"], error["retryable"]) == (code, retryable)
    assert set(error) == {"code", "message", "retryable"}
    assert "sk-abc" not in json.dumps(error)
    assert "secret" not in error["message"]


async def test_other_client_exceptions_propagate() -> None:
    with pytest.raises(RuntimeError):
        await invoke_result(RuntimeError(LEAK))


async def test_invoke_accepts_the_validated_model() -> None:
    client = FakeMcpClient(results=[{"content": "x"}])
    request = McpInvokeInput(
        server="files", call=ToolCall(id="c-9", name="read", arguments={"a": 1})
    )
    output = await registry(files=client).invoke(request, ALL)
    assert output.result.call_id == "c-9"
    assert client.calls == [("call_tool", ("read", {"a": 1}))]


# --- discover ---------------------------------------------------------------------------------


async def test_discover_lists_every_server_in_registration_order_and_pages_in_order() -> (
    None
):
    docs = FakeMcpClient(pages=[page("search")])
    files = FakeMcpClient(pages=[page("read", "stat", cursor="2"), page("write")])
    mcp = registry(docs=docs, files=files)

    capabilities = await discover(mcp)

    assert [(c["server"], c["name"]) for c in capabilities] == [
        ("docs", "search"),
        ("files", "read"),
        ("files", "stat"),
        ("files", "write"),
    ]
    assert capabilities[0] == {
        "server": "docs",
        "name": "search",
        "inputSchema": SCHEMA,
    }
    assert docs.cursors == [None]
    assert files.cursors == [None, "2"]


async def test_discover_of_one_server_asks_only_that_server() -> None:
    docs = FakeMcpClient(pages=[page("search")])
    files = FakeMcpClient(pages=[page("read")])
    capabilities = await discover(registry(docs=docs, files=files), server="files")
    assert [c["name"] for c in capabilities] == ["read"]
    assert docs.calls == []


async def test_discover_with_no_servers_is_empty() -> None:
    assert await discover(McpRegistry()) == []


async def test_discover_of_all_servers_raises_for_a_denied_one() -> None:
    denied = FakeMcpClient(pages=[page("write")])
    mcp = registry(files=FakeMcpClient(pages=[page("read")]), admin=denied)
    with raises(PermissionDenied, "Permission denied: mcp:admin"):
        await discover(mcp, Sandbox(mcp=["files"]))
    assert denied.calls == []


async def test_discover_keeps_descriptions_and_output_schemas() -> None:
    output_schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    first = tool("count", description="Count lines", outputSchema=output_schema)
    client = FakeMcpClient(pages=[{"tools": [first, tool("plain")]}])
    capabilities = await discover(registry(files=client))
    assert capabilities == [
        {
            "server": "files",
            "name": "count",
            "description": "Count lines",
            "inputSchema": SCHEMA,
            "outputSchema": output_schema,
        },
        {"server": "files", "name": "plain", "inputSchema": SCHEMA},
    ]


async def test_discover_drops_a_description_that_is_not_a_string() -> None:
    client = FakeMcpClient(pages=[{"tools": [tool("read", description=5)]}])
    assert await discover(registry(files=client)) == [
        {"server": "files", "name": "read", "inputSchema": SCHEMA}
    ]


async def test_discover_drops_unknown_tool_keys() -> None:
    client = FakeMcpClient(pages=[{"tools": [tool("read", annotations={"x": 1})]}])
    assert await discover(registry(files=client)) == [
        {"server": "files", "name": "read", "inputSchema": SCHEMA}
    ]


@pytest.mark.parametrize(
    "pages",
    [
        pytest.param(
            [{"tools": [tool("a")], "nextCursor": "2"}, {"tools": [tool("b")]}],
            id="camel-case",
        ),
        pytest.param(
            [{"tools": [tool("a")], "next_cursor": "2"}, {"tools": [tool("b")]}],
            id="snake-case",
        ),
    ],
)
async def test_discover_follows_cursors_in_mapping_pages(pages: list[Any]) -> None:
    client = FakeMcpClient(pages=pages)
    assert [c["name"] for c in await discover(registry(files=client))] == ["a", "b"]
    assert client.cursors == [None, "2"]


async def test_exactly_max_pages_succeed_and_one_more_cursor_fails() -> None:
    three = [page("a", cursor="2"), page("b", cursor="3"), page("c")]
    client = FakeMcpClient(pages=three)
    mcp = McpRegistry(max_discovery_pages=3)
    mcp.register("files", client)
    assert [c["name"] for c in await discover(mcp)] == ["a", "b", "c"]

    client = FakeMcpClient(pages=[*three[:2], page("c", cursor="4"), page("d")])
    mcp = McpRegistry(max_discovery_pages=3)
    mcp.register("files", client)
    with raises(InvalidResult, "MCP discovery page limit exceeded"):
        await discover(mcp)
    assert client.cursors == [None, "2", "3"]  # checked before fetching the fourth


async def test_the_page_budget_is_shared_by_the_servers_of_one_request() -> None:
    def two_pages() -> FakeMcpClient:
        return FakeMcpClient(pages=[page("a", cursor="2"), page("b")])

    mcp = McpRegistry(max_discovery_pages=3)
    first, second = two_pages(), two_pages()
    mcp.register("one", first)
    mcp.register("two", second)
    with raises(InvalidResult, "MCP discovery page limit exceeded"):
        await discover(mcp)
    assert (first.cursors, second.cursors) == ([None, "2"], [None])

    mcp = McpRegistry(max_discovery_pages=4)
    mcp.register("one", two_pages())
    mcp.register("two", two_pages())
    assert len(await discover(mcp)) == 4


async def test_the_budget_is_per_request() -> None:
    client = FakeMcpClient(pages=[page("a"), page("b")])
    mcp = McpRegistry(max_discovery_pages=1, max_capabilities=1)
    mcp.register("files", client)
    assert [c["name"] for c in await discover(mcp)] == ["a"]
    assert [c["name"] for c in await discover(mcp)] == ["b"]


async def test_the_capability_budget_is_shared_by_the_servers_of_one_request() -> None:
    mcp = McpRegistry(max_capabilities=3)
    mcp.register("one", FakeMcpClient(pages=[page("a", "b")]))
    mcp.register("two", FakeMcpClient(pages=[page("c")]))
    assert len(await discover(mcp)) == 3

    mcp = McpRegistry(max_capabilities=3)
    mcp.register("one", FakeMcpClient(pages=[page("a", "b")]))
    mcp.register("two", FakeMcpClient(pages=[page("c", "d")]))
    with raises(InvalidResult, "MCP capability limit exceeded"):
        await discover(mcp)


async def test_the_capability_limit_is_checked_before_the_tools() -> None:
    mcp = McpRegistry(max_capabilities=1)
    mcp.register("files", FakeMcpClient(pages=[{"tools": [{}, {"name": ""}]}]))
    with raises(InvalidResult, "MCP capability limit exceeded"):
        await discover(mcp)


async def _discover_error(pages: list[Any], message: str) -> None:
    with raises(InvalidResult, message):
        await discover(registry(files=FakeMcpClient(pages=pages)))


@pytest.mark.parametrize(
    "bad_page",
    [
        pytest.param(None, id="null"),
        pytest.param("tools", id="string"),
        pytest.param([tool("a")], id="list"),
        pytest.param({}, id="tools-missing"),
        pytest.param({"tools": None}, id="tools-null"),
        pytest.param({"tools": {"a": tool("a")}}, id="tools-object"),
        pytest.param({"tools": "a"}, id="tools-string"),
        pytest.param(McpToolPage(tools="a"), id="dataclass-tools-string"),  # type: ignore[arg-type]
    ],
)
async def test_an_invalid_page_is_an_invalid_result(bad_page: Any) -> None:
    await _discover_error([bad_page], "Invalid MCP tool page")


async def test_an_invalid_later_page_is_an_invalid_result() -> None:
    await _discover_error(
        [page("a", cursor="2"), {"tools": 1}], "Invalid MCP tool page"
    )


@pytest.mark.parametrize(
    "bad_tool",
    [
        pytest.param({"inputSchema": SCHEMA}, id="missing"),
        pytest.param(tool(""), id="empty"),
        pytest.param(tool(" \t"), id="blank"),
        pytest.param({"name": 5, "inputSchema": SCHEMA}, id="number"),
        pytest.param({"name": None, "inputSchema": SCHEMA}, id="null"),
        pytest.param("read", id="tool-string"),
        pytest.param(None, id="tool-null"),
    ],
)
async def test_a_tool_without_a_name_is_an_invalid_result(bad_tool: Any) -> None:
    await _discover_error(
        [{"tools": [tool("ok"), bad_tool]}], "MCP tool name must be a nonempty string"
    )


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({}, id="missing"),
        pytest.param({"inputSchema": None}, id="null"),
        pytest.param({"inputSchema": []}, id="list"),
        pytest.param({"inputSchema": "object"}, id="string"),
    ],
)
async def test_an_invalid_input_schema_is_an_invalid_result(fields: Any) -> None:
    await _discover_error(
        [{"tools": [{"name": "a", **fields}]}], "Invalid MCP inputSchema"
    )


async def test_an_input_schema_that_is_not_json_is_an_invalid_result() -> None:
    bad = {"name": "a", "inputSchema": {"maximum": math.inf}}
    await _discover_error(
        [{"tools": [bad]}], "MCP inputSchema.maximum must be JSON-serializable"
    )


@pytest.mark.parametrize("output_schema", [None, [], "object"])
async def test_an_invalid_output_schema_is_an_invalid_result(
    output_schema: Any,
) -> None:
    await _discover_error(
        [{"tools": [tool("a", outputSchema=output_schema)]}], "Invalid MCP outputSchema"
    )


async def test_an_output_schema_that_is_not_json_is_an_invalid_result() -> None:
    await _discover_error(
        [{"tools": [tool("a", outputSchema={"x": {1, 2}})]}],
        "MCP outputSchema.x must contain only JSON objects and arrays",
    )


@pytest.mark.parametrize(
    "bad_page",
    [
        pytest.param(McpToolPage(tools=[], next_cursor=""), id="empty"),
        pytest.param(McpToolPage(tools=[], next_cursor=" \n"), id="whitespace"),
        pytest.param({"tools": [], "nextCursor": None}, id="mapping-null"),
        pytest.param({"tools": [], "nextCursor": ""}, id="mapping-empty"),
        pytest.param({"tools": [], "nextCursor": 2}, id="mapping-number"),
    ],
)
async def test_an_invalid_cursor_is_an_invalid_result(bad_page: Any) -> None:
    await _discover_error([bad_page], "MCP cursor must be a nonempty string")


async def test_a_repeated_cursor_is_an_invalid_result() -> None:
    client = FakeMcpClient(
        pages=[page("a", cursor="x"), page("b", cursor="y"), page("c", cursor="x")]
    )
    with raises(InvalidResult, "MCP server repeated a pagination cursor"):
        await discover(registry(files=client))
    assert client.cursors == [None, "x", "y"]


async def test_the_same_cursor_on_two_servers_is_fine() -> None:
    mcp = registry(
        one=FakeMcpClient(pages=[page("a", cursor="next"), page("b")]),
        two=FakeMcpClient(pages=[page("c", cursor="next"), page("d")]),
    )
    assert [c["name"] for c in await discover(mcp)] == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    ("failure", "kind", "status", "message"),
    [
        pytest.param(
            McpUnavailable,
            Unavailable,
            503,
            "MCP server is not connected: files",
            id="unavailable",
        ),
        pytest.param(
            McpConnectionLost,
            Unavailable,
            503,
            "MCP server is not connected: files",
            id="lost",
        ),
        pytest.param(
            McpTimeout, Timeout, 504, "MCP discovery timed out: files", id="timeout"
        ),
        pytest.param(
            McpProtocolError,
            InvalidResult,
            502,
            "MCP server returned an error",
            id="protocol",
        ),
    ],
)
@pytest.mark.parametrize("on_page", [1, 2])
async def test_client_failures_on_discover_are_errors_without_server_text(
    failure: type[Exception],
    kind: type[InteractionWorkerError],
    status: int,
    message: str,
    on_page: int,
) -> None:
    pages: list[Any] = [page("a", cursor="2")] if on_page == 2 else []
    client = FakeMcpClient(pages=[*pages, failure(LEAK)])
    with raises(kind, message):
        await discover(registry(files=client))
    assert kind.status == status
    assert len(client.cursors) == on_page


async def test_a_discover_error_message_never_carries_server_text() -> None:
    client = FakeMcpClient(pages=[McpUnavailable(LEAK)])
    with pytest.raises(Unavailable) as caught:
        await discover(registry(files=client))
    assert "sk-abc" not in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


# --- through the worker -------------------------------------------------------------------------


async def test_the_worker_serves_discover_and_invoke() -> None:
    client = FakeMcpClient(
        pages=[page("read")], results=[McpToolResult(content="hello")]
    )
    worker = InteractionWorker(mcp={"files": client}, sandbox=Sandbox(mcp=["files"]))

    discovered = await worker.call_mcp({"operation": "discover"})
    invoked = await worker.call_mcp(invoke())

    assert discovered.to_wire() == {
        "operation": "discover",
        "capabilities": [{"server": "files", "name": "read", "inputSchema": SCHEMA}],
    }
    assert invoked.to_wire() == {
        "operation": "invoke",
        "result": {
            "callId": "c-1",
            "source": "files:read",
            "status": "success",
            "content": "hello",
        },
    }
    assert client.calls == [
        ("list_tools", None),
        ("call_tool", ("read", {"path": "a"})),
    ]


async def test_the_worker_refuses_an_unpermitted_server() -> None:
    worker = InteractionWorker(mcp={"files": FakeMcpClient()})
    with raises(PermissionDenied, "Permission denied: mcp:files"):
        await worker.call_mcp({"operation": "discover", "server": "files"})


def test_the_double_follows_the_client_protocol() -> None:
    assert isinstance(FakeMcpClient(), McpClient)


# --- optional servers in a discover of all servers ---------------------------------------------


class OptionalMcpClient(FakeMcpClient):
    """The double for a server configured `required: false`."""

    required = False


class RequiredMcpClient(FakeMcpClient):
    required = True


async def discover_reply(mcp: McpRegistry, **fields: Any) -> dict[str, Any]:
    output = await mcp.execute({"operation": "discover", **fields}, ALL)
    assert isinstance(output, McpDiscoverOutput)
    return output.to_wire()


def listed(reply: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["server"], c["name"]) for c in reply["capabilities"]]


# What an optional server may answer instead of its tools, on its first or its second page.
UNANSWERED = [
    pytest.param(McpUnavailable(LEAK), id="down"),
    pytest.param(McpConnectionLost(LEAK), id="lost"),
    pytest.param(McpTimeout(LEAK), id="timed-out"),
    pytest.param(McpProtocolError(LEAK), id="error-answer"),
    pytest.param(
        InvalidResult("Invalid MCP inputSchema"), id="page-the-client-refused"
    ),
    pytest.param({"tools": None}, id="malformed-page"),
    pytest.param({"tools": [tool("")]}, id="unnamed-tool"),
    pytest.param({"tools": [{"name": "a", "inputSchema": []}]}, id="bad-input-schema"),
    pytest.param({"tools": [], "nextCursor": ""}, id="blank-cursor"),
]


@pytest.mark.parametrize("answer", UNANSWERED)
@pytest.mark.parametrize("on_page", [1, 2])
async def test_discover_of_all_names_an_optional_server_that_did_not_answer(
    answer: Any, on_page: int
) -> None:
    first: list[Any] = [page("fetch", cursor="1")] if on_page == 2 else []
    web = OptionalMcpClient(pages=[*first, answer])
    mcp = registry(
        files=FakeMcpClient(pages=[page("read")]),
        web=web,
        docs=OptionalMcpClient(pages=[page("search")]),
    )

    reply = await discover_reply(mcp)

    assert listed(reply) == [("files", "read"), ("docs", "search")]
    assert reply["unavailable"] == ["web"]
    assert len(web.cursors) == on_page
    assert "sk-abc" not in json.dumps(reply)


async def test_an_optional_server_that_repeats_a_cursor_is_named() -> None:
    web = OptionalMcpClient(pages=[page("a", cursor="1"), page("b", cursor="1")])
    mcp = registry(web=web, files=FakeMcpClient(pages=[page("read")]))
    reply = await discover_reply(mcp)
    assert (listed(reply), reply["unavailable"]) == ([("files", "read")], ["web"])
    assert web.cursors == [None, "1"]


async def test_the_reply_has_no_unavailable_servers_when_every_server_answered() -> (
    None
):
    mcp = registry(
        files=FakeMcpClient(pages=[page("read")]),
        web=OptionalMcpClient(pages=[page("fetch")]),
    )
    assert await discover_reply(mcp) == {
        "operation": "discover",
        "capabilities": [
            {"server": "files", "name": "read", "inputSchema": SCHEMA},
            {"server": "web", "name": "fetch", "inputSchema": SCHEMA},
        ],
    }


async def test_every_optional_server_down_leaves_an_empty_list_that_names_them_all() -> (
    None
):
    mcp = registry(
        web=OptionalMcpClient(pages=[McpUnavailable()]),
        docs=OptionalMcpClient(pages=[McpTimeout()]),
    )
    assert await discover_reply(mcp) == {
        "operation": "discover",
        "capabilities": [],
        "unavailable": ["web", "docs"],
    }


@pytest.mark.parametrize(
    "required",
    [
        pytest.param(FakeMcpClient, id="without-the-attribute"),
        pytest.param(RequiredMcpClient, id="required-true"),
    ],
)
async def test_a_required_server_that_is_down_still_fails_the_discover_of_all(
    required: type[FakeMcpClient],
) -> None:
    mcp = registry(
        web=OptionalMcpClient(pages=[McpUnavailable()]),
        files=required(pages=[McpUnavailable(LEAK)]),
    )
    with raises(Unavailable, "MCP server is not connected: files"):
        await discover(mcp)


@pytest.mark.parametrize(
    ("failure", "kind", "message"),
    [
        pytest.param(
            McpUnavailable(), Unavailable, "MCP server is not connected: web", id="down"
        ),
        pytest.param(
            McpTimeout(), Timeout, "MCP discovery timed out: web", id="timed-out"
        ),
        pytest.param(
            {"tools": None}, InvalidResult, "Invalid MCP tool page", id="malformed"
        ),
    ],
)
async def test_an_optional_server_discovered_by_name_still_fails(
    failure: Any, kind: type[InteractionWorkerError], message: str
) -> None:
    mcp = registry(web=OptionalMcpClient(pages=[failure]))
    with raises(kind, message):
        await discover(mcp, server="web")


async def test_the_limits_still_fail_the_request_when_an_optional_server_reaches_them() -> (
    None
):
    mcp = McpRegistry(max_discovery_pages=2)
    mcp.register("files", FakeMcpClient(pages=[page("read")]))
    mcp.register("web", OptionalMcpClient(pages=[page("a", cursor="2"), page("b")]))
    with raises(InvalidResult, "MCP discovery page limit exceeded"):
        await discover(mcp)

    mcp = McpRegistry(max_capabilities=2)
    mcp.register("files", FakeMcpClient(pages=[page("read")]))
    mcp.register("web", OptionalMcpClient(pages=[page("a", "b")]))
    with raises(InvalidResult, "MCP capability limit exceeded"):
        await discover(mcp)


async def test_the_pages_of_a_server_that_failed_count_and_its_tools_do_not() -> None:
    def failing() -> OptionalMcpClient:
        return OptionalMcpClient(pages=[page("a", "b", cursor="2"), McpTimeout()])

    mcp = McpRegistry(max_discovery_pages=2, max_capabilities=2)
    mcp.register("web", failing())
    mcp.register("files", FakeMcpClient(pages=[page("read", "stat")]))
    reply = await discover_reply(mcp)
    assert (listed(reply), reply["unavailable"]) == (
        [("files", "read"), ("files", "stat")],
        ["web"],
    )

    mcp = McpRegistry(max_discovery_pages=2)
    mcp.register("web", failing())
    mcp.register("files", FakeMcpClient(pages=[page("read", cursor="2"), page("x")]))
    with raises(InvalidResult, "MCP discovery page limit exceeded"):
        await discover(mcp)


async def test_an_optional_server_still_needs_the_sandbox_and_its_other_failures_propagate() -> (
    None
):
    denied = OptionalMcpClient(pages=[page("fetch")])
    mcp = registry(files=FakeMcpClient(pages=[page("read")]), web=denied)
    with raises(PermissionDenied, "Permission denied: mcp:web"):
        await discover(mcp, Sandbox(mcp=["files"]))
    assert denied.calls == []

    broken = registry(web=OptionalMcpClient(pages=[RuntimeError("bug")]))
    with pytest.raises(RuntimeError, match="^bug$"):
        await discover(broken)


async def test_the_worker_lists_the_servers_that_answered_and_names_the_others() -> (
    None
):
    worker = InteractionWorker(
        mcp={
            "files": FakeMcpClient(pages=[page("read")]),
            "web": OptionalMcpClient(pages=[McpUnavailable()]),
        },
        sandbox=ALL,
    )
    discovered = await worker.call_mcp({"operation": "discover"})
    assert discovered.to_wire() == {
        "operation": "discover",
        "capabilities": [{"server": "files", "name": "read", "inputSchema": SCHEMA}],
        "unavailable": ["web"],
    }
