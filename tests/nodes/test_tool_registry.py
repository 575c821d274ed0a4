"""ToolRegistry: registration, listing under the sandbox, and `call` in the reference's exact order (section 3)."""

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from pydantic_core import to_json

from interaction_worker import (
    ExternalResult,
    InteractionError,
    RegistrationError,
    Sandbox,
    ToolCall,
    ToolContext,
    ToolRegistry,
)
from interaction_worker.contracts import ToolReturn
from interaction_worker.errors import (
    InvalidInput,
    InvalidResult,
    NotFound,
    PermissionDenied,
)
from interaction_worker.tools import READ_ONLY_COMMANDS, read_only_command_tools

LOOKUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
}
SUCCESS: dict[str, Any] = {"status": "success", "structuredContent": {"found": True}}


class Lookup:
    """A tool that records what the registry does with it."""

    description: str | None = "Find one order"
    input_schema: Mapping[str, Any] = LOOKUP_SCHEMA
    effects: tuple[str, ...] | None = ("read",)
    requires_approval: bool | None = False

    def __init__(
        self,
        name: str = "lookup",
        *,
        outcome: Any = SUCCESS,
        validate_error: BaseException | None = None,
        execute_error: BaseException | None = None,
    ) -> None:
        self.name = name
        self.outcome = outcome
        self.validate_error = validate_error
        self.execute_error = execute_error
        self.events: list[tuple[str, Any]] = []
        self.contexts: list[ToolContext] = []

    def validate(self, arguments: dict[str, Any]) -> None:
        self.events.append(("validate", arguments))
        if self.validate_error is not None:
            raise self.validate_error

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.events.append(("execute", arguments))
        self.contexts.append(context)
        if self.execute_error is not None:
            raise self.execute_error
        return self.outcome


class Bare:
    """A tool with only the required attributes: no description, effects or requires_approval."""

    input_schema: Mapping[str, Any] = {"type": "object"}

    def __init__(self, name: str = "bare") -> None:
        self.name = name

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return {"status": "success", "content": "bare"}


class Strict:
    """The tool of docs/configuration.md 2: validate raises ValueError for a missing query."""

    name = "strict"
    input_schema: Mapping[str, Any] = LOOKUP_SCHEMA

    def __init__(self) -> None:
        self.executed = 0

    def validate(self, arguments: dict[str, Any]) -> None:
        if not isinstance(arguments.get("query"), str):
            raise ValueError("query must be a string")

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.executed += 1
        return {"status": "success", "content": arguments["query"]}


GRANT_ALL = Sandbox(tools=["*"])


def call_of(
    name: str = "lookup", arguments: Any = None, call_id: Any = "call-1"
) -> dict[str, Any]:
    return {
        "id": call_id,
        "name": name,
        "arguments": {"query": "A-1"} if arguments is None else arguments,
    }


# --- register / unregister ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("a", id="one-char"),
        pytest.param("x" * 64, id="64-chars"),
        pytest.param("Read_Text-2", id="all-classes"),
        pytest.param("-", id="dash-only"),
        pytest.param("_", id="underscore-only"),
        pytest.param("0123", id="digits"),
    ],
)
def test_register_accepts_valid_names(name: str) -> None:
    registry = ToolRegistry()
    registry.register(Lookup(name))
    assert registry.names() == [name]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("", id="empty"),
        pytest.param("x" * 65, id="65-chars"),
        pytest.param("has space", id="space"),
        pytest.param("dot.name", id="dot"),
        pytest.param("a/b", id="slash"),
        pytest.param("lookup\n", id="trailing-newline"),
        pytest.param("\nlookup", id="leading-newline"),
        pytest.param("café", id="non-ascii-letter"),
        pytest.param("\u0661", id="non-ascii-digit"),
        pytest.param("ﬁle", id="ligature"),
    ],
)
def test_register_rejects_invalid_names(name: str) -> None:
    registry = ToolRegistry()
    with pytest.raises(RegistrationError) as caught:
        registry.register(Lookup(name))
    assert str(caught.value) == f"Invalid or duplicate tool: {name}"
    assert registry.names() == []


