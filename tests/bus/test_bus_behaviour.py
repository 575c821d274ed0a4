"""The wire contract (wire.md sections 1-6, and the Interaction-Reply-To rule of section 7) on a real
nats-server, through both bindings: replies, events, headers, subject keys, error replies and dead letters.
"""

import base64
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from bus_doubles import Kit
from bus_harness import Bus, Sent, Serve, Served, decode, settled
from nats.aio.client import Client
from nats.aio.msg import Msg

from interaction_worker.contracts import is_safe_message
from interaction_worker.contracts import validation as check
from interaction_worker.nodes import observe_external_result
from interaction_worker.subscribers import Kind, is_safe_header_value
from interaction_worker.testing import NatsServerFactory

pytest_plugins = ["bus_fixtures"]

TRACE = {
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "tracestate": "vendor=opaque",
}
# Credentials by name (redacted in dead letters), and headers that are not (copied as they are).
CREDENTIALS = {
    "Authorization": "Bearer abc123",
    "Cookie": "session=s3cret",
    "X-Api-Key": "k-123",
    "x-token": "t-123",
    "Secret-Thing": "s-123",
    "Password": "hunter2",
}
PLAIN = {
    "Nats-Msg-Id": "client-msg-1",
    "Interaction-Key": "client-key",
    "X-Request": "r-1",
}
REQUEST_HEADERS = {**CREDENTIALS, **PLAIN, **TRACE}
REDACTED = {
    **dict.fromkeys(CREDENTIALS, "[redacted]"),
    **PLAIN,
    **TRACE,
}
RECEIVED_AT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
REQUEST_SUBJECT = {
    "tool": "tool.call",
    "mcp": "mcp.call",
    "observe": "observe",
    "output": "output.deliver",
    "list": "tool.list",
}


def header(msg: Msg, name: str) -> str | None:
    return (msg.headers or {}).get(name)


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def tool_call(
    call_id: Any = "c-1", name: Any = "echo", arguments: Any = None, **extra: Any
) -> bytes:
    call: dict[str, Any] = {"id": call_id, "name": name}
    call["arguments"] = {"text": "hi"} if arguments is None else arguments
    call.update(extra)
    return dumps({"call": call})


def mcp_invoke(server: str = "docs", call_id: str = "m-1", **call: Any) -> bytes:
    body = {"id": call_id, "name": "search", "arguments": {"q": "nats"}, **call}
    return dumps({"operation": "invoke", "server": server, "call": body})


def delivery(delivery_id: Any = "d-1", content: Any = "hello", **extra: Any) -> bytes:
    return dumps(
        {
            "deliveryId": delivery_id,
            "message": {"role": "assistant", "content": content},
            **extra,
        }
    )


def event_subjects(bus: Bus) -> list[str]:
    return [m.subject for m in bus.events()]


def assert_event_headers(
    msg: Msg,
    *,
    key: str,
    id_header: str,
    identifier: str | None,
    status: str,
    code: str | None,
    msg_id: str,
    trace: dict[str, str],
) -> None:
    headers = msg.headers or {}
    assert headers["Content-Type"] == "application/json"
    assert headers["Interaction-Key"] == key
    other = (
        "Interaction-Delivery-Id"
        if id_header == "Interaction-Call-Id"
        else "Interaction-Call-Id"
    )
    assert other not in headers
    if identifier is None:
        assert id_header not in headers
    else:
        assert headers[id_header] == identifier
    assert headers["Interaction-Status"] == status
    if code is None:
        assert "Interaction-Error-Code" not in headers
    else:
        assert headers["Interaction-Error-Code"] == code
    assert headers["Nats-Msg-Id"] == msg_id
    for name in ("traceparent", "tracestate"):
        assert headers.get(name) == trace.get(name)


# --- replies and events, subject by subject ---------------------------------------------------------


async def test_tool_call_replies_with_the_result_then_publishes_result_and_observation(
    serve: Serve,
) -> None:
    served = await serve(Kit().worker())
    bus, p = served.bus, served.prefix
    sent = await bus.send("tool", tool_call("call-1"), headers=TRACE)

    reply = await bus.reply(sent)
    result, observation = await bus.wait(bus.is_event, 2)

    expected = {
        "callId": "call-1",
        "source": "echo",
        "status": "success",
        "content": "hi",
    }
    assert decode(reply) == expected
    assert header(reply, "Content-Type") == "application/json"
    assert [result.subject, observation.subject] == [
        f"{p}.tool.result.call-1",
        f"{p}.tool.observation.call-1",
    ]
    assert decode(result) == expected
    assert decode(observation) == {
        "callId": "call-1",
        "source": "echo",
        "status": "success",
        "message": {"role": "tool", "name": "echo", "content": "hi"},
    }
    for msg, family in ((result, "tool.result"), (observation, "tool.observation")):
        assert_event_headers(
            msg,
            key="call-1",
            id_header="Interaction-Call-Id",
            identifier="call-1",
            status="success",
            code=None,
            msg_id=f"{p}.{family}:call-1",
            trace=TRACE,
        )
    # The reply first, then result, then observation; nothing else.
    published = [m.subject for m in bus.messages if m.subject != f"{p}.tool.call"]
    assert published == [sent.reply, result.subject, observation.subject]


async def test_failed_tool_result_is_a_result_with_an_error_code_header_not_an_error(
    serve: Serve,
) -> None:
    served = await serve(Kit().worker())
    bus, p = served.bus, served.prefix
    sent = await bus.send("tool", tool_call("f-1", "fails", {}))

    reply = await bus.reply(sent)
    result, observation = await bus.wait(bus.is_event, 2)

    body = decode(reply)
    assert body["status"] == "failed"
    assert body["error"] == {
        "code": "UPSTREAM_DOWN",
        "message": "Upstream is down",
        "retryable": True,
    }
    assert header(reply, "Nats-Service-Error") is None
    assert decode(observation)["message"]["content"] == (
        "failed: UPSTREAM_DOWN: Upstream is down"
    )
    for msg, family in ((result, "tool.result"), (observation, "tool.observation")):
        assert_event_headers(
            msg,
            key="f-1",
            id_header="Interaction-Call-Id",
            identifier="f-1",
            status="failed",
            code="UPSTREAM_DOWN",
            msg_id=f"{p}.{family}:f-1",
            trace={},
        )
    assert bus.dead_letters() == []


