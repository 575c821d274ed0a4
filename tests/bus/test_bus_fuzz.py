"""Fuzzing one running nats-py worker: whatever arrives, a message with a reply subject gets exactly one
reply (an error reply or a valid result), every refused message also gets its dead letter, and the
worker keeps answering (wire.md sections 1, 2, 4 and 5).
"""

import base64
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from bus_doubles import Boom, Fails, Invalid, Kit
from bus_harness import Bus, Serve, Served, decode
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from nats.aio.msg import Msg

from interaction_worker import InteractionWorker, McpRegistry
from interaction_worker.contracts import is_safe_message
from interaction_worker.contracts import validation as check
from interaction_worker.subscribers import Kind, subject_key

FUZZ = settings(
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
KINDS: tuple[Kind, ...] = ("tool", "mcp", "observe", "output")
ERROR_CODES = {
    "INVALID_JSON": "400",
    "INVALID_INPUT": "400",
    "PERMISSION_DENIED": "403",
    "NOT_FOUND": "404",
    "INVALID_RESULT": "502",
    "RESULT_TOO_LARGE": "502",
    "UNAVAILABLE": "503",
    "TIMEOUT": "504",
    "INTERNAL": "500",
}
EVENT_OF = {
    "tool": "tool.observation",
    "mcp": "mcp.observation",
    "output": "output.receipt",
}


class Fuzzer:
    """One worker for the whole module, and the checks every fuzzed message must pass."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.bus: Bus = served.bus
        self.sent = 0

    async def check(self, kind: Kind, body: bytes) -> None:
        bus = self.bus
        fuzz_id = uuid.uuid4().hex
        since = len(bus.messages)
        sent = await bus.send(kind, body, headers={"X-Fuzz-Id": fuzz_id})
        self.sent += 1
        (reply,) = (await bus.wait(lambda m: m.subject == sent.reply, since=since))[:1]
        headers = reply.headers or {}
        if "Nats-Service-Error-Code" in headers:
            event(f"{kind}: {decode(reply)['error']['code']}")
            await self._check_refusal(kind, body, reply, fuzz_id, since)
        else:
            event(f"{kind}: reply")
            await self._check_result(kind, reply, since)
        # Exactly one reply: anything else for this message was published before its last publish.
        assert len([m for m in bus.messages[since:] if m.subject == sent.reply]) == 1

    async def _check_refusal(
        self, kind: Kind, body: bytes, reply: Msg, fuzz_id: str, since: int
    ) -> None:
        bus = self.bus
        error = decode(reply)["error"]
        assert set(error) == {"code", "message"}
        assert error["code"] in ERROR_CODES
        assert reply.headers is not None
        assert reply.headers["Nats-Service-Error-Code"] == ERROR_CODES[error["code"]]
        assert reply.headers["Nats-Service-Error"] == error["message"]
        assert is_safe_message(error["message"])

        def mine(msg: Msg) -> bool:
            return (
                bus.is_dead(msg) and decode(msg)["headers"].get("X-Fuzz-Id") == fuzz_id
            )

        (dead,) = await bus.wait(mine, since=since)
        letter = decode(dead)
        assert dead.subject.startswith(f"{bus.prefix}.dead.{kind}.")
        assert letter["error"] == error
        try:
            assert letter["payload"] == body.decode("utf-8")
            assert "encoding" not in letter
        except UnicodeDecodeError:
            assert letter["encoding"] == "base64"
            assert base64.b64decode(letter["payload"]) == body
        assert dead.headers is not None
        assert dead.headers["Interaction-Status"] == "error"
        assert dead.headers["Interaction-Error-Code"] == error["code"]
        assert dead.subject.endswith("." + dead.headers["Interaction-Key"])
        # A refused message publishes no event (its events would have come before its dead letter).
        assert not [m for m in bus.messages[since:] if bus.is_event(m)]

    async def _check_result(self, kind: Kind, reply: Msg, since: int) -> None:
        bus = self.bus
        body = decode(reply)
        assert reply.headers is not None
        assert reply.headers["Content-Type"] == "application/json"
        identifier: str | None = None
        if kind == "tool":
            identifier = check.external_result(body).call_id
        elif kind == "mcp" and body["operation"] == "invoke":
            identifier = check.external_result(body["result"]).call_id
        elif kind == "mcp":
            assert set(body) == {"operation", "capabilities"}
            assert isinstance(body["capabilities"], list)
        elif kind == "observe":
            assert {"callId", "source", "status", "message"} <= set(body)
            assert body["message"]["role"] == "tool"
        else:
            identifier = check.output_receipt(body).delivery_id
        if identifier is not None:
            event = f"{bus.prefix}.{EVENT_OF[kind]}.{subject_key(identifier)}"
            await bus.wait(lambda m: m.subject == event, since=since)


@pytest.fixture(scope="module")
async def fuzzer(nats_server: Any) -> AsyncIterator[Fuzzer]:
    """One nats-py worker for every example of the module; at the end it must still answer."""
    kit = Kit()
    registry = McpRegistry()
    for name, client in kit.servers.items():
        registry.register(name, client)
    # Only tools that answer at once and with bounded output: fuzzed arguments reach them.
    worker = InteractionWorker(
        tools=[kit.echo, Boom(), Invalid(), Fails()],
        mcp=registry,
        output=kit.sink,
        sandbox=kit.sandbox(),
        concurrency=4,
    )
    serve = Serve("nats-py", nats_server.url)
    try:
        fuzzer = Fuzzer(await serve(worker))
        yield fuzzer
        reply = await fuzzer.bus.request("tool", tool_body("still-alive"))
        assert decode(reply)["status"] == "success"
    finally:
        await serve.close()


def tool_body(call_id: Any, **call: Any) -> bytes:
    value = {"id": call_id, "name": "echo", "arguments": {"text": "x"}, **call}
    return json.dumps({"call": value}).encode()


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
ODD_ID = st.one_of(
    st.text(max_size=300),
    st.text(
        alphabet=st.sampled_from(list("a.= \t\n\r\x00\x1b\x7f-_é日😀\u2028")),
        max_size=300,
    ),
    st.sampled_from(["", " ", "a" * 256, "a" * 257, "é" * 256, "😀" * 257, "=", "x.y"]),
)


def id_body(kind: Kind, identifier: str) -> dict[str, Any]:
    if kind == "tool":
        return {"call": {"id": identifier, "name": "echo", "arguments": {"text": "x"}}}
    if kind == "mcp":
        call = {"id": identifier, "name": "search", "arguments": {"q": "x"}}
        return {"operation": "invoke", "server": "docs", "call": call}
    if kind == "observe":
        result = {"callId": identifier, "source": "s", "status": "success"}
        return {"result": {**result, "content": "x"}}
    return {"deliveryId": identifier, "message": {"role": "user", "content": "x"}}


TEMPLATES: dict[Kind, list[dict[str, Any]]] = {
    "tool": [{"call": {"id": "w-1", "name": "echo", "arguments": {"text": "x"}}}],
    "mcp": [
        {
            "operation": "invoke",
            "server": "docs",
            "call": {"id": "w-1", "name": "search", "arguments": {"q": "x"}},
        },
        {"operation": "discover", "server": "docs"},
    ],
    "observe": [
        {
            "result": {
                "callId": "w-1",
                "source": "s",
                "status": "failed",
                "error": {"code": "E", "message": "m", "retryable": False},
                "content": "c",
                "structuredContent": {"a": 1},
                "references": [{"uri": "u", "mediaType": "text/plain"}],
                "metadata": {"k": 1},
            }
        }
    ],
    "output": [
        {
            "deliveryId": "w-1",
            "message": {"role": "user", "content": "hi", "name": "n"},
            "artifacts": [{"name": "a", "reference": {"uri": "u"}}],
        }
    ],
}


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key or index path into `value`, the root excluded."""
    found: list[tuple[Any, ...]] = []
    items: list[tuple[Any, Any]] = []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    for key, child in items:
        found.append((*prefix, key))
        found.extend(paths(child, (*prefix, key)))
    return found


def mutate(value: Any, path: tuple[Any, ...], replacement: Any, delete: bool) -> Any:
    copy = json.loads(json.dumps(value))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return copy


@st.composite
def wrong_types(draw: st.DrawFn) -> tuple[Kind, bytes]:
    kind = draw(st.sampled_from(KINDS))
    template = draw(st.sampled_from(TEMPLATES[kind]))
    path = draw(st.sampled_from(paths(template)))
    replacement = draw(JSON)
    mutated = mutate(template, path, replacement, draw(st.booleans()))
    return kind, json.dumps(mutated).encode()


@st.composite
def deep_bodies(draw: st.DrawFn) -> tuple[Kind, bytes]:
    kind = draw(st.sampled_from(KINDS))
    depth = draw(st.integers(min_value=1, max_value=130))
    opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
    inner = opener * depth + "1" + closer * depth
    where = draw(st.sampled_from(["body", "value"]))
    if where == "body":
        return kind, inner.encode()
    template = json.dumps(id_body(kind, "deep")).replace('"x"', inner, 1)
    return kind, template.encode()


@FUZZ
@given(kind=st.sampled_from(KINDS), body=st.binary(max_size=300))
async def test_random_bytes_get_exactly_one_reply(
    fuzzer: Fuzzer, kind: Kind, body: bytes
) -> None:
    await fuzzer.check(kind, body)


@FUZZ
@given(kind=st.sampled_from(KINDS), value=JSON, ascii_only=st.booleans())
async def test_random_json_values_get_exactly_one_reply(
    fuzzer: Fuzzer, kind: Kind, value: Any, ascii_only: bool
) -> None:
    await fuzzer.check(kind, json.dumps(value, ensure_ascii=ascii_only).encode())


@FUZZ
@given(kind=st.sampled_from(KINDS), identifier=ODD_ID)
async def test_odd_ids_get_exactly_one_reply(
    fuzzer: Fuzzer, kind: Kind, identifier: str
) -> None:
    await fuzzer.check(kind, json.dumps(id_body(kind, identifier)).encode())


@FUZZ
@given(case=wrong_types())
async def test_wrong_types_in_any_field_get_exactly_one_reply(
    fuzzer: Fuzzer, case: tuple[Kind, bytes]
) -> None:
    await fuzzer.check(*case)


@FUZZ
@given(case=deep_bodies())
async def test_deep_nesting_gets_exactly_one_reply(
    fuzzer: Fuzzer, case: tuple[Kind, bytes]
) -> None:
    await fuzzer.check(*case)


async def test_worker_still_answers_a_valid_call_after_fuzzing(fuzzer: Fuzzer) -> None:
    reply = await fuzzer.bus.request("tool", tool_body("after-fuzz"))

    assert decode(reply) == {
        "callId": "after-fuzz",
        "source": "echo",
        "status": "success",
        "content": "x",
    }