def test_register_rejects_a_non_string_name() -> None:
    tool = Lookup()
    tool.name = 5  # type: ignore[assignment]
    with pytest.raises(RegistrationError) as caught:
        ToolRegistry().register(tool)
    assert str(caught.value) == "Invalid or duplicate tool: 5"


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(lambda first: Lookup(), id="another-object"),
        pytest.param(lambda first: first, id="same-object"),
        pytest.param(lambda first: Bare("lookup"), id="another-class"),
    ],
)
def test_register_rejects_a_duplicate(second: Any) -> None:
    registry = ToolRegistry()
    first = Lookup()
    registry.register(first)
    with pytest.raises(RegistrationError) as caught:
        registry.register(second(first))
    assert str(caught.value) == "Invalid or duplicate tool: lookup"
    assert registry.get("lookup") is first


def test_unregister_is_true_once_then_false() -> None:
    registry = ToolRegistry()
    unregister = registry.register(Lookup())
    assert unregister() is True
    assert registry.get("lookup") is None
    assert unregister() is False
    assert registry.names() == []


def test_unregister_is_false_after_re_registration_with_another_object() -> None:
    registry = ToolRegistry()
    first = Lookup()
    unregister_first = registry.register(first)
    assert unregister_first() is True
    second = Lookup()
    unregister_second = registry.register(second)
    assert unregister_first() is False
    assert registry.get("lookup") is second
    assert unregister_second() is True
    assert registry.names() == []


def test_constructor_registers_in_order_and_rejects_duplicates() -> None:
    assert ToolRegistry([Bare("b"), Lookup("a"), Bare("c")]).names() == ["b", "a", "c"]
    with pytest.raises(RegistrationError) as caught:
        ToolRegistry([Bare("a"), Lookup("a")])
    assert str(caught.value) == "Invalid or duplicate tool: a"


# --- bounds_own_time ----------------------------------------------------------------------------


class OwnTime(Bare):
    def __init__(self, name: str = "own", bounds_own_time: Any = True) -> None:
        super().__init__(name)
        self.bounds_own_time = bounds_own_time


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        pytest.param(OwnTime(), True, id="declared-true"),
        pytest.param(OwnTime(bounds_own_time=False), False, id="declared-false"),
        # Opting out of tool_timeout takes an explicit True, not any truthy value.
        pytest.param(OwnTime(bounds_own_time=1), False, id="truthy-not-true"),
        pytest.param(OwnTime(bounds_own_time="yes"), False, id="string"),
        pytest.param(Bare("own"), False, id="not-declared"),
    ],
)
def test_bounds_own_time_is_what_the_tool_declared(tool: Any, expected: bool) -> None:
    registry = ToolRegistry([tool])
    assert registry.bounds_own_time("own") is expected


def test_bounds_own_time_is_false_for_an_unknown_name() -> None:
    registry = ToolRegistry([OwnTime()])
    assert registry.bounds_own_time("other") is False
    assert ToolRegistry().bounds_own_time("own") is False


def test_bounds_own_time_follows_unregister_and_re_registration() -> None:
    registry = ToolRegistry()
    unregister = registry.register(OwnTime())
    assert registry.bounds_own_time("own") is True
    assert unregister() is True
    assert registry.bounds_own_time("own") is False
    registry.register(Bare("own"))
    assert registry.bounds_own_time("own") is False
    assert unregister() is False  # the stale handle leaves the new tool's flag alone
    registry.register(OwnTime("again"))
    assert registry.bounds_own_time("again") is True


def test_bounds_own_time_is_read_at_registration() -> None:
    tool = OwnTime(bounds_own_time=False)
    registry = ToolRegistry([tool])
    tool.bounds_own_time = True
    assert registry.bounds_own_time("own") is False


def test_the_read_only_commands_bound_their_own_time() -> None:
    registry = ToolRegistry(read_only_command_tools())
    assert all(registry.bounds_own_time(name) for name in READ_ONLY_COMMANDS)
    assert registry.names() == list(READ_ONLY_COMMANDS)


# --- list ---------------------------------------------------------------------------------------


LOOKUP_WIRE = {
    "name": "lookup",
    "inputSchema": LOOKUP_SCHEMA,
    "description": "Find one order",
    "effects": ["read"],
    "requiresApproval": False,
}