async def test_mcp_invoke_replies_with_the_invoke_output_then_publishes_result_and_observation(
    serve: Serve,
) -> None:
    kit = Kit()
    served = await serve(kit.worker())
    bus, p = served.bus, served.prefix
    sent = await bus.send("mcp", mcp_invoke(call_id="m-1"), headers=TRACE)

    reply = await bus.reply(sent)
    result, observation = await bus.wait(bus.is_event, 2)

    expected_result = {
        "callId": "m-1",
        "source": "docs:search",
        "status": "success",
        "content": [{"type": "text", "text": "found nats"}],
        "structuredContent": {"hits": 1},
    }
    assert decode(reply) == {"operation": "invoke", "result": expected_result}
    assert header(reply, "Content-Type") == "application/json"
    assert kit.docs.calls == [("search", {"q": "nats"})]
    assert [result.subject, observation.subject] == [
        f"{p}.mcp.result.m-1",
        f"{p}.mcp.observation.m-1",
    ]
    assert decode(result) == expected_result
    expected_observation = observe_external_result(
        check.external_result(expected_result)
    ).to_wire()
    assert decode(observation) == expected_observation
    assert expected_observation["message"] == {
        "role": "tool",
        "name": "docs:search",
        "content": [
            {"type": "text", "text": "found nats"},
            {"type": "json", "data": {"hits": 1}},
        ],
    }
    for msg, family in ((result, "mcp.result"), (observation, "mcp.observation")):
        assert_event_headers(
            msg,
            key="m-1",
            id_header="Interaction-Call-Id",
            identifier="m-1",
            status="success",
            code=None,
            msg_id=f"{p}.{family}:m-1",
            trace=TRACE,
        )


@pytest.mark.parametrize(
    ("request_body", "servers"),
    [
        pytest.param({"operation": "discover", "server": "docs"}, None, id="one"),
        pytest.param({"operation": "discover"}, ("docs",), id="all"),
    ],
)
async def test_mcp_discover_replies_with_capabilities_and_publishes_no_event(
    serve: Serve, request_body: dict[str, Any], servers: tuple[str, ...] | None
) -> None:
    served = await serve(Kit().worker(servers=servers))
    bus = served.bus

    reply = await bus.request("mcp", request_body, headers=TRACE)
    await bus.settle("mcp")

    assert decode(reply) == {
        "operation": "discover",
        "capabilities": [
            {
                "server": "docs",
                "name": "search",
                "description": "Search the docs",
                "inputSchema": {"type": "object"},
            }
        ],
    }
    assert header(reply, "Content-Type") == "application/json"
    assert bus.events() == []
    assert bus.dead_letters() == []


async def test_observe_replies_with_the_observation_and_publishes_no_event(
    serve: Serve,
) -> None:
    served = await serve(Kit().worker())
    bus = served.bus
    result = {
        "callId": "o-1",
        "source": "lookup",
        "status": "failed",
        "error": {"code": "NOT_THERE", "message": "No such order"},
        "metadata": {"attempt": 1},
    }

    reply = await bus.request("observe", {"result": result}, headers=TRACE)
    await bus.settle("observe")

    assert decode(reply) == {
        "callId": "o-1",
        "source": "lookup",
        "status": "failed",
        "message": {
            "role": "tool",
            "name": "lookup",
            "content": "failed: NOT_THERE: No such order",
        },
        "error": {"code": "NOT_THERE", "message": "No such order"},
        "metadata": {"attempt": 1},
    }
    assert header(reply, "Content-Type") == "application/json"
    assert bus.events() == []
    assert bus.dead_letters() == []


async def test_tool_list_replies_with_the_granted_tools_and_publishes_no_event(
    serve: Serve,
) -> None:
    served = await serve(Kit().worker())
    bus = served.bus

    everything = decode(await bus.request("list", {}, headers=TRACE))
    one = await bus.request("list", {"name": "echo", "ignored": 1})
    await bus.settle("list")

    names = [tool["name"] for tool in everything["tools"]]
    # Registered but not granted by the sandbox: `secret` is served to nobody.
    assert names == [name for name in Kit.TOOLS if name != "ghost"]
    assert "secret" not in names
    assert decode(one) == {
        "tools": [
            {
                "name": "echo",
                "inputSchema": {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                },
            }
        ]
    }
    assert header(one, "Content-Type") == "application/json"
    assert bus.events() == []
    assert bus.dead_letters() == []


@pytest.mark.parametrize(
    ("content", "status", "code"),
    [
        pytest.param("hello", "accepted", None, id="accepted"),
        pytest.param("reject", "rejected", "POLICY", id="rejected"),
    ],
)
async def test_delivery_replies_with_the_receipt_and_publishes_it(
    serve: Serve, content: str, status: str, code: str | None
) -> None:
    kit = Kit()
    served = await serve(kit.worker())
    bus, p = served.bus, served.prefix
    sent = await bus.send("output", delivery("d-1", content), headers=TRACE)

    reply = await bus.reply(sent)
    (receipt,) = await bus.wait(bus.is_event)
    await bus.settle("output")

    expected: dict[str, Any] = {"deliveryId": "d-1", "status": status}
    if code is not None:
        expected["error"] = {"code": code, "message": "Rejected by policy"}
    assert decode(reply) == expected
    assert header(reply, "Content-Type") == "application/json"
    assert receipt.subject == f"{p}.output.receipt.d-1"
    assert decode(receipt) == expected
    assert_event_headers(
        receipt,
        key="d-1",
        id_header="Interaction-Delivery-Id",
        identifier="d-1",
        status=status,
        code=code,
        msg_id=f"{p}.output.receipt:d-1",
        trace=TRACE,
    )
    assert [d.delivery_id for d in kit.sink.deliveries] == ["d-1"]
    assert event_subjects(bus) == [receipt.subject]


