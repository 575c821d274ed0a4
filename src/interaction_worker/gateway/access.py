"""Who may use the gateway over HTTP (docs/gateway.md, "Serving over HTTP").

- On a loopback address (the default) it serves whoever reaches it on this machine, as the console
  does, but only under a loopback `Host` and `Origin`: the SDK's `TransportSecuritySettings` refuse
  a page of another site whose name resolves to 127.0.0.1 (DNS rebinding), 421 or 403.
- On any other address it needs `--allow-remote`, TLS, and `Authorization: Bearer <token>` with
  the token of `<data_dir>/gateway-token` (mode 0600, created on first use; never the NATS token,
  so the gateway's token grants nothing on the bus). A page of another site cannot send that
  header, so the token is the check there, as the console's token is.
"""

import hmac
from collections.abc import Iterable
from pathlib import Path

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from ..embedded.data_dir import load_or_create_token
from ..monitoring.http import RemoteNotAllowed, is_loopback

TOKEN_FILE = "gateway-token"
# The names a client on this machine reaches a loopback server by. The SDK's settings match a
# name exactly or with any port (`NAME:*`); they have no pattern for all of 127/8 or *.localhost.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_REALM = 'Bearer realm="interaction-worker"'


def gateway_token_path(data_dir: Path) -> Path:
    """The file of the gateway's bearer token: the one place that names it, so that the paths no
    tool may read can name it too."""
    return data_dir / TOKEN_FILE


def gateway_token(data_dir: Path) -> tuple[str, Path]:
    """The gateway's token and its file, created (mode 0600, in a mode-0700 directory) if missing."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = gateway_token_path(data_dir)
    return load_or_create_token(path), path


def check_remote(
    host: str, *, allow_remote: bool, tls: bool, option: str = "--http"
) -> None:
    """Raises:
    RemoteNotAllowed: a non-loopback address without `--allow-remote`, or remote use without TLS."""
    if not is_loopback(host) and not allow_remote:
        raise RemoteNotAllowed(
            f"{option} {host}: a non-loopback address offers the fleet's tools to the network; "
            "add --allow-remote (with --tls-cert and --tls-key; hosts then send the gateway's token)"
        )
    if allow_remote and not tls:
        raise RemoteNotAllowed(
            "--allow-remote needs --tls-cert and --tls-key: the bearer token must not cross the "
            "network in clear"
        )


def transport_security(host: str, *, remote: bool) -> TransportSecuritySettings:
    """The `Host` and `Origin` a request may carry: the loopback names (and `host` itself, when it
    is a loopback address of its own), with or without a port, over http or https. Beyond loopback
    the bearer token is the check and any name is allowed, as for the console."""
    if remote:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    shown = f"[{host}]" if ":" in host else host
    names = [*LOOPBACK_NAMES]
    if is_loopback(host) and shown not in names:
        names.append(shown)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(_with_ports(names)),
        allowed_origins=list(
            _with_ports(
                f"{scheme}://{name}" for scheme in ("http", "https") for name in names
            )
        ),
    )


def _with_ports(values: Iterable[str]) -> Iterable[str]:
    for value in values:
        yield value
        yield f"{value}:*"


class BearerGate:
    """An ASGI app that lets through only requests with `Authorization: Bearer <token>`; any other
    is answered 401 with a `WWW-Authenticate` header, before the MCP transport reads its body."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                given = value
                break
        if hmac.compare_digest(given, self._expected):
            await self.app(scope, receive, send)
            return
        challenge = _REALM if not given else f'{_REALM}, error="invalid_token"'
        body = (
            b'{"error": "unauthorized: send Authorization: Bearer <the gateway token>"}'
        )
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"www-authenticate", challenge.encode()),
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