@pytest.mark.parametrize(
    ("sandbox", "expected"),
    [
        pytest.param(Sandbox(), [], id="nothing-granted"),
        pytest.param(
            Sandbox(tools=["*"]),
            [
                {"name": "zeta", "inputSchema": {"type": "object"}},
                LOOKUP_WIRE,
                {"name": "alpha", "inputSchema": {"type": "object"}},
            ],
            id="star-insertion-order",
        ),
        pytest.param(
            Sandbox(tools=["alpha", "lookup"]),
            [LOOKUP_WIRE, {"name": "alpha", "inputSchema": {"type": "object"}}],
            id="only-allowed-in-insertion-order",
        ),
        pytest.param(
            Sandbox(tools=["ghost", "alpha"]),
            [{"name": "alpha", "inputSchema": {"type": "object"}}],
            id="unknown-grants-ignored",
        ),
        pytest.param(Sandbox(mcp=["*"]), [], id="other-kind"),
    ],
)
def test_list(sandbox: Sandbox, expected: list[dict[str, Any]]) -> None:
    registry = ToolRegistry([Bare("zeta"), Lookup(), Bare("alpha")])
    assert [definition.to_wire() for definition in registry.list(sandbox)] == expected


def test_list_keeps_falsy_optional_values_and_drops_none() -> None:
    tool = Lookup("flags")
    tool.description = ""
    tool.effects = ()
    empty = Lookup("nones")
    empty.description = None
    empty.effects = None
    empty.requires_approval = None
    registry = ToolRegistry([tool, empty])
    assert [d.to_wire() for d in registry.list(GRANT_ALL)] == [
        {
            "name": "flags",
            "inputSchema": LOOKUP_SCHEMA,
            "description": "",
            "effects": [],
            "requiresApproval": False,
        },
        {"name": "nones", "inputSchema": LOOKUP_SCHEMA},
    ]


def test_list_sees_later_changes() -> None:
    registry = ToolRegistry()
    unregister = registry.register(Bare("a"))
    registry.register(Bare("b"))
    unregister()
    registry.register(Bare("a"))
    assert [d.name for d in registry.list(GRANT_ALL)] == ["b", "a"]


# --- call: order of checks ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(None, "call must be an object", id="none"),
        pytest.param([], "call must be an object", id="list"),
        pytest.param("lookup", "call must be an object", id="string"),
        pytest.param(
            {"name": "ghost", "arguments": 5},
            "call.id must be a nonempty string",
            id="missing-id",
        ),
        pytest.param(
            call_of("ghost", 5, ""), "call.id must be a nonempty string", id="empty-id"
        ),
        pytest.param(
            call_of("ghost", 5, " \u00a0\ufeff"),
            "call.id must be a nonempty string",
            id="blank-id",
        ),
        pytest.param(
            call_of("ghost", 5, 7), "call.id must be a nonempty string", id="int-id"
        ),
        pytest.param(
            call_of("ghost", 5, "x" * 257),
            "call.id must be 1 to 256 characters",
            id="long-id",
        ),
        pytest.param(
            call_of("", 5), "call.name must be a nonempty string", id="empty-name"
        ),
        pytest.param(
            {"id": "c", "arguments": {}},
            "call.name must be a nonempty string",
            id="missing-name",
        ),
    ],
)
async def test_call_id_is_checked_first(call: Any, message: str) -> None:
    """An invalid call (even for an unknown tool, with nothing granted) is INVALID_INPUT about the call."""
    tool = Lookup()
    with pytest.raises(InvalidInput) as caught:
        await ToolRegistry([tool]).call(call, Sandbox())
    assert caught.value.message == message
    assert tool.events == []