# --- subject keys and the raw id header --------------------------------------------------------------

KEYS = [
    pytest.param("call-1", "call-1", True, id="plain"),
    pytest.param("a.b c", "a=2Eb=20c", True, id="dot-space"),
    pytest.param("x=y", "x=3Dy", True, id="equals"),
    pytest.param("under_score", "under_score", True, id="underscore"),
    pytest.param("é", "=C3=A9", False, id="e-acute"),
    pytest.param("日本", "=E6=97=A5=E6=9C=AC", False, id="cjk"),
    pytest.param(" lead", "=20lead", False, id="leading-space"),
    pytest.param("tab\there", "tab=09here", False, id="control-char"),
    pytest.param("a" * 256, "a" * 256, True, id="256-chars"),
]


@pytest.mark.parametrize(("call_id", "key", "in_header"), KEYS)
async def test_tool_events_are_keyed_by_the_subject_key_of_the_call_id(
    serve: Serve, call_id: str, key: str, in_header: bool
) -> None:
    served = await serve(Kit().worker())
    bus, p = served.bus, served.prefix

    reply = await bus.request("tool", tool_call(call_id))
    result, observation = await bus.wait(bus.is_event, 2)

    assert decode(reply)["callId"] == call_id
    assert [result.subject, observation.subject] == [
        f"{p}.tool.result.{key}",
        f"{p}.tool.observation.{key}",
    ]
    for msg, family in ((result, "tool.result"), (observation, "tool.observation")):
        assert decode(msg)["callId"] == call_id
        assert_event_headers(
            msg,
            key=key,
            id_header="Interaction-Call-Id",
            identifier=call_id if in_header else None,
            status="success",
            code=None,
            msg_id=f"{p}.{family}:{key}",
            trace={},
        )


@pytest.mark.parametrize(("identifier", "key", "in_header"), KEYS[:6])
async def test_mcp_and_delivery_events_are_keyed_the_same_way(
    serve: Serve, identifier: str, key: str, in_header: bool
) -> None:
    served = await serve(Kit().worker())
    bus, p = served.bus, served.prefix

    await bus.request("mcp", mcp_invoke(call_id=identifier))
    await bus.request("output", delivery(identifier))
    events = await bus.wait(bus.is_event, 3)

    assert [m.subject for m in events] == [
        f"{p}.mcp.result.{key}",
        f"{p}.mcp.observation.{key}",
        f"{p}.output.receipt.{key}",
    ]
    expected_header = identifier if in_header else None
    for msg in events[:2]:
        assert header(msg, "Interaction-Key") == key
        assert header(msg, "Interaction-Call-Id") == expected_header
    assert header(events[2], "Interaction-Key") == key
    assert header(events[2], "Interaction-Delivery-Id") == expected_header
    assert header(events[2], "Nats-Msg-Id") == f"{p}.output.receipt:{key}"


# --- error replies and dead letters --------------------------------------------------------------------


@dataclass(frozen=True)
class Refusal:
    kind: Kind
    body: bytes
    code: str
    status: int
    message: str
    key: str = "="
    identifier: str | None = None  # callId / deliveryId in the dead letter
    bare: bool = False  # a worker without MCP and without a sink


def refusal(case_id: str, *args: Any, **kwargs: Any) -> Any:
    return pytest.param(Refusal(*args, **kwargs), id=case_id)


def nested(depth: int) -> bytes:
    """A tool call whose body nests exactly `depth` levels (the body itself is level 1)."""
    inner = depth - 4  # body, call, arguments, and the list that holds `inner` levels
    value = "[" * inner + "]" * inner
    return (
        b'{"call":{"id":"deep","name":"echo","arguments":{"text":"x","n":['
        + value.encode()
        + b"]}}}"
    )


BAD_JSON = "INVALID_JSON", 400
BAD_INPUT = "INVALID_INPUT", 400
LONG_ID = "i" * 257

