"""The publishing adapter writes, byte for byte, what nats-py's public `publish` writes.

Each case publishes the same list of messages twice on a real connection, once through
`Client.publish` one message after another and once through `WirePublisher`, and compares the bytes
that reach the socket. The lists are what the worker's handler publishes for tool calls (success,
failure, trace headers, Interaction-Reply-To, no reply subject, ids that are not header-safe), its
refusals (error replies with the services headers, dead letters), receipts' headers, and values nats-py
rewrites (spaces, CR, LF, non-ASCII). A nats-py release that changes its framing fails here.

Where the adapter leaves the fast path (an invalid header name, a value UTF-8 cannot encode, a payload
over max_payload, an empty or invalid subject, a connection without the non-public methods), the
messages before are written and the public `publish` raises what it always raised.
"""

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import BadHeaderError, BadSubjectError, MaxPayloadError

from interaction_worker import InteractionWorker, Sandbox
from interaction_worker.errors import Overloaded, ShuttingDown
from interaction_worker.subscribers import Incoming, Publish
from interaction_worker.subscribers.outgoing import (
    JSON_HEADERS,
    WireHeaders,
    event_headers,
)
from interaction_worker.subscribers.wire_publish import WirePublisher

TRACE = {
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "tracestate": "vendor=opaque,other=1",
}


class Echo:
    name = "echo"
    input_schema: dict[str, Any] = {"type": "object"}

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: Any) -> Any:
        if arguments.get("fail"):
            return {
                "status": "failed",
                "error": {"code": "TOOL_ERROR", "message": "no"},
            }
        return {"status": "success", "content": "x" * 64}


def call(call_id: str, **arguments: Any) -> bytes:
    return json.dumps(
        {"call": {"id": call_id, "name": "echo", "arguments": arguments}}
    ).encode()


async def handled() -> list[list[Publish]]:
    """What the worker's handler publishes for the messages it meets."""
    worker = InteractionWorker(tools=[Echo()], sandbox=Sandbox(tools=["echo"]))
    handler = worker.message_handler()
    tool = "interaction.tool.call"
    messages = [
        ("tool", Incoming(tool, call("call-1"), None, "_INBOX.a.1")),
        ("tool", Incoming(tool, call("call-2", fail=True), None, "_INBOX.a.2")),
        ("tool", Incoming(tool, call("call-3"), None, None)),  # fire-and-forget
        ("tool", Incoming(tool, call("call 4 / é"), None, "_INBOX.a.4")),
        ("tool", Incoming(tool, call("call-5"), dict(TRACE), "_INBOX.a.5")),
        (
            "tool",
            Incoming(
                tool,
                call("call-6"),
                {"Interaction-Reply-To": "_INBOX.elsewhere.6", **TRACE},
                "_INBOX.a.6",
            ),
        ),
        ("tool", Incoming(tool, call("call-7", unknown=1), None, "_INBOX.a.7")),
        ("tool", Incoming(tool, b"{not json", None, "_INBOX.a.8")),
        ("tool", Incoming(tool, b'{"call": {"id": "call-9"}}', None, "_INBOX.a.9")),
        (
            "tool",
            Incoming(
                tool, call("call-10"), {"Interaction-Reply-To": "bad"}, "_INBOX.a"
            ),
        ),
        (
            "observe",
            Incoming("interaction.observe", b"{}", dict(TRACE), "_INBOX.a.11"),
        ),
        ("list", Incoming("interaction.tools.list", b"{}", None, "_INBOX.a.12")),
    ]
    lists = [await handler.handle(kind, msg) for kind, msg in messages]  # type: ignore[arg-type]
    overloaded = Incoming(tool, call("call-13"), dict(TRACE), "_INBOX.a.13")
    lists.append(handler.refuse("tool", overloaded, Overloaded(), target="_INBOX.a.13"))
    lists.append(handler.refuse("tool", overloaded, ShuttingDown()))
    return lists


