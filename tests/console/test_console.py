"""The console over HTTP, against a real worker on a real nats-server: what its event stream carries,
the form's requests, the remote rule and the token's cookie, history replayed from the events stream,
and the bounds on a page that does not read."""

import asyncio
import json
import os
import re
import stat
import uuid
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
import httpx
import nats
import pytest
from console_harness import Frame, collect, messages, running_console

from interaction_worker.cli.main import main
from interaction_worker.console import (
    FeedOptions,
    Hub,
    RemoteNotAllowed,
    build_event,
    check_listen,
    console_token,
    sink_subject,
)
from interaction_worker.console.access import COOKIE
from interaction_worker.testing import NatsServer, NatsServerFactory


def has(kind: str, key: str) -> Any:
    return lambda seen: any(
        m["kind"] == kind and m["key"] == key for m in messages(seen)
    )


async def test_the_stream_carries_results_observations_dead_letters_and_deliveries(
    serve_worker: Any, nats_server: NatsServer, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("hello", encoding="utf-8")
    run = uuid.uuid4().hex[:8]
    handle = await serve_worker(
        workspace=tmp_path,
        output={
            "sinks": [{"type": "nats", "name": "ui", "subject": f"ui.{run}.{{key}}"}]
        },
    )
    options = FeedOptions(
        prefix=handle.prefix, delivery_subjects=(f"ui.{run}.{{key}}",)
    )
    async with (
        running_console(nats_server.url, options) as console,
        httpx.AsyncClient() as http,
    ):
        started = anyio.Event()
        receipt, delivery = has("receipt", "d-1"), has("delivery", "d-1")

        def done(seen: list[Frame]) -> bool:
            return bool(receipt(seen) and delivery(seen))

        async def act() -> None:
            await started.wait()
            await handle.client.call_tool("read_text", {"path": "a.txt"}, call_id="c-1")
            with pytest.raises(Exception, match="PERMISSION_DENIED"):
                await handle.client.call_tool("nope", {}, call_id="bad-1")
            await handle.client.deliver(
                {"deliveryId": "d-1", "message": {"role": "assistant", "content": "hi"}}
            )

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(act)
            seen = await collect(http, f"{console.url}/events", done, started=started)

    assert [f.event for f in seen[:2]] == ["hello", "status"]
    assert seen[1].data["nats"] == "connected"
    shown = {(m["family"], m["kind"], m["key"]): m for m in messages(seen)}
    result = shown["tool", "result", "c-1"]
    assert result["status"] == "success" and result["body"]["content"] == "hello"
    assert result["headers"]["Interaction-Key"] == "c-1"
    assert shown["tool", "observation", "c-1"]["status"] == "success"
    dead = shown["dead", "tool", "bad-1"]
    assert (dead["status"], dead["code"]) == ("error", "PERMISSION_DENIED")
    assert json.loads(dead["body"]["payload"])["call"]["name"] == "nope"
    assert shown["output", "receipt", "d-1"]["status"] == "accepted"
    delivery = shown["delivery", "delivery", "d-1"]
    assert (
        delivery["subject"] == f"ui.{run}.d-1"
        and delivery["body"]["message"]["content"] == "hi"
    )
    assert all(
        f.id is not None and f.id.endswith(f":{f.data['seq']}") for f in seen[2:]
    )


async def test_the_form_sends_a_call_and_a_delivery_from_its_own_origin_only(
    serve_worker: Any, nats_server: NatsServer, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("hello", encoding="utf-8")
    handle = await serve_worker(workspace=tmp_path)
    async with running_console(
        nats_server.url, FeedOptions(prefix=handle.prefix)
    ) as console:
        url = console.url
        assert url is not None
        same = {"Origin": url, "Content-Type": "application/json"}
        async with httpx.AsyncClient(base_url=url) as http:
            call = {"name": "read_text", "arguments": {"path": "a.txt"}, "id": "form-1"}
            answer = (await http.post("/api/call", json=call, headers=same)).json()
            assert answer["result"]["callId"] == "form-1"
            assert answer["observation"]["message"]["content"] == "hello"
            refused = (
                await http.post("/api/call", json={"name": "nope"}, headers=same)
            ).json()
            assert refused["error"]["code"] == "PERMISSION_DENIED"
            sent = await http.post(
                "/api/deliver", json={"text": "x", "id": "dl-1"}, headers=same
            )
            assert sent.json()["receipt"] == {
                "deliveryId": "dl-1",
                "status": "accepted",
            }

            other = {**same, "Origin": "http://evil.test"}
            assert (
                await http.post("/api/call", json=call, headers=other)
            ).status_code == 403
            no_origin = {"Content-Type": "application/json"}
            assert (
                await http.post("/api/call", json=call, headers=no_origin)
            ).status_code == 403
            cross = {**same, "Sec-Fetch-Site": "cross-site"}
            assert (
                await http.post("/api/call", json=call, headers=cross)
            ).status_code == 403
            form = {"Origin": url, "Content-Type": "application/x-www-form-urlencoded"}
            assert (
                await http.post("/api/call", content=b"name=x", headers=form)
            ).status_code == 415
            rebound = await http.get("/events", headers={"Host": "evil.test"})
            assert rebound.status_code == 403
            page = await http.get("/static/index.html")
            assert "script-src 'self'" in page.headers["content-security-policy"]
            assert page.headers["x-content-type-options"] == "nosniff"


async def test_a_body_over_the_limit_is_refused_413_saying_so_and_one_not_json_400(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    big = json.dumps({"name": "read_text", "text": "a" * 300 * 1024}).encode()

    async def chunked() -> AsyncIterator[
        bytes
    ]:  # no Content-Length: read until past the limit
        for start in range(0, len(big), 65536):
            yield big[start : start + 65536]

    too_large = {
        "error": {"code": "TOO_LARGE", "message": "the body is larger than 256 KiB"}
    }
    token, _ = console_token(tmp_path / "data")
    options = FeedOptions(prefix=f"p{uuid.uuid4().hex[:8]}")
    async with running_console(nats_server.url, options, token=token) as console:
        url = console.url or ""
        same = {"Origin": url, "Content-Type": "application/json"}
        async with httpx.AsyncClient(base_url=url) as http:
            login = await http.post("/login", content=big, headers={"Origin": url})
            assert (login.status_code, login.json()) == (413, too_large)
            right = await http.post("/login", data={"token": token})
            http.cookies.set(COOKIE, right.cookies[COOKIE])
            for path in ("/api/call", "/api/deliver"):
                for body in (big, chunked()):
                    answer = await http.post(path, content=body, headers=same)
                    assert (answer.status_code, answer.json()) == (413, too_large)
                broken = await http.post(path, content=b'{"name": ', headers=same)
                assert broken.status_code == 400
                assert broken.json()["error"]["code"] == "INVALID_JSON"


def test_the_page_names_no_tool_of_its_own() -> None:
    """The form's tool and arguments come from the worker's list (P.tool.list, through
    /api/tools): the page itself offers none, which a worker might not serve."""
    page = (
        resources.files("interaction_worker.console") / "static" / "index.html"
    ).read_text(encoding="utf-8")
    (name,) = re.findall(r"<input id=\"call-name\"[^>]*>", page)
    (arguments,) = re.findall(r"<textarea id=\"call-arguments\"[^>]*>([^<]*)<", page)

    assert "value=" not in name and arguments == ""


async def test_a_remote_console_needs_its_token_exchanged_for_a_cookie(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    token, path = console_token(tmp_path / "data")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert console_token(tmp_path / "data")[0] == token  # kept, not replaced
    options = FeedOptions(prefix=f"p{uuid.uuid4().hex[:8]}")
    async with running_console(nats_server.url, options, token=token) as console:
        async with httpx.AsyncClient(base_url=console.url or "") as http:
            assert (await http.get("/events")).status_code == 401
            assert (await http.get("/api/tools")).status_code == 401
            assert (await http.get("/")).headers["location"] == "/login"
            wrong = await http.post("/login", data={"token": "not-it"})
            assert wrong.status_code == 303 and COOKIE not in wrong.cookies
            right = await http.post("/login", data={"token": token})
            assert right.status_code == 303 and right.headers["location"] == "/"
            set_cookie = right.headers["set-cookie"]
            assert "HttpOnly" in set_cookie and "SameSite=strict" in set_cookie
            assert (
                token not in set_cookie
            )  # the cookie is derived, never the token itself
            http.cookies.set(COOKIE, right.cookies[COOKIE])
            seen = await collect(http, "/events", lambda s: len(s) >= 2)
            assert seen[1].data["nats"] == "connected"


def test_a_non_loopback_address_needs_allow_remote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        check_listen(host, allow_remote=False)
    for host in ("0.0.0.0", "192.168.1.10", "::", "example.test"):
        with pytest.raises(RemoteNotAllowed):
            check_listen(host, allow_remote=False)
        check_listen(host, allow_remote=True)
    code = main(
        [
            *("console", "--listen", "0.0.0.0:0", "--data-dir", str(tmp_path)),
            *("--config", os.devnull),  # never a worker.yaml found upwards
        ]
    )
    assert code == 2
    assert "--allow-remote" in capsys.readouterr().err
    assert not (tmp_path / "console-token").exists()


async def test_a_durable_worker_s_history_is_replayed_to_a_page_opened_late(
    serve_worker: Any, nats_server: NatsServer, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("hello", encoding="utf-8")
    tag = uuid.uuid4().hex[:10].upper()
    durable = {
        "enabled": True,
        "calls_stream": f"CALLS_{tag}",
        "events_stream": f"EVENTS_{tag}",
        "dead_stream": f"DEAD_{tag}",
    }
    handle = await serve_worker(
        workspace=tmp_path, durable=durable, idempotency={"bucket": f"ledger_{tag}"}
    )
    for n in range(3):
        await handle.client.call_tool("read_text", {"path": "a.txt"}, call_id=f"h-{n}")
    options = FeedOptions(
        prefix=handle.prefix, events_stream=f"EVENTS_{tag}", history=4
    )
    async with (
        running_console(nats_server.url, options) as console,
        httpx.AsyncClient() as http,
    ):
        seen = await collect(http, f"{console.url}/events", has("observation", "h-2"))
        await handle.client.call_tool("read_text", {"path": "a.txt"}, call_id="live-1")
        later = await collect(
            http, f"{console.url}/events", has("observation", "live-1")
        )

    replayed = [(m["kind"], m["key"]) for m in messages(seen)]
    assert replayed == [
        ("result", "h-1"),
        ("observation", "h-1"),
        ("result", "h-2"),
        ("observation", "h-2"),
    ]
    assert all(m.get("replayed") for m in messages(seen))
    # Read from the stream: the last four only, numbered as the first four this console showed.
    assert [m["seq"] for m in messages(seen)] == [1, 2, 3, 4]
    live = [m for m in messages(later) if m["key"] == "live-1"]
    assert [m["kind"] for m in live] == ["result", "observation"]
    assert not any(m.get("replayed") for m in live)
    # The history holds four events: the two replayed first went when the live ones came.
    assert [(m["kind"], m["key"]) for m in messages(later)] == replayed[2:] + [
        ("result", "live-1"),
        ("observation", "live-1"),
    ]


async def test_a_page_that_does_not_read_loses_events_instead_of_growing_the_console() -> (
    None
):
    hub = Hub(history=3, queue_size=2)
    stream = hub.stream()
    assert (await anext(stream)).startswith(b"retry: 1000\nevent: hello")
    assert b"event: status" in await anext(stream)
    for seq in range(1, 8):
        hub.publish(
            build_event(
                seq,
                f"p.tool.result.k{seq}",
                b"{}",
                {},
                prefix="p",
                instance=hub.instance,
            )
        )
    assert [e.seq for e in hub.history] == [5, 6, 7]
    first = await anext(stream)
    assert b"event: gap" in first and json.loads(first.split(b"data: ")[1]) == {
        "missed": 5
    }
    assert b'"seq":1' in await anext(stream)
    assert b'"seq":2' in await anext(stream)
    hub.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(stream), 1)
    assert hub.pages == 0


def test_a_sink_s_key_token_becomes_a_wildcard_and_credentials_are_redacted() -> None:
    assert sink_subject("ui.messages.{key}") == "ui.messages.*"
    assert sink_subject("ui.m-{key}.out") == "ui.*.out"
    event = build_event(
        1,
        "ui.x",
        b'{"deliveryId": "a.b"}',
        {"Authorization": "Bearer s", "X-Api-Key": "k", "Nats-Msg-Id": "m"},
        prefix="p",
        instance="i",
    )
    document = json.loads(event.frame.split(b"data: ", 1)[1])
    assert document["headers"] == {
        "Authorization": "[redacted]",
        "X-Api-Key": "[redacted]",
        "Nats-Msg-Id": "m",
    }
    assert (document["family"], document["key"], document["status"]) == (
        "delivery",
        "a=2Eb",
        "delivered",
    )


@pytest.mark.slow  # a server killed, and started again for the console to reconnect
async def test_a_call_from_the_form_ends_when_the_connection_is_lost(
    nats_server_factory: NatsServerFactory,
) -> None:
    """Not at the request's timeout: as soon as the console's connection goes. The server then
    comes back on its port, and the console with it: a console stopped while it retries a server
    that is gone can hang in nats-py's connect, which is not what this test is about."""
    server = nats_server_factory()
    nc = await nats.connect(server.url, allow_reconnect=False)
    arrived = asyncio.Event()

    async def busy(msg: Any) -> None:
        arrived.set()  # and never answers

    await nc.subscribe("lost.tool.call", cb=busy)
    async with running_console(
        server.url, FeedOptions(prefix="lost", timeout=60)
    ) as console:
        url = console.url
        assert url is not None
        same = {"Origin": url, "Content-Type": "application/json"}
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            call = {"name": "read_text", "arguments": {}, "id": "form-lost"}
            answer = asyncio.create_task(
                http.post("/api/call", json=call, headers=same)
            )
            with anyio.fail_after(30):
                await arrived.wait()
            await nc.close()
            server.process.kill()
            with anyio.fail_after(10):
                response = await answer
            await anyio.to_thread.run_sync(server.process.wait)
            nats_server_factory("-p", str(server.port))
            with anyio.fail_after(30):
                await console.feed.connected.wait()
    assert response.status_code == 503
    assert response.json()["error"] == {
        "code": "NOT_CONNECTED",
        "message": "connection to NATS lost while waiting for the reply to call form-lost",
    }