REFUSALS = [
    # INVALID_JSON: the body is not one strict UTF-8 JSON object.
    refusal("nan", "tool", b'{"call":{"id":"c-1","name":"echo","arguments":{"text":NaN}}}', *BAD_JSON, "Invalid JSON: JSON must not contain NaN"),
    refusal("infinity", "tool", b'{"call":{"id":"c-1","name":"echo","arguments":{"n":-Infinity}}}', *BAD_JSON, "Invalid JSON: JSON must not contain -Infinity"),
    refusal("overflow", "tool", b'{"call":{"id":"c-1","name":"echo","arguments":{"n":1e400}}}', *BAD_JSON, "Invalid JSON: JSON numbers must be finite"),
    refusal("huge-integer", "tool", b'{"n":' + b"9" * 4301 + b"}", *BAD_JSON, "Invalid JSON: JSON integers must have at most 4300 digits"),
    refusal("lone-surrogate", "tool", b'{"call":{"id":"\\ud800","name":"echo","arguments":{}}}', *BAD_JSON, "Invalid JSON: JSON strings must not contain lone surrogates"),
    refusal("duplicate-keys", "tool", b'{"call":{"id":"c-1","id":"c-2","name":"echo","arguments":{}}}', *BAD_JSON, "Invalid JSON: JSON objects must not repeat a key"),
    refusal("too-deep", "tool", nested(101), *BAD_JSON, "Invalid JSON: JSON must not nest deeper than 100 levels"),
    refusal("array", "tool", b"[1, 2]", *BAD_JSON, "Invalid JSON: the body must be a JSON object"),
    refusal("string", "output", b'"hello"', *BAD_JSON, "Invalid JSON: the body must be a JSON object"),
    refusal("null", "mcp", b"null", *BAD_JSON, "Invalid JSON: the body must be a JSON object"),
    refusal("empty", "observe", b"", *BAD_JSON, "Invalid JSON: the body is not valid JSON"),
    refusal("trailing", "tool", b'{"call":{}} {}', *BAD_JSON, "Invalid JSON: the body is not valid JSON"),
    refusal("bad-utf8", "tool", b'{"call":{"id":"c-\xff\xfe","name":"echo"}}', *BAD_JSON, "Invalid JSON: the body must be UTF-8"),
    # INVALID_INPUT: a contract rule is broken.
    refusal("no-call", "tool", b"{}", *BAD_INPUT, "call must be an object"),
    refusal("missing-call-id", "tool", dumps({"call": {"name": "echo", "arguments": {}}}), *BAD_INPUT, "call.id must be a nonempty string"),
    refusal("blank-call-id", "tool", tool_call("  "), *BAD_INPUT, "call.id must be a nonempty string"),
    refusal("numeric-call-id", "tool", tool_call(7), *BAD_INPUT, "call.id must be a nonempty string"),
    refusal("257-char-call-id", "tool", tool_call(LONG_ID), *BAD_INPUT, "call.id must be 1 to 256 characters"),
    refusal("missing-name", "tool", dumps({"call": {"id": "c-1", "arguments": {}}}), *BAD_INPUT, "call.name must be a nonempty string", "c-1", "c-1"),
    refusal("arguments-array", "tool", tool_call(arguments=[1]), *BAD_INPUT, "call.arguments must be an object", "c-1", "c-1"),
    refusal("arguments-null", "tool", dumps({"call": {"id": "c-1", "name": "echo", "arguments": None}}), *BAD_INPUT, "call.arguments must be an object", "c-1", "c-1"),
    refusal("validate-fails", "tool", tool_call(arguments={"text": 5}), *BAD_INPUT, "text must be a string", "c-1", "c-1"),
    refusal("validate-unsafe-text", "tool", tool_call(arguments={"unsafe": True}), *BAD_INPUT, "Invalid input", "c-1", "c-1"),
    refusal("mcp-bad-operation", "mcp", dumps({"operation": "delete"}), *BAD_INPUT, "Invalid MCP operation"),
    refusal("mcp-no-operation", "mcp", dumps({"server": "docs"}), *BAD_INPUT, "Invalid MCP operation"),
    refusal("mcp-invoke-no-server", "mcp", dumps({"operation": "invoke", "call": {"id": "m-1", "name": "search", "arguments": {}}}), *BAD_INPUT, "server must be a nonempty string", "m-1", "m-1"),
    refusal("mcp-invoke-arguments", "mcp", mcp_invoke(arguments="q"), *BAD_INPUT, "call.arguments must be an object", "m-1", "m-1"),
    refusal("mcp-discover-blank-server", "mcp", dumps({"operation": "discover", "server": " "}), *BAD_INPUT, "server must be a nonempty string"),
    refusal("observe-no-result", "observe", b"{}", *BAD_INPUT, "External result is required"),
    refusal("observe-bad-status", "observe", dumps({"result": {"callId": "o-1", "source": "s", "status": "done"}}), *BAD_INPUT, "Invalid external result status", "o-1", "o-1"),
    refusal("observe-unsafe-error-message", "observe", dumps({"result": {"callId": "o-1", "source": "s", "status": "failed", "error": {"code": "E", "message": "see /etc/passwd"}}}), *BAD_INPUT, "Unsafe interaction error message", "o-1", "o-1"),
    refusal("observe-failed-without-error", "observe", dumps({"result": {"callId": "o-1", "source": "s", "status": "failed"}}), *BAD_INPUT, "Interaction error is required", "o-1", "o-1"),
    refusal("delivery-bad-role", "output", dumps({"deliveryId": "d-1", "message": {"role": "robot", "content": "x"}}), *BAD_INPUT, "Invalid message role", "d-1", "d-1"),
    refusal("delivery-no-message", "output", dumps({"deliveryId": "d-1"}), *BAD_INPUT, "message must be an object", "d-1", "d-1"),
    refusal("delivery-artifacts", "output", delivery(artifacts={"a": 1}), *BAD_INPUT, "artifacts must be an array", "d-1", "d-1"),
    refusal("delivery-no-id", "output", dumps({"message": {"role": "user", "content": "x"}}), *BAD_INPUT, "deliveryId must be a nonempty string"),
    refusal("delivery-257-char-id", "output", delivery(LONG_ID), *BAD_INPUT, "deliveryId must be 1 to 256 characters"),
    # PERMISSION_DENIED: the sandbox says no.
    refusal("tool-not-allowed", "tool", tool_call(name="secret"), "PERMISSION_DENIED", 403, "Permission denied: tools:secret", "c-1", "c-1"),
    refusal("mcp-invoke-not-allowed", "mcp", mcp_invoke("private"), "PERMISSION_DENIED", 403, "Permission denied: mcp:private", "m-1", "m-1"),
    refusal("mcp-discover-not-allowed", "mcp", dumps({"operation": "discover", "server": "private"}), "PERMISSION_DENIED", 403, "Permission denied: mcp:private", "private"),
    # NOT_FOUND: unknown tool or server, node not enabled.
    refusal("unknown-tool", "tool", tool_call(name="ghost"), "NOT_FOUND", 404, "Unknown tool: ghost", "c-1", "c-1"),
    refusal("unknown-mcp-server", "mcp", mcp_invoke("ghost"), "NOT_FOUND", 404, "Unknown MCP server: ghost", "m-1", "m-1"),
    refusal("unknown-mcp-server-discover", "mcp", dumps({"operation": "discover", "server": "ghost"}), "NOT_FOUND", 404, "Unknown MCP server: ghost", "ghost"),
    refusal("no-mcp-discover", "mcp", dumps({"operation": "discover"}), "NOT_FOUND", 404, "No available Worker implements INTERACTION.ACT.MCP", bare=True),
    refusal("no-mcp-invoke", "mcp", mcp_invoke(), "NOT_FOUND", 404, "No available Worker implements INTERACTION.ACT.MCP", "m-1", "m-1", bare=True),
    refusal("no-sink", "output", delivery(), "NOT_FOUND", 404, "No available Worker implements INTERACTION.OUTPUT", "d-1", "d-1", bare=True),
    # P.tool.list: keyed by the tool name, never by a call.
    refusal("list-empty-body", "list", b"", *BAD_JSON, "Invalid JSON: the body is not valid JSON"),
    refusal("list-numeric-name", "list", dumps({"name": 7}), *BAD_INPUT, "name must be a tool name"),
    refusal("list-not-allowed", "list", dumps({"name": "secret"}), "PERMISSION_DENIED", 403, "Permission denied: tools:secret", "secret"),
    refusal("list-unknown-tool", "list", dumps({"name": "ghost"}), "NOT_FOUND", 404, "Unknown tool: ghost", "ghost"),
    # INVALID_RESULT: a tool, server or sink broke the result contract.
    refusal("tool-invalid-result", "tool", tool_call(name="invalid", arguments={}), "INVALID_RESULT", 502, "Invalid external result status", "c-1", "c-1"),
    refusal("mcp-invalid-result", "mcp", mcp_invoke("weird"), "INVALID_RESULT", 502, "Invalid MCP isError", "m-1", "m-1"),
    refusal("sink-invalid-receipt", "output", delivery(content="bad-receipt"), "INVALID_RESULT", 502, "Output receipt deliveryId mismatch", "d-1", "d-1"),
    # UNAVAILABLE / TIMEOUT: an MCP discover that could not be done.
    refusal("mcp-discover-unavailable", "mcp", dumps({"operation": "discover", "server": "flaky"}), "UNAVAILABLE", 503, "MCP server is not connected: flaky", "flaky"),
    refusal("mcp-discover-timeout", "mcp", dumps({"operation": "discover", "server": "slowpoke"}), "TIMEOUT", 504, "MCP discovery timed out: slowpoke", "slowpoke"),
    # INTERNAL: any other exception, with the fixed message.
    refusal("tool-raises", "tool", tool_call(name="boom", arguments={}), "INTERNAL", 500, "Internal error", "c-1", "c-1"),
    refusal("mcp-client-raises", "mcp", mcp_invoke("crashy"), "INTERNAL", 500, "Internal error", "m-1", "m-1"),
    refusal("sink-raises", "output", delivery(content="crash"), "INTERNAL", 500, "Internal error", "d-1", "d-1"),
]  # fmt: skip