def synthetic() -> list[list[Publish]]:
    """Header sets beyond the handler's: receipts' events, and values nats-py rewrites."""
    receipt = event_headers(
        key="delivery-1",
        id_header="Interaction-Delivery-Id",
        identifier="delivery-1",
        status="failed",
        error_code="SINK_UNAVAILABLE",
        msg_id="interaction.output.receipt:delivery-1",
        trace=dict(TRACE),
    )
    return [
        [
            ("_INBOX.r.1", b"{}", JSON_HEADERS),
            ("interaction.output.receipt.d", b"{}", receipt),
        ],
        [("_INBOX.r.2", b"", {})],
        [
            (
                "_INBOX.r.3",
                b"x",
                {"A": " padded ", "B": "line\r\nbreak", "C": "\tboth\n"},
            )
        ],
        [("_INBOX.r.4", b"x", {"Non-Ascii": "héllo wörld ✓", "lower-case": "v"})],
        [
            (
                "_INBOX.r.5",
                b"x",
                {"  Spaced  ": "v", "": "skipped", "   ": "skipped too"},
            )
        ],
        [("_INBOX.r.6", b"x", {"Empty": "", "Blank": "   "})],
        [("_INBOX.r.7", b"x" * 5000, {"Content-Type": "application/octet-stream"})],
    ]


@pytest.fixture
async def connection(nats_url: str) -> AsyncIterator[tuple[Client, list[bytes]]]:
    """A connection whose socket writes are recorded (and still sent)."""
    client = await nats.connect(nats_url)
    written: list[bytes] = []
    transport: Any = client._transport
    send = transport.writelines

    def writelines(data: list[bytes]) -> None:
        written.extend(data)
        send(data)

    transport.writelines = writelines
    try:
        yield client, written
    finally:
        await client.close()


async def written_by(written: list[bytes], publish: Awaitable[None]) -> bytes:
    """The bytes `publish` has the flusher write, PINGs left out."""
    written.clear()
    await publish
    for _ in range(1000):
        if written:
            break
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    return b"".join(chunk for chunk in written if chunk != b"PING\r\n")


async def public(client: Client, publishes: list[Publish]) -> None:
    for subject, payload, headers in publishes:
        await client.publish(subject, payload, headers=headers)


async def assert_same_bytes(
    client: Client, written: list[bytes], publishes: list[Publish]
) -> None:
    expected = await written_by(written, public(client, publishes))
    actual = await written_by(written, WirePublisher(client).publish(publishes))
    assert expected
    assert actual == expected


async def test_the_handlers_publishes_are_written_as_nats_py_writes_them(
    connection: tuple[Client, list[bytes]],
) -> None:
    client, written = connection
    lists = await handled()
    names = {
        name for publishes in lists for _, _, headers in publishes for name in headers
    }
    # The header sets the worker sends are all here.
    assert {
        "Content-Type",
        "Interaction-Key",
        "Interaction-Call-Id",
        "Interaction-Status",
        "Interaction-Error-Code",
        "Nats-Msg-Id",
        "Nats-Service-Error",
        "Nats-Service-Error-Code",
        "traceparent",
        "tracestate",
    } <= names
    # Events whose blocks the templates built (no trace headers), success and failure alike.
    templated = [
        headers
        for publishes in lists
        for _, _, headers in publishes
        if type(headers) is WireHeaders and headers is not JSON_HEADERS
    ]
    assert {h["Interaction-Status"] for h in templated} >= {"success", "failed"}
    for publishes in lists:
        await assert_same_bytes(client, written, publishes)


def test_headers_with_their_block_are_read_only_and_copied_as_plain_dicts() -> None:
    with pytest.raises(TypeError):
        JSON_HEADERS["Content-Type"] = "text/plain"
    with pytest.raises(TypeError):
        JSON_HEADERS.update({"A": "b"})
    copied = {**JSON_HEADERS, "Nats-Msg-Id": "x"}
    assert type(copied) is dict and type(dict(JSON_HEADERS)) is dict
    assert JSON_HEADERS == {"Content-Type": "application/json"}
    for copied in (copy.copy(JSON_HEADERS), copy.deepcopy(JSON_HEADERS)):
        assert type(copied) is WireHeaders and copied == JSON_HEADERS
        assert copied.wire == JSON_HEADERS.wire


async def test_other_header_sets_are_written_as_nats_py_writes_them(
    connection: tuple[Client, list[bytes]],
) -> None:
    client, written = connection
    for publishes in synthetic():
        await assert_same_bytes(client, written, publishes)


async def test_a_connection_that_skips_subject_validation_is_written_the_same(
    nats_url: str,
) -> None:
    client = await nats.connect(nats_url, skip_subject_validation=True)
    try:
        written: list[bytes] = []
        transport: Any = client._transport
        send = transport.writelines

        def writelines(data: list[bytes]) -> None:
            written.extend(data)
            send(data)

        transport.writelines = writelines
        for publishes in await handled():
            await assert_same_bytes(client, written, publishes)
    finally:
        await client.close()


