"""MCP servers with sessions, for the tests of servers that restart: ASGI wrappers around an SDK app.

An SDK server of this version answers the 2026 protocol, which has no sessions, and the worker's
client speaks it when it can. `handshake_era` turns such a server into one of the 2025-11-25
protocol, the one with `Mcp-Session-Id` sessions that most deployed servers speak: the client then
opens a session with `initialize`. Restarted, the SDK server answers the old session id with 404.
`refusing_with_400` makes it answer as the reference server-everything does instead.
"""

import json
from typing import Any

from mcp.types import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Scope, Send

# What server-everything answers a request whose session it does not know (HTTP 400, no id).
EVERYTHING_REFUSAL: dict[str, Any] = {
    "jsonrpc": "2.0",
    "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"},
}


def handshake_era(app: ASGIApp) -> ASGIApp:
    """`app`, refusing every protocol version after the handshake era as a 2025 server does (-32022
    naming the versions it speaks), so that clients fall back to `initialize` and a session."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        version = _header(scope, b"mcp-protocol-version")
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            error = {
                "code": UNSUPPORTED_PROTOCOL_VERSION,
                "message": "Unsupported protocol version",
                "data": {
                    "supported": list(HANDSHAKE_PROTOCOL_VERSIONS),
                    "requested": version,
                },
            }
            await _answer(send, 400, {"jsonrpc": "2.0", "id": None, "error": error})
            return
        await app(scope, receive, send)

    return wrapped


def refusing_with_400(app: ASGIApp) -> ASGIApp:
    """`app`, answering a session id it did not issue with server-everything's 400 instead of 404."""
    issued: set[str] = set()

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        session = _header(scope, b"mcp-session-id")
        if scope["type"] == "http" and session is not None and session not in issued:
            await _answer(send, 400, EVERYTHING_REFUSAL)
            return

        async def recording(message: Any) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name.lower() == b"mcp-session-id":
                        issued.add(value.decode("latin-1"))
            await send(message)

        await app(scope, receive, recording)

    return wrapped


def _header(scope: Scope, name: bytes) -> str | None:
    if scope["type"] != "http":
        return None
    for key, value in scope["headers"]:
        if key.lower() == name:
            text: str = value.decode("latin-1")
            return text
    return None


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