def assert_dead_letter(
    dead: Msg,
    *,
    served: Served,
    sent: Sent,
    code: str,
    message: str,
    key: str,
    id_field: str | None,
    identifier: str | None,
    request_headers: dict[str, str],
) -> None:
    """The dead letter of `sent`: its subject, body and headers (wire.md sections 3 and 5)."""
    p = served.prefix
    assert dead.subject == f"{p}.dead.{sent.kind}.{key}"
    document = decode(dead)
    expected: dict[str, Any] = {
        "subject": f"{p}.{REQUEST_SUBJECT[sent.kind]}",
        "error": {"code": code, "message": message},
        "headers": request_headers,
        "receivedAt": document.get("receivedAt"),
        "attempts": 1,
    }
    try:
        expected["payload"] = sent.data.decode("utf-8")
    except UnicodeDecodeError:
        expected["payload"] = base64.b64encode(sent.data).decode("ascii")
        expected["encoding"] = "base64"
    if id_field is not None and identifier is not None:
        expected[id_field] = identifier
    assert document == expected
    assert RECEIVED_AT.fullmatch(document["receivedAt"])
    headers = dead.headers or {}
    assert headers["Content-Type"] == "application/json"
    assert headers["Interaction-Key"] == key
    assert headers["Interaction-Status"] == "error"
    assert headers["Interaction-Error-Code"] == code
    msg_id = headers["Nats-Msg-Id"]
    assert msg_id and msg_id != request_headers.get("Nats-Msg-Id")
    for name in ("traceparent", "tracestate"):
        assert headers.get(name) == request_headers.get(name)
    id_header = (
        "Interaction-Delivery-Id" if sent.kind == "output" else "Interaction-Call-Id"
    )
    if (
        id_field is not None
        and identifier is not None
        and is_safe_header_value(identifier)
    ):
        assert headers[id_header] == identifier
    else:
        assert id_header not in headers


def assert_error_reply(reply: Msg, code: str, status: int, message: str) -> None:
    assert decode(reply) == {"error": {"code": code, "message": message}}
    assert header(reply, "Nats-Service-Error") == message
    assert header(reply, "Nats-Service-Error-Code") == str(status)
    assert header(reply, "Content-Type") == "application/json"
    assert is_safe_message(message)