async def test_id_of_256_characters_is_accepted() -> None:
    result = await ToolRegistry([Lookup()]).call(call_of(call_id="x" * 256), GRANT_ALL)
    assert result.call_id == "x" * 256


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        pytest.param("ghost", {"query": "x"}, id="unknown-tool"),
        pytest.param("ghost", "not-an-object", id="unknown-tool-bad-arguments"),
        pytest.param("lookup", {"query": "x"}, id="registered-tool"),
        pytest.param("lookup", None, id="registered-tool-bad-arguments"),
    ],
)
async def test_permission_is_checked_before_existence_and_arguments(
    name: str, arguments: Any
) -> None:
    tool = Lookup()
    call = {"id": "c", "name": name, "arguments": arguments}
    with pytest.raises(PermissionDenied) as caught:
        await ToolRegistry([tool]).call(call, Sandbox(tools=["other"]))
    assert caught.value.message == f"Permission denied: tools:{name}"
    assert tool.events == []


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param({"query": "x"}, id="valid-arguments"),
        pytest.param("not-an-object", id="invalid-arguments"),
    ],
)
async def test_existence_is_checked_before_arguments(arguments: Any) -> None:
    with pytest.raises(NotFound) as caught:
        await ToolRegistry([Lookup()]).call(call_of("ghost", arguments), GRANT_ALL)
    assert caught.value.message == "Unknown tool: ghost"
    assert caught.value.code == "NOT_FOUND"


@pytest.mark.parametrize(
    "call",
    [
        pytest.param({"id": "c", "name": "lookup"}, id="missing"),
        pytest.param(call_of(arguments=None) | {"arguments": None}, id="null"),
        pytest.param(call_of(arguments=[]), id="list"),
        pytest.param(call_of(arguments="query=x"), id="string"),
        pytest.param(call_of(arguments=5), id="number"),
        pytest.param(call_of(arguments=True), id="bool"),
    ],
)
async def test_arguments_must_be_an_object_before_validate(
    call: dict[str, Any],
) -> None:
    tool = Lookup()
    with pytest.raises(InvalidInput) as caught:
        await ToolRegistry([tool]).call(call, GRANT_ALL)
    assert caught.value.message == "call.arguments must be an object"
    assert tool.events == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        pytest.param(
            {"tags": {"a", "b"}},
            "call.arguments.tags must contain only JSON objects and arrays",
            id="set",
        ),
        pytest.param(
            {"tags": ("a",)},
            "call.arguments.tags must contain only JSON objects and arrays",
            id="tuple",
        ),
        pytest.param(
            {"n": math.inf}, "call.arguments.n must be JSON-serializable", id="infinity"
        ),
        pytest.param(
            {"n": {"m": math.nan}},
            "call.arguments.n.m must be JSON-serializable",
            id="nested-nan",
        ),
        pytest.param(
            {"f": print}, "call.arguments.f must be JSON-serializable", id="function"
        ),
        pytest.param(
            {"k": {1: "x"}},
            "call.arguments.k must contain only JSON objects and arrays",
            id="int-key",
        ),
    ],
)
async def test_non_json_arguments_are_refused_unless_trusted(
    arguments: dict[str, Any], message: str
) -> None:
    tool = Lookup()
    registry = ToolRegistry([tool])
    with pytest.raises(InvalidInput) as caught:
        await registry.call(call_of(arguments=arguments), GRANT_ALL)
    assert caught.value.message == message
    assert tool.events == []
    # trusted_json skips the JSON-ness walk: the tool sees the value as given.
    await registry.call(call_of(arguments=arguments), GRANT_ALL, trusted_json=True)
    assert tool.events == [("validate", arguments), ("execute", arguments)]


async def test_a_cycle_in_arguments_is_refused() -> None:
    arguments: dict[str, Any] = {"a": {}}
    arguments["a"]["back"] = arguments
    with pytest.raises(InvalidInput) as caught:
        await ToolRegistry([Lookup()]).call(call_of(arguments=arguments), GRANT_ALL)
    assert caught.value.message == "call.arguments.a.back must not contain a cycle"


async def test_a_shared_object_in_arguments_is_not_a_cycle() -> None:
    shared = {"x": 1}
    tool = Lookup()
    await ToolRegistry([tool]).call(
        call_of(arguments={"a": shared, "b": [shared]}), GRANT_ALL
    )
    assert [kind for kind, _ in tool.events] == ["validate", "execute"]


