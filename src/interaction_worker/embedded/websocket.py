"""The embedded server's WebSocket listener for browsers (`nats.websocket`, docs/configuration.md 3):
on loopback without TLS for local work, beyond it only with a certificate (`run --allow-remote` and
INTERACTION_NATS_WS_CERT / INTERACTION_NATS_WS_KEY)."""

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from .errors import EmbeddedServerError
from .process import quote

CERT_VARIABLE = "INTERACTION_NATS_WS_CERT"
KEY_VARIABLE = "INTERACTION_NATS_WS_KEY"


@dataclass(frozen=True)
class WebSocketListener:
    """Where browsers reach the server: `port` 0 takes a free one; `cert` and `key` (PEM files)
    turn TLS on (`wss://`)."""

    host: str
    port: int
    cert: Path | None = None
    key: Path | None = None

    @property
    def tls(self) -> bool:
        return self.cert is not None and self.key is not None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def remote_problem(listener: WebSocketListener, *, allow_remote: bool) -> str | None:
    """Why the listener may not open as asked, or None: beyond loopback it needs `allow_remote`
    and a certificate, since a browser's password would otherwise cross the network in clear."""
    if is_loopback(listener.host):
        return None
    if not allow_remote:
        return (
            f"nats.websocket: {listener.host} is not a loopback address; add --allow-remote "
            f"(with {CERT_VARIABLE} and {KEY_VARIABLE}) to serve browsers beyond this machine"
        )
    if not listener.tls:
        return (
            f"nats.websocket: a listener beyond loopback needs TLS: set {CERT_VARIABLE} and "
            f"{KEY_VARIABLE}"
        )
    return None


def websocket_config(listener: WebSocketListener) -> str:
    """The server configuration's `websocket` block."""
    problem = remote_problem(listener, allow_remote=True)
    if problem is not None:
        raise EmbeddedServerError(problem)
    # nats-server reads port 0 as "no listener" and -1 as "any free port".
    port = listener.port or -1
    if listener.cert is not None and listener.key is not None:
        security = (
            f"  tls {{ cert_file: {quote(str(listener.cert))}, "
            f"key_file: {quote(str(listener.key))} }}"
        )
    else:
        security = "  no_tls: true"
    return "\n".join(
        [
            "websocket {",
            f"  host: {quote(listener.host)}",
            f"  port: {port}",
            security,
            "}",
        ]
    )