@pytest.mark.parametrize("case", REFUSALS)
async def test_refused_message_gets_an_error_reply_and_a_dead_letter_and_no_event(
    serve: Serve, case: Refusal
) -> None:
    kit = Kit()
    served = await serve(kit.worker(mcp=not case.bare, output=not case.bare))
    bus = served.bus
    sent = await bus.send(case.kind, case.body, headers=REQUEST_HEADERS)

    reply = await bus.reply(sent)
    await bus.settle(case.kind)

    assert_error_reply(reply, case.code, case.status, case.message)
    (dead,) = bus.dead_letters()
    not_a_call = case.kind == "list" or (
        case.kind == "mcp" and b'"discover"' in case.body
    )
    assert_dead_letter(
        dead,
        served=served,
        sent=sent,
        code=case.code,
        message=case.message,
        key=case.key,
        id_field=(
            None if not_a_call else "deliveryId" if case.kind == "output" else "callId"
        ),
        identifier=case.identifier,
        request_headers=REDACTED,
    )
    # The reply comes before the dead letter, and a refused message publishes no event.
    assert bus.messages.index(reply) < bus.messages.index(dead)
    assert bus.events() == []
    assert sum(kit.echo.calls.values()) == 0


@pytest.mark.parametrize(
    ("content_type", "body", "message"),
    [
        pytest.param("application/json", b"{", "Invalid JSON: the body is not valid JSON", id="json-content-type"),
        pytest.param("text/plain", b"\xff{}", "Invalid JSON: the body must be UTF-8", id="text-content-type"),
        pytest.param(None, b"[" * 5000 + b"]" * 5000, "Invalid JSON: JSON must not nest deeper than 100 levels", id="past-recursion-limit"),
        pytest.param(None, b'{"a":' * 3000 + b"1" + b"}" * 3000, "Invalid JSON: JSON must not nest deeper than 100 levels", id="objects-past-recursion-limit"),
    ],
)  # fmt: skip
async def test_body_is_judged_only_by_the_strict_parser_whatever_its_content_type(
    serve: Serve, content_type: str | None, body: bytes, message: str
) -> None:
    served = await serve(Kit().worker())
    bus = served.bus
    headers = {"content-type": content_type} if content_type else {}

    sent = await bus.send("tool", body, headers=headers)
    reply = await bus.reply(sent)
    (dead,) = await bus.wait(bus.is_dead)

    assert_error_reply(reply, "INVALID_JSON", 400, message)
    assert_dead_letter(
        dead,
        served=served,
        sent=sent,
        code="INVALID_JSON",
        message=message,
        key="=",
        id_field="callId",
        identifier=None,
        request_headers=headers,
    )


async def test_internal_error_never_carries_the_exception_text(serve: Serve) -> None:
    served = await serve(Kit().worker())
    bus = served.bus

    reply = await bus.request("tool", tool_call(name="boom", arguments={}))
    (dead,) = await bus.wait(bus.is_dead)

    for msg in (reply, dead):
        assert b"sk-live" not in msg.data and b"/srv/app" not in msg.data
        assert "sk-live" not in json.dumps(msg.headers)
    assert header(reply, "Nats-Service-Error") == "Internal error"


async def test_body_nested_exactly_100_levels_is_accepted(serve: Serve) -> None:
    served = await serve(Kit().worker())

    reply = await served.bus.request("tool", nested(100))

    assert decode(reply)["status"] == "success"


async def test_dead_letters_of_two_bad_messages_have_distinct_msg_ids(
    serve: Serve,
) -> None:
    served = await serve(Kit().worker())
    bus = served.bus
    headers = {"Nats-Msg-Id": "same"}

    await bus.request("tool", b"{", headers=headers)
    await bus.request("tool", b"{", headers=headers)
    await bus.settle("tool")

    first, second = bus.dead_letters()
    ids = {header(first, "Nats-Msg-Id"), header(second, "Nats-Msg-Id")}
    assert len(ids) == 2 and "same" not in ids


async def test_non_ascii_id_is_in_the_dead_letter_body_but_not_in_a_header(
    serve: Serve,
) -> None:
    served = await serve(Kit().worker())
    bus = served.bus

    await bus.request("tool", tool_call("日本", name="ghost"))
    (dead,) = await bus.wait(bus.is_dead)

    assert dead.subject == f"{served.prefix}.dead.tool.=E6=97=A5=E6=9C=AC"
    assert decode(dead)["callId"] == "日本"
    assert header(dead, "Interaction-Key") == "=E6=97=A5=E6=9C=AC"
    assert header(dead, "Interaction-Call-Id") is None


# --- messages without a reply subject ------------------------------------------------------------------


async def test_call_without_reply_subject_still_publishes_its_events(
    serve: Serve,
) -> None:
    served = await serve(Kit().worker())
    bus, p = served.bus, served.prefix

    await bus.send("tool", tool_call("quiet"), reply=False)
    await bus.send("output", delivery("quiet"), reply=False)
    events = await bus.wait(bus.is_event, 3)

    assert sorted(m.subject for m in events) == [
        f"{p}.output.receipt.quiet",
        f"{p}.tool.observation.quiet",
        f"{p}.tool.result.quiet",
    ]
    assert not any(".reply." in m.subject for m in bus.messages)


async def test_refused_message_without_reply_subject_still_gets_its_dead_letter(
    serve: Serve,
) -> None:
    served = await serve(Kit().worker())
    bus, p = served.bus, served.prefix

    sent = await bus.send("tool", tool_call(name="ghost"), reply=False)
    await bus.settle("tool")

    (dead,) = bus.dead_letters()
    assert dead.subject == f"{p}.dead.tool.c-1"
    assert decode(dead)["payload"] == sent.data.decode()
    assert bus.events() == []
    replies = [m for m in bus.messages if ".reply." in m.subject]
    assert len(replies) == 1  # the marker's


# --- Interaction-Reply-To ------------------------------------------------------------------------------