@pytest.mark.parametrize(
    ("error", "message"),
    [
        pytest.param(
            ValueError("query must be a string"),
            "query must be a string",
            id="value-error",
        ),
        pytest.param(TypeError("bad type"), "bad type", id="type-error"),
        pytest.param(KeyError("query"), "'query'", id="key-error-str"),
        pytest.param(
            ValueError("cannot open /etc/passwd"), "Invalid input", id="absolute-path"
        ),
        pytest.param(ValueError("/etc/passwd"), "Invalid input", id="path-only"),
        pytest.param(ValueError("token sk-abc123"), "Invalid input", id="credential"),
        pytest.param(
            ValueError("line one\nline two"), "Invalid input", id="multi-line"
        ),
        pytest.param(
            ValueError("Error at handler (tool.ts:42:7)"),
            "Invalid input",
            id="stack-frame",
        ),
        pytest.param(ValueError(), "Invalid input", id="empty-message"),
        pytest.param(ValueError("x" * 513), "Invalid input", id="too-long"),
    ],
)
async def test_validate_errors_become_invalid_input(
    error: Exception, message: str
) -> None:
    tool = Lookup(validate_error=error)
    with pytest.raises(InvalidInput) as caught:
        await ToolRegistry([tool]).call(call_of(), GRANT_ALL)
    assert caught.value.message == message
    assert caught.value.status == 400
    assert [kind for kind, _ in tool.events] == ["validate"]


async def test_validate_raising_a_wire_error_keeps_it() -> None:
    denied = PermissionDenied("Permission denied: network:https://x.test")
    tool = Lookup(validate_error=denied)
    with pytest.raises(PermissionDenied) as caught:
        await ToolRegistry([tool]).call(call_of(), GRANT_ALL)
    assert caught.value is denied
    assert [kind for kind, _ in tool.events] == ["validate"]


async def test_the_strict_tool_of_the_configuration_example() -> None:
    tool = Strict()
    registry = ToolRegistry([tool])
    with pytest.raises(InvalidInput) as caught:
        await registry.call(call_of("strict", {"query": 5}), GRANT_ALL)
    assert caught.value.message == "query must be a string"
    assert tool.executed == 0
    result = await registry.call(call_of("strict", {"query": "A-1"}), GRANT_ALL)
    assert result.to_wire() == {
        "callId": "call-1",
        "source": "strict",
        "status": "success",
        "content": "A-1",
    }
    assert tool.executed == 1


async def test_validate_then_execute_with_the_same_arguments() -> None:
    tool = Lookup()
    arguments = {"query": "A-1", "nested": {"k": [1, 2]}}
    await ToolRegistry([tool]).call(call_of(arguments=arguments), GRANT_ALL)
    assert tool.events == [("validate", arguments), ("execute", arguments)]