async def test_the_messages_arrive_in_order_with_their_headers(
    connection: tuple[Client, list[bytes]], nats_url: str
) -> None:
    client, _ = connection
    received: list[Msg] = []
    done = asyncio.Event()
    subscriber = await nats.connect(nats_url)
    try:

        async def on_message(msg: Msg) -> None:
            received.append(msg)
            if len(received) == 3:
                done.set()

        prefix = (
            subscriber.new_inbox()
        )  # a subject of this test's own on the shared server
        await subscriber.subscribe(f"{prefix}.>", cb=on_message)
        # nats-py's flush() writes its PING ahead of the SUB still pending: the second one follows it.
        await subscriber.flush()
        await subscriber.flush()
        publishes: list[Publish] = [
            (f"{prefix}.reply", b"r", JSON_HEADERS),
            (f"{prefix}.result", b"e1", {**JSON_HEADERS, "Nats-Msg-Id": "a:1"}),
            (f"{prefix}.observation", b"e2", {**JSON_HEADERS, "Nats-Msg-Id": "b:1"}),
        ]
        await WirePublisher(client).publish(publishes)
        async with asyncio.timeout(10):
            await done.wait()
        assert [(m.subject, m.data, m.headers) for m in received] == [
            (subject, payload, headers) for subject, payload, headers in publishes
        ]
        assert client.stats["out_msgs"] >= 3
    finally:
        await subscriber.close()


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (("_INBOX.x", b"x", {"Bad Name": "v"}), BadHeaderError),
        (("_INBOX.x", b"x", {"Bad:Name": "v"}), BadHeaderError),
        (("", b"x", {}), BadSubjectError),
        (("_INBOX.x", b"x", {"Surrogate": "\udc80"}), UnicodeEncodeError),
    ],
)
async def test_what_nats_py_refuses_is_refused_after_the_messages_before_it(
    connection: tuple[Client, list[bytes]],
    bad: Publish,
    error: type[Exception],
) -> None:
    client, written = connection
    first: Publish = ("_INBOX.first", b"1", JSON_HEADERS)
    last: Publish = ("_INBOX.last", b"3", JSON_HEADERS)

    async def through(publish: Callable[[list[Publish]], Awaitable[None]]) -> None:
        with pytest.raises(error):
            await publish([first, bad, last])

    expected = await written_by(written, through(lambda p: public(client, p)))
    actual = await written_by(written, through(WirePublisher(client).publish))
    assert expected == actual
    assert b"_INBOX.first" in actual and b"_INBOX.last" not in actual


async def test_a_payload_over_max_payload_is_refused_as_publish_refuses_it(
    connection: tuple[Client, list[bytes]],
) -> None:
    client, _ = connection
    too_large = b"x" * (client.max_payload + 1)
    with pytest.raises(MaxPayloadError):
        await WirePublisher(client).publish([("_INBOX.big", too_large, JSON_HEADERS)])


async def test_a_subject_with_a_space_is_refused_when_the_connection_validates_subjects(
    connection: tuple[Client, list[bytes]],
) -> None:
    client, _ = connection
    with pytest.raises(BadSubjectError):
        await WirePublisher(client).publish([("_INBOX.a b", b"x", JSON_HEADERS)])


async def test_without_the_non_public_methods_the_public_publish_writes_everything(
    connection: tuple[Client, list[bytes]],
) -> None:
    client, written = connection
    publisher = WirePublisher(client)
    hidden: Any = object.__new__(type("Bare", (), {}))
    publisher._fast = WirePublisher(hidden)._fast
    assert not publisher._fast
    for publishes in await handled():
        expected = await written_by(written, public(client, publishes))
        actual = await written_by(written, publisher.publish(publishes))
        assert actual == expected


async def test_an_acknowledgement_is_written_as_msg_ack_writes_it(
    connection: tuple[Client, list[bytes]],
) -> None:
    client, written = connection
    reply = "$JS.ACK.CALLS.workers-tool.1.42.42.1800000000000000000.0"
    expected = await written_by(written, Msg(client, reply=reply).ack())
    actual = await written_by(
        written, WirePublisher(client).acknowledge(Msg(client, reply=reply))
    )
    assert expected == b"PUB " + reply.encode() + b"  0\r\n\r\n"
    assert actual == expected