@pytest.mark.parametrize("with_reply_subject", [True, False], ids=["reply", "no-reply"])
async def test_reply_goes_to_interaction_reply_to_instead_of_the_reply_subject(
    serve: Serve, nats_client: Client, with_reply_subject: bool
) -> None:
    served = await serve(Kit().worker())
    bus = served.bus
    target = f"_INBOX.{served.prefix}.answer"
    inbox = await nats_client.subscribe(target)
    await settled(nats_client)

    sent = await bus.send(
        "tool",
        tool_call("r-1"),
        headers={"Interaction-Reply-To": target},
        reply=with_reply_subject,
    )
    answer = await inbox.next_msg(timeout=10)
    await bus.wait(bus.is_event, 2)

    assert decode(answer)["callId"] == "r-1"
    assert header(answer, "Content-Type") == "application/json"
    # The reply would have been published before the events.
    if sent.reply is not None:
        assert bus.on(sent.reply) == []


async def test_error_reply_also_goes_to_interaction_reply_to(serve: Serve) -> None:
    served = await serve(Kit().worker())
    bus = served.bus
    target = f"_INBOX.{served.prefix}.answer"
    await bus.watch_also(target)

    sent = await bus.send(
        "tool", tool_call(name="ghost"), headers={"Interaction-Reply-To": target}
    )
    await bus.wait(bus.is_dead)
    (answer,) = await bus.wait_subject(target)

    assert_error_reply(answer, "NOT_FOUND", 404, "Unknown tool: ghost")
    assert sent.reply is not None and bus.on(sent.reply) == []


@pytest.mark.parametrize(
    "target",
    [
        "other.subject",
        "_INBOX.*",
        "_INBOX.a >",
        "_INBOX.>",
        "_INBOX.a.>",
        "_INBOX",
        "_INBOX.",
        "_INBOX..a",
        "_INBOXES.a",
    ],
)
async def test_disallowed_interaction_reply_to_is_invalid_input_to_the_reply_subject(
    serve: Serve, target: str
) -> None:
    kit = Kit()
    served = await serve(kit.worker())
    bus = served.bus
    await bus.watch_also("other.>")
    headers = {"Interaction-Reply-To": target, **TRACE}

    sent = await bus.send("tool", tool_call("r-1"), headers=headers)
    reply = await bus.reply(sent)
    await bus.settle("tool")

    message = "Interaction-Reply-To must be a subject under an allowed reply prefix"
    assert_error_reply(reply, "INVALID_INPUT", 400, message)
    (dead,) = bus.dead_letters()
    assert_dead_letter(
        dead,
        served=served,
        sent=sent,
        code="INVALID_INPUT",
        message=message,
        key="r-1",
        id_field="callId",
        identifier="r-1",
        request_headers=headers,
    )
    assert bus.events() == []
    assert kit.echo.calls == {}
    assert not any(m.subject.startswith("other.") for m in bus.messages)


# --- TOOL_TIMEOUT --------------------------------------------------------------------------------------


async def test_tool_past_its_timeout_is_cancelled_and_reported_as_timeout(
    serve: Serve,
) -> None:
    kit = Kit()
    served = await serve(kit.worker(), tool_timeout=0.2)
    bus, p = served.bus, served.prefix

    sent = await bus.send("tool", tool_call("slow-1", "slow", {"seconds": 5}))
    reply = await bus.reply(sent, within=4)  # well before the tool's 5 s
    result, observation = await bus.wait(bus.is_event, 2)

    body = decode(reply)
    assert body == {
        "callId": "slow-1",
        "source": "slow",
        "status": "timeout",
        "error": {
            "code": "TOOL_TIMEOUT",
            "message": body["error"]["message"],
            "retryable": False,
        },
    }
    assert is_safe_message(body["error"]["message"])
    assert kit.slow.cancelled == ["slow-1"]
    assert kit.slow.finished == []
    assert decode(result) == body
    assert result.subject == f"{p}.tool.result.slow-1"
    for msg in (result, observation):
        assert header(msg, "Interaction-Status") == "timeout"
        assert header(msg, "Interaction-Error-Code") == "TOOL_TIMEOUT"
    assert bus.dead_letters() == []


# --- max_payload: RESULT_TOO_LARGE and truncated dead letters ------------------------------------------

SMALL_PAYLOAD = 8192


@pytest.fixture
def small_server_url(nats_server_factory: NatsServerFactory, tmp_path: Path) -> str:
    config = tmp_path / "small.conf"
    config.write_text(f"max_payload: {SMALL_PAYLOAD}\n")
    return nats_server_factory("-c", str(config)).url


async def test_tool_result_too_large_for_the_server_becomes_a_failed_result(
    serve: Serve, small_server_url: str
) -> None:
    served = await serve(Kit().worker(), url=small_server_url)
    bus, p = served.bus, served.prefix

    sent = await bus.send("tool", tool_call("big-1", "big", {"size": 20_000}))
    reply = await bus.reply(sent)
    result, observation = await bus.wait(bus.is_event, 2)

    body = decode(reply)
    assert body["callId"] == "big-1"
    assert body["source"] == "big"
    assert body["status"] == "failed"
    assert body["error"]["code"] == "RESULT_TOO_LARGE"
    assert body["metadata"]["limit"] == SMALL_PAYLOAD
    assert body["metadata"]["size"] >= 20_000
    assert "content" not in body
    assert decode(result) == body
    assert decode(observation)["error"]["code"] == "RESULT_TOO_LARGE"
    assert [result.subject, observation.subject] == [
        f"{p}.tool.result.big-1",
        f"{p}.tool.observation.big-1",
    ]
    assert header(result, "Interaction-Error-Code") == "RESULT_TOO_LARGE"


