"""Who may use the console: the loopback rule, the console's token and its cookie, and the checks
that keep another web site from using a browser that can reach the console.

- On a loopback address (the default) the console serves whoever reaches it on this machine, as the
  embedded server's metrics do, but only under a loopback `Host`: a page of another site whose name
  resolves to 127.0.0.1 (DNS rebinding) is refused.
- On any other address it needs `--allow-remote` and its own token, kept in
  `<data_dir>/console-token` (mode 0600; never the NATS token, so a console login grants nothing
  on the bus). The token is exchanged once, on `/login`, for an HttpOnly, SameSite=Strict cookie
  whose value is derived from the token: it survives a restart of the console, and a new token
  revokes every cookie.
- A request that changes something (the form's POSTs) must come from the console's own page: its
  `Origin` is the console's, and its body is JSON, which a form of another site cannot send without
  a CORS preflight the console never answers.
"""

import hashlib
import hmac
from pathlib import Path

from ..embedded.data_dir import load_or_create_token
from ..monitoring.http import RemoteNotAllowed, is_loopback

TOKEN_FILE = "console-token"
COOKIE = "interaction_console"
_COOKIE_PURPOSE = b"interaction-worker console cookie v1"


def check_listen(host: str, *, allow_remote: bool) -> None:
    """Raises:
    RemoteNotAllowed: `host` is not a loopback address and remote use was not asked for."""
    if not is_loopback(host) and not allow_remote:
        raise RemoteNotAllowed(
            f"--listen {host}: a non-loopback address serves the bus's events and dead letters "
            "to the network; add --allow-remote (the page then asks for the console's token)"
        )


def console_token(data_dir: Path) -> tuple[str, Path]:
    """The console's token and its file, created (mode 0600, in a mode-0700 directory) if missing."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = data_dir / TOKEN_FILE
    return load_or_create_token(path), path


def cookie_value(token: str) -> str:
    return hmac.new(token.encode(), _COOKIE_PURPOSE, hashlib.sha256).hexdigest()


class Access:
    """The checks of one console: `token` None on loopback, the console's token otherwise."""

    def __init__(self, token: str | None) -> None:
        self.token = token
        self._cookie = None if token is None else cookie_value(token)

    @property
    def remote(self) -> bool:
        return self.token is not None

    def host_allowed(self, host_header: str | None) -> bool:
        """Loopback: the `Host` must name this machine. Remote: the token is the check."""
        if self.remote:
            return True
        if not host_header:
            return False
        host = (
            host_header.rsplit(":", 1)[0]
            if not host_header.endswith("]")
            else host_header
        )
        return is_loopback(host)

    def authenticated(self, cookie: str | None) -> bool:
        if self._cookie is None:
            return True
        return cookie is not None and hmac.compare_digest(cookie, self._cookie)

    def exchange(self, token: str) -> str | None:
        """The cookie's value for the right token, else None."""
        if self.token is None or self._cookie is None:
            return None
        if hmac.compare_digest(token.strip().encode(), self.token.encode()):
            return self._cookie
        return None


def same_origin(origin: str | None, host_header: str | None, scheme: str) -> bool:
    """Whether a request's `Origin` is the console itself (`scheme://Host`)."""
    if not origin or not host_header:
        return False
    return origin.lower() == f"{scheme}://{host_header}".lower()