# --- call: results ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        pytest.param(
            {"status": "success", "content": "x"},
            {
                "callId": "call-1",
                "source": "lookup",
                "status": "success",
                "content": "x",
            },
            id="dict",
        ),
        pytest.param(
            {
                "status": "success",
                "content": "x",
                "callId": "forged",
                "source": "forged",
            },
            {
                "callId": "call-1",
                "source": "lookup",
                "status": "success",
                "content": "x",
            },
            id="dict-with-forged-ids",
        ),
        pytest.param(
            MappingProxyType({"status": "success", "references": []}),
            {
                "callId": "call-1",
                "source": "lookup",
                "status": "success",
                "references": [],
            },
            id="read-only-mapping",
        ),
        pytest.param(
            {"status": "success", "content": None},
            {
                "callId": "call-1",
                "source": "lookup",
                "status": "success",
                "content": None,
            },
            id="null-content-counts",
        ),
        pytest.param(
            {"status": "success", "content": ""},
            {
                "callId": "call-1",
                "source": "lookup",
                "status": "success",
                "content": "",
            },
            id="empty-content-counts",
        ),
        pytest.param(
            ToolReturn(status="success", structured_content={"found": True}),
            {
                "callId": "call-1",
                "source": "lookup",
                "status": "success",
                "structuredContent": {"found": True},
            },
            id="tool-outcome-model",
        ),
        pytest.param(
            ExternalResult(
                call_id="other",
                source="other-tool",
                status="failed",
                content="partial",
                error=InteractionError(
                    code="NO_MATCH", message="No match", retryable=False
                ),
            ),
            {
                "callId": "call-1",
                "source": "lookup",
                "status": "failed",
                "content": "partial",
                "error": {
                    "code": "NO_MATCH",
                    "message": "No match",
                    "retryable": False,
                },
            },
            id="external-result-model-with-wrong-ids",
        ),
        pytest.param(
            {
                "status": "timeout",
                "error": {
                    "code": "TOOL_TIMEOUT",
                    "message": "Too slow",
                    "stack": "at x",
                    "token": "t",
                },
                "metadata": ["any", "json"],
            },
            {
                "callId": "call-1",
                "source": "lookup",
                "status": "timeout",
                "error": {"code": "TOOL_TIMEOUT", "message": "Too slow"},
                "metadata": ["any", "json"],
            },
            id="error-projected",
        ),
        pytest.param(
            {
                "status": "success",
                "content": "ok",
                "error": {"code": "WARN", "message": "Partial data"},
            },
            {
                "callId": "call-1",
                "source": "lookup",
                "status": "success",
                "content": "ok",
                "error": {"code": "WARN", "message": "Partial data"},
            },
            id="safe-error-on-success-kept",
        ),
        pytest.param(
            {"status": "success", "references": [{"uri": "file:///a", "extra": 1}]},
            {
                "callId": "call-1",
                "source": "lookup",
                "status": "success",
                "references": [{"uri": "file:///a", "extra": 1}],
            },
            id="reference-extra-kept",
        ),
    ],
)
async def test_call_result(outcome: Any, expected: dict[str, Any]) -> None:
    result = await ToolRegistry([Lookup(outcome=outcome)]).call(call_of(), GRANT_ALL)
    assert isinstance(result, ExternalResult)
    assert result.to_wire() == expected
    # What the bus publishes: the same result as a wire document, serialised to the same bytes.
    document = await ToolRegistry([Lookup(outcome=outcome)]).call_document(
        call_of(), GRANT_ALL
    )
    assert document == expected
    assert to_json(document) == result.to_json()


@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        pytest.param(
            {"status": "success"},
            "Successful external result has no content",
            id="success-empty",
        ),
        pytest.param(
            {"status": "success", "metadata": {"a": 1}},
            "Successful external result has no content",
            id="success-metadata-only",
        ),
        pytest.param(
            ToolReturn(status="success"),
            "Successful external result has no content",
            id="model-success-empty",
        ),
        pytest.param(
            {"status": "failed"}, "Interaction error is required", id="failed-no-error"
        ),
        pytest.param(
            {"status": "cancelled", "content": "x"},
            "Interaction error is required",
            id="cancelled-no-error",
        ),
        pytest.param(
            {"status": "failed", "error": None},
            "Interaction error is required",
            id="null-error",
        ),
        pytest.param(
            {"status": "failed", "error": "boom"},
            "Interaction error is required",
            id="string-error",
        ),
        pytest.param(
            {"status": "ok", "content": "x"},
            "Invalid external result status",
            id="unknown-status",
        ),
        pytest.param(
            {"status": "SUCCESS", "content": "x"},
            "Invalid external result status",
            id="status-case",
        ),
        pytest.param(
            {"content": "x"}, "Invalid external result status", id="no-status"
        ),
        pytest.param({}, "Invalid external result status", id="empty-dict"),
        pytest.param(None, "Invalid external result status", id="none"),
        pytest.param("success", "Invalid external result status", id="string"),
        pytest.param(["success"], "Invalid external result status", id="list"),
        pytest.param(
            {
                "status": "failed",
                "error": {"code": "E", "message": "cannot read /etc/passwd"},
            },
            "Unsafe interaction error message",
            id="unsafe-path",
        ),
        pytest.param(
            {
                "status": "success",
                "content": "x",
                "error": {"code": "E", "message": "Bearer abc"},
            },
            "Unsafe interaction error message",
            id="unsafe-on-success",
        ),
        pytest.param(
            {"status": "failed", "error": {"code": "bad code", "message": "m"}},
            "Invalid error code",
            id="bad-code",
        ),
        pytest.param(
            {"status": "failed", "error": {"code": "E", "message": " "}},
            "error.message must be a nonempty string",
            id="blank-error-message",
        ),
        pytest.param(
            {
                "status": "failed",
                "error": {"code": "E", "message": "m", "retryable": "no"},
            },
            "error.retryable must be boolean",
            id="retryable-string",
        ),
        pytest.param(
            {"status": "success", "content": math.nan},
            "content must be JSON-serializable",
            id="nan-content",
        ),
        pytest.param(
            ToolReturn(status="success", content=math.nan),
            "content must be JSON-serializable",
            id="model-nan-content",
        ),
        pytest.param(
            ToolReturn(status="success", structured_content={"x": [math.inf]}),
            "structuredContent.x.0 must be JSON-serializable",
            id="model-infinite-structured-content",
        ),
        pytest.param(
            {"status": "success", "references": "x"},
            "references must be an array",
            id="references-string",
        ),
        pytest.param(
            {"status": "success", "references": [5]},
            "Invalid reference",
            id="reference-number",
        ),
        pytest.param(
            {"status": "success", "references": [{"uri": ""}]},
            "reference.uri must be a nonempty string",
            id="reference-empty-uri",
        ),
    ],
)
async def test_invalid_results_are_invalid_result(outcome: Any, message: str) -> None:
    tool = Lookup(outcome=outcome)
    with pytest.raises(InvalidResult) as caught:
        await ToolRegistry([tool]).call(call_of(), GRANT_ALL)
    assert caught.value.message == message
    assert caught.value.code == "INVALID_RESULT"
    assert caught.value.status == 502
    assert [kind for kind, _ in tool.events] == ["validate", "execute"]
    with pytest.raises(InvalidResult) as as_document:
        await ToolRegistry([Lookup(outcome=outcome)]).call_document(
            call_of(), GRANT_ALL
        )
    assert as_document.value.message == message


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(RuntimeError("boom at /srv/app"), id="runtime-error"),
        pytest.param(InvalidResult("Tool said no"), id="wire-error"),
        pytest.param(
            PermissionDenied("Permission denied: filesystem:read"), id="permission"
        ),
        pytest.param(
            ValueError("query must be a string"), id="value-error-not-converted"
        ),
    ],
)
async def test_execute_exceptions_propagate_unchanged(error: Exception) -> None:
    with pytest.raises(type(error)) as caught:
        await ToolRegistry([Lookup(execute_error=error)]).call(call_of(), GRANT_ALL)
    assert caught.value is error