async def test_a_result_that_fits_is_kept_and_only_its_observation_is_shortened(
    serve: Serve, small_server_url: str
) -> None:
    """Content given twice (text and structuredContent) is three times in the observation: the
    result fits, the observation does not (wire.md 1)."""
    served = await serve(Kit().worker(), url=small_server_url)
    bus = served.bus

    sent = await bus.send(
        "tool", tool_call("twice-1", "big", {"size": 2800, "twice": True})
    )
    reply = await bus.reply(sent)
    result, observation = await bus.wait(bus.is_event, 2)
    observed = await bus.request("observe", {"result": decode(result)})

    body = decode(reply)
    assert body["status"] == "success"
    assert body["content"] == "x" * 2800
    assert body["structuredContent"] == {"text": "x" * 2800}
    assert decode(result) == body
    shortened = decode(observation)
    omitted = re.fullmatch(
        r"Content omitted \((\d+) bytes\): see the result event",
        shortened["message"]["content"],
    )
    assert omitted is not None
    size = int(omitted[1])
    assert size > SMALL_PAYLOAD - 2048 > len(observation.data)
    assert shortened == {
        "callId": "twice-1",
        "source": "big",
        "status": "success",
        "message": {
            "role": "tool",
            "name": "big",
            "content": shortened["message"]["content"],
        },
        "metadata": {"truncated": True},
    }
    assert header(observation, "Interaction-Status") == "success"
    # P.observe has no result event to point at: the same result is refused there.
    assert decode(observed)["error"]["code"] == "RESULT_TOO_LARGE"


async def test_copied_trace_headers_count_against_max_payload(
    serve: Serve, small_server_url: str
) -> None:
    """A result that fits alone, but not with a long `tracestate` copied onto its events."""
    served = await serve(Kit().worker(), url=small_server_url)
    bus = served.bus
    trace = {**TRACE, "tracestate": "vendor=" + "a" * 2500}

    sent = await bus.send(
        "tool", tool_call("big-2", "big", {"size": 5800}), headers=trace
    )
    reply = await bus.reply(sent)
    result, observation = await bus.wait(bus.is_event, 2)

    assert decode(reply) == decode(result)
    assert decode(result)["error"]["code"] == "RESULT_TOO_LARGE"
    assert header(result, "tracestate") == trace["tracestate"]
    assert header(observation, "Interaction-Error-Code") == "RESULT_TOO_LARGE"
    # The worker is still connected and answering.
    assert decode(await bus.request("tool", tool_call("after")))["status"] == "success"


async def test_dead_letter_of_a_message_with_huge_headers_still_fits(
    serve: Serve, small_server_url: str
) -> None:
    """The headers come back twice (copied trace headers, and in the body): the letter must fit anyway."""
    served = await serve(Kit().worker(), url=small_server_url)
    bus = served.bus
    headers = {**TRACE, "tracestate": "vendor=" + "a" * 3500, "X-Note": "n" * 500}

    sent = await bus.send("tool", b"{" + b" " * 100, headers=headers)
    reply = await bus.reply(sent)
    (dead,) = await bus.wait(bus.is_dead)

    assert decode(reply)["error"]["code"] == "INVALID_JSON"
    document = decode(dead)
    assert document["error"]["code"] == "INVALID_JSON"
    assert document["truncated"] is True
    assert document["size"] == len(sent.data)
    assert decode(await bus.request("tool", tool_call("after")))["status"] == "success"


async def test_mcp_result_too_large_for_the_server_becomes_a_failed_result(
    serve: Serve, small_server_url: str
) -> None:
    served = await serve(Kit().worker(), url=small_server_url)
    bus = served.bus

    reply = await bus.request(
        "mcp", mcp_invoke(call_id="m-big", arguments={"q": "x" * 7000})
    )

    result = decode(reply)["result"]
    assert result["source"] == "docs:search"
    assert result["status"] == "failed"
    assert result["error"]["code"] == "RESULT_TOO_LARGE"
    assert result["metadata"]["limit"] == SMALL_PAYLOAD


async def test_discover_reply_too_large_is_the_error_result_too_large(
    serve: Serve, small_server_url: str
) -> None:
    served = await serve(Kit().worker(), url=small_server_url)
    bus = served.bus

    sent = await bus.send("mcp", {"operation": "discover", "server": "huge"})
    reply = await bus.reply(sent)
    (dead,) = await bus.wait(bus.is_dead)

    assert decode(reply)["error"]["code"] == "RESULT_TOO_LARGE"
    assert header(reply, "Nats-Service-Error-Code") == "502"
    assert dead.subject == f"{served.prefix}.dead.mcp.huge"


async def test_discover_of_the_same_server_fits_the_default_max_payload(
    serve: Serve,
) -> None:
    served = await serve(Kit().worker())

    reply = await served.bus.request("mcp", {"operation": "discover", "server": "huge"})

    assert len(decode(reply)["capabilities"]) == 40
    assert len(reply.data) > SMALL_PAYLOAD


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
async def test_dead_letter_too_large_keeps_a_prefix_with_size_and_sha256(
    serve: Serve, small_server_url: str, binary: bool
) -> None:
    served = await serve(Kit().worker(), url=small_server_url)
    bus = served.bus
    if binary:
        body = b"\xff\xfe" * 3000
    else:
        # Quotes double when the body is embedded as a JSON string; `é` is two bytes.
        body = tool_call("big-1", "ghost", {"pad": '"é' * 1400})

    sent = await bus.send("tool", body, headers={"X-Request": "r-1"})
    reply = await bus.reply(sent)
    (dead,) = await bus.wait(bus.is_dead)

    assert decode(reply)["error"]["code"] == ("INVALID_JSON" if binary else "NOT_FOUND")
    document = decode(dead)
    assert document["truncated"] is True
    assert document["size"] == len(body)
    assert document["sha256"] == hashlib.sha256(body).hexdigest()
    assert document["headers"] == {"X-Request": "r-1"}
    if binary:
        assert document["encoding"] == "base64"
        prefix = base64.b64decode(document["payload"])
        assert body.startswith(prefix)
    else:
        assert "encoding" not in document
        assert document["callId"] == "big-1"
        prefix = document["payload"].encode()
        assert body.startswith(prefix)
    # The longest prefix that fits: most of the room is used.
    assert len(prefix) > len(body) // 2
    assert len(dead.data) <= SMALL_PAYLOAD
