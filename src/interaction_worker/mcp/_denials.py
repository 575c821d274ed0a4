"""A server that refused the worker's credentials (HTTP 401, or 403 for want of scope), as the
connection tells its callers (docs/configuration.md, "MCP servers behind OAuth").

The message names the server, the scopes the tokens lack when that is the reason, and the command
that signs in, for a server a person signs in to; never a token, and only scope names that are
scope tokens (RFC 6749 3.3), so that a server cannot put text of its own into an error.
"""

import re

from ..errors import McpDenied
from .auth import ServerAuth
from .transports import Denial

_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,128}")


def missing_scope(denial: Denial, auth: ServerAuth | None) -> str | None:
    """The scopes a 403 `insufficient_scope` asks for that the tokens held do not have."""
    if denial.error != "insufficient_scope" or not denial.scope:
        return None
    granted = auth.granted() if auth is not None else set()
    wanted = [
        scope
        for scope in dict.fromkeys(denial.scope.split())
        if _SCOPE_TOKEN.fullmatch(scope) and scope not in granted
    ]
    return " ".join(wanted[:20]) or None


def denied(server: str, denial: Denial, auth: ServerAuth | None) -> McpDenied:
    scope = missing_scope(denial, auth)
    login = (
        f": sign in with interaction-worker mcp login {server}"
        if auth is not None and auth.signs_in
        else ""
    )
    if scope is not None:
        message = f"MCP server {server} needs the scope {scope}{login}"
    elif auth is not None and auth.signs_in:
        message = f"MCP server {server} is not signed in{login}"
    elif auth is not None:
        message = (
            f"MCP server {server} refused the client credentials (HTTP {denial.status})"
        )
    else:
        message = f"MCP server {server} refused the credentials (HTTP {denial.status})"
    return McpDenied(message, scope=scope)


def down_reason(server: str, auth: ServerAuth | None) -> str:
    """Why a server that refused the credentials is down, for /readyz and the log."""
    if auth is not None and auth.signs_in:
        return f"not signed in (interaction-worker mcp login {server})"
    return "the server refused the credentials"