# --- call: inputs and context -------------------------------------------------------------------


async def test_call_accepts_a_tool_call_model() -> None:
    tool = Lookup()
    call = ToolCall(id="model-1", name="lookup", arguments={"query": "A-1"})
    result = await ToolRegistry([tool]).call(call, GRANT_ALL)
    assert result.call_id == "model-1"
    assert tool.events == [
        ("validate", {"query": "A-1"}),
        ("execute", {"query": "A-1"}),
    ]


async def test_extra_call_keys_are_ignored() -> None:
    result = await ToolRegistry([Lookup()]).call(call_of() | {"extra": 1}, GRANT_ALL)
    assert result.call_id == "call-1"


async def test_the_context_carries_the_call_id_and_the_sandbox(tmp_path: Any) -> None:
    tool = Lookup()
    sandbox = Sandbox(tools=["lookup"], read=True, workspace=tmp_path)
    await ToolRegistry([tool]).call(call_of(call_id="ctx-1"), sandbox)
    [context] = tool.contexts
    assert isinstance(context, ToolContext)
    assert context.call_id == "ctx-1"
    assert context.sandbox is sandbox
    assert context.workspace == tmp_path
    assert context.deadline is None


async def test_a_given_context_is_passed_as_is() -> None:
    tool = Lookup()
    context = ToolContext("given", GRANT_ALL, deadline=12.5)
    await ToolRegistry([tool]).call(call_of(), GRANT_ALL, context=context)
    assert tool.contexts == [context]
    assert tool.contexts[0] is context


async def test_registry_changes_are_seen_by_call() -> None:
    registry = ToolRegistry()
    with pytest.raises(NotFound):
        await registry.call(call_of(), GRANT_ALL)
    unregister = registry.register(Lookup())
    assert (await registry.call(call_of(), GRANT_ALL)).status == "success"
    unregister()
    with pytest.raises(NotFound) as caught:
        await registry.call(call_of(), GRANT_ALL)
    assert caught.value.message == "Unknown tool: lookup"
