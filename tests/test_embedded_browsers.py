"""The embedded server's browser side (docs/configuration.md 3, "The embedded server"): the two users,
the read-only `ui` in an account of its own, its WebSocket listener, and a data directory of an earlier
version taken over with its streams. The `ui` user is the same over TCP as over WebSocket, so its
rights are tried here with nats-py; a real browser tries them in tests/examples/test_ui_browser.py."""

import asyncio
import json
import socket
import stat
from pathlib import Path

import anyio
import nats
import nats.errors
import pytest
from nats.aio.client import Client
from nats.js.api import StreamConfig

from interaction_worker.embedded import (
    BrowserAccess,
    EmbeddedNatsServer,
    EmbeddedServerError,
    WebSocketListener,
    remote_problem,
    ui_token_path,
)

START_BOUND = 30
STREAM = "UI_DELIVERIES"
ACCESS = BrowserAccess(subjects=("deliveries.*", "stored.*"), streams=(STREAM,))


async def connect(url: str, user: str, password: str) -> tuple[Client, list[str]]:
    """A connection without reconnects, and the errors the server sent it (permission violations)."""
    errors: list[str] = []

    async def remember(error: Exception) -> None:
        errors.append(str(error))

    nc = await nats.connect(
        url,
        user=user,
        password=password,
        error_cb=remember,
        allow_reconnect=False,
        max_reconnect_attempts=1,
        connect_timeout=2,
    )
    return nc, errors


async def direct_get(nc: Client, reply: str, body: dict[str, object]) -> None:
    await nc.publish(
        f"$JS.API.DIRECT.GET.{STREAM}", json.dumps(body).encode(), reply=reply
    )


def websocket_handshake(url: str) -> bytes:
    """The first bytes a WebSocket upgrade on `url` (ws://HOST:PORT) gets back."""
    host, port = url.removeprefix("ws://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(
            (
                f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        received = b""
        while b"INFO" not in received:
            chunk = sock.recv(4096)
            if not chunk:
                break
            received += chunk
    return received


async def test_a_browser_reads_the_deliveries_and_their_history_and_nothing_else(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    listener = WebSocketListener("127.0.0.1", 0)
    with anyio.fail_after(START_BOUND):
        async with EmbeddedNatsServer(
            data, port=0, websocket=listener, browsers=ACCESS
        ) as server:
            assert stat.S_IMODE(ui_token_path(data).stat().st_mode) == 0o600
            assert server.ui_token != server.token
            assert server.websocket_url is not None
            assert server.websocket_url.startswith("ws://127.0.0.1:")
            handshake = await anyio.to_thread.run_sync(
                websocket_handshake, server.websocket_url
            )
            assert handshake.startswith(b"HTTP/1.1 101 Switching Protocols")
            assert b"INFO" in handshake

            worker, _ = await connect(server.url, "worker", server.token)
            js = worker.jetstream()
            await js.add_stream(
                StreamConfig(name=STREAM, subjects=["stored.*"], allow_direct=True)
            )
            # A stream the browser must not be able to write to, as the ledger or the events.
            await js.add_stream(StreamConfig(name="LEDGER", subjects=["ledger.>"]))
            await js.publish("stored.k1", b'{"deliveryId": "k1"}')

            ui, errors = await connect(server.url, "ui", server.ui_token)
            live = await ui.subscribe("deliveries.*")
            inbox = await ui.subscribe("_INBOX.UI.history")
            await ui.flush()
            await worker.publish("deliveries.k2", b'{"deliveryId": "k2"}')
            assert (await live.next_msg(timeout=5)).data == b'{"deliveryId": "k2"}'
            await direct_get(ui, "_INBOX.UI.history", {"seq": 1})
            stored = await inbox.next_msg(timeout=5)
            assert stored.data == b'{"deliveryId": "k1"}'
            assert stored.headers is not None and stored.headers["Nats-Sequence"] == "1"

            # The stream's answer aimed at a stored subject reaches the UI account only.
            await direct_get(ui, "ledger.forged", {"seq": 1})
            await ui.publish("interaction.tool.call", b"{}")
            await ui.subscribe("interaction.tool.result.>")
            await ui.subscribe("_INBOX.>")
            await ui.flush()
            await asyncio.sleep(0.2)
            assert (await js.stream_info("LEDGER")).state.messages == 0
            # nats-py lowercases the server's words.
            assert sorted(errors) == [
                'nats: permissions violation for publish to "interaction.tool.call"',
                'nats: permissions violation for subscription to "_inbox.>"',
                'nats: permissions violation for subscription to "interaction.tool.result.>"',
            ]
            await ui.close()
            await worker.close()


async def test_a_data_directory_of_an_earlier_version_keeps_its_token_and_streams(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    # An earlier version's token file and lock, and its streams in the server's global account.
    (data / "token").write_text("an-earlier-token-1234567\n")
    (data / "token").chmod(0o600)
    (data / "lock").write_text("")
    with anyio.fail_after(2 * START_BOUND):
        async with EmbeddedNatsServer(data, port=0) as first:
            worker, _ = await connect(first.url, "worker", "an-earlier-token-1234567")
            await worker.jetstream().add_stream(
                StreamConfig(name="KEPT", subjects=["kept.>"])
            )
            await worker.jetstream().publish("kept.1", b"stored before")
            await worker.close()
        jetstream = data / "nats" / "jetstream"
        (jetstream / "INTERACTION").rename(jetstream / "$G")
        ui_token_path(data).unlink()  # an earlier version had none
        async with EmbeddedNatsServer(data, port=0) as second:
            assert second.token == "an-earlier-token-1234567"
            worker, _ = await connect(second.url, "worker", second.token)
            message = await worker.jetstream().get_last_msg("KEPT", "kept.1")
            await worker.close()
    assert message.data == b"stored before"
    assert not (jetstream / "$G").exists()


def test_a_listener_beyond_loopback_needs_allow_remote_and_a_certificate(
    tmp_path: Path,
) -> None:
    local = WebSocketListener("127.0.0.1", 8080)
    remote = WebSocketListener("0.0.0.0", 8080)
    secured = WebSocketListener(
        "0.0.0.0", 8080, cert=tmp_path / "c.pem", key=tmp_path / "k.pem"
    )
    assert remote_problem(local, allow_remote=False) is None
    assert remote_problem(WebSocketListener("localhost", 1), allow_remote=False) is None
    assert "add --allow-remote" in str(remote_problem(remote, allow_remote=False))
    assert "INTERACTION_NATS_WS_CERT and INTERACTION_NATS_WS_KEY" in str(
        remote_problem(remote, allow_remote=True)
    )
    assert remote_problem(secured, allow_remote=True) is None


async def test_a_websocket_port_in_use_is_one_clear_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        listener = WebSocketListener("127.0.0.1", port)
        server = EmbeddedNatsServer(tmp_path / "data", port=0, websocket=listener)
        with anyio.fail_after(START_BOUND), pytest.raises(EmbeddedServerError) as err:
            await server.start()
    assert str(err.value) == (
        f"nats.websocket: cannot listen on 127.0.0.1:{port}: address already in use"
    )
