"""An HTTP MCP server's `auth:` block (docs/configuration.md, "MCP servers behind OAuth").

Which keys a type takes, and what each combination means:

    type: oauth              client_id_env (+ client_secret_env): a pre-registered client, else
                             client_metadata_url or dynamic registration; token_endpoint_auth
                             client_secret_basic (default with a secret) | client_secret_post | none
                             (default without); scopes; redirect (the loopback `mcp login` listens on)
    type: client_credentials client_id_env, and client_secret_env (client_secret_basic, the default,
                             or client_secret_post) or private_key_file (private_key_jwt, with
                             signing_algorithm); scopes; issuer
"""

from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from .model import McpAuthSettings, McpAuthType, TokenEndpointAuth
from .values import ENV_NAME, LISTEN_RULE, Rule, Section, listen_address, url_problem

_TYPES = ("oauth", "client_credentials")
_OAUTH_ONLY = ("client_metadata_url", "redirect")
_CLIENT_CREDENTIALS_ONLY = ("private_key_file", "signing_algorithm", "issuer")
_OAUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
_CLIENT_CREDENTIALS_METHODS = (
    "client_secret_basic",
    "client_secret_post",
    "private_key_jwt",
)
# What PyJWT signs with; `none` is no signature at all.
SIGNING_ALGORITHMS = (
    "ES256",
    "ES384",
    "ES512",
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "EdDSA",
)
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
_ENV_RULE = "must be an environment variable name"


def parse_auth(s: Section, base_dir: Path) -> McpAuthSettings | None:
    """The `auth:` mapping of one http server, its problems added to the section's."""
    kind = s.choice("type", "", _TYPES)
    if not s.has("type"):
        s.fail("type", f"must be one of {', '.join(_TYPES)}")
    if kind not in _TYPES:
        for key in s.data:
            s.ignore(key)
        return None
    auth_type = cast(McpAuthType, kind)
    for key in _CLIENT_CREDENTIALS_ONLY if auth_type == "oauth" else _OAUTH_ONLY:
        if s.has(key):
            s.ignore(key)
            s.fail(key, f"is not used by type {auth_type}")
    client_id_env = s.optional_string("client_id_env", _env_name, _ENV_RULE)
    client_secret_env = s.optional_string("client_secret_env", _env_name, _ENV_RULE)
    scopes = s.get("scopes", None, _scopes)
    methods = _OAUTH_METHODS if auth_type == "oauth" else _CLIENT_CREDENTIALS_METHODS
    method = s.get("token_endpoint_auth", None, lambda v: _method(v, methods))
    if auth_type == "oauth":
        if client_secret_env is not None and client_id_env is None:
            s.fail("client_secret_env", "needs client_id_env (a pre-registered client)")
        if method is not None and method != "none" and client_secret_env is None:
            s.fail("token_endpoint_auth", f"{method} needs client_secret_env")
        return McpAuthSettings(
            type="oauth",
            client_id_env=client_id_env,
            client_secret_env=client_secret_env,
            client_metadata_url=s.get("client_metadata_url", None, _metadata_url),
            scopes=scopes,
            redirect=s.get("redirect", "127.0.0.1:0", _redirect),
            token_endpoint_auth=method,
        )
    key_file = s.get(
        "private_key_file", None, lambda v: None if v is None else _path(v, base_dir)
    )
    if method is None:
        method = "private_key_jwt" if key_file is not None else "client_secret_basic"
    if client_id_env is None and not s.has("client_id_env"):
        s.fail("client_id_env", "is required for type client_credentials")
    if method == "private_key_jwt":
        if key_file is None and not s.has("private_key_file"):
            s.fail("private_key_file", "is required for private_key_jwt")
        if client_secret_env is not None:
            s.fail("client_secret_env", "is not used by private_key_jwt")
    else:
        if client_secret_env is None and not s.has("client_secret_env"):
            s.fail("client_secret_env", f"is required for {method}")
        if key_file is not None:
            s.fail("private_key_file", f"is not used by {method}")
    algorithm = s.get("signing_algorithm", None, _algorithm)
    if algorithm is not None and method != "private_key_jwt":
        s.fail("signing_algorithm", "is used by private_key_jwt only")
    return McpAuthSettings(
        type="client_credentials",
        client_id_env=client_id_env,
        client_secret_env=client_secret_env,
        scopes=scopes,
        token_endpoint_auth=method,
        private_key_file=key_file,
        signing_algorithm=algorithm,
        issuer=s.get("issuer", None, _issuer),
    )


def _env_name(value: str) -> bool:
    return ENV_NAME.fullmatch(value) is not None


def _scopes(value: Any) -> tuple[str, ...] | None | Rule:
    rule = Rule("must be a list of scopes (nonempty strings without spaces), or null")
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, str) and v and v.isprintable() and " " not in v for v in value
    ):
        return rule
    return tuple(dict.fromkeys(value))


def _method(value: Any, methods: tuple[str, ...]) -> TokenEndpointAuth | None | Rule:
    if value is None:
        return None
    if not isinstance(value, str) or value not in methods:
        return Rule(f"must be one of {', '.join(methods)}")
    return cast(TokenEndpointAuth, value)


def _metadata_url(value: Any) -> str | None | Rule:
    rule = Rule(
        "must be an https URL with a path, such as https://example.com/client.json"
    )
    if value is None:
        return None
    if not isinstance(value, str) or url_problem(value, ("https",), "") is not None:
        return rule
    if urlsplit(value).path in ("", "/"):
        return rule
    return value


def _redirect(value: Any) -> str | Rule:
    rule = Rule(
        "must be a loopback HOST:PORT such as 127.0.0.1:0 (port 0: any free one)"
    )
    if not isinstance(value, str) or isinstance(listen_address(value), Rule):
        return rule if isinstance(value, str) else Rule(LISTEN_RULE)
    host = value.rsplit(":", 1)[0]
    return value if host in _LOOPBACK else rule


def _path(value: Any, base_dir: Path) -> Path | Rule:
    if not isinstance(value, str) or not value or "\0" in value:
        return Rule("must be a path (a nonempty string)")
    return (base_dir / value).resolve()


def _algorithm(value: Any) -> str | None | Rule:
    if value is None:
        return None
    if not isinstance(value, str) or value not in SIGNING_ALGORITHMS:
        return Rule(f"must be one of {', '.join(SIGNING_ALGORITHMS)}")
    return value


def _issuer(value: Any) -> str | None | Rule:
    if value is None:
        return None
    example = "https://auth.example.com"
    if not isinstance(value, str):
        return Rule(f"must be a URL such as {example}")
    problem = url_problem(value, ("http", "https"), example)
    return value if problem is None else Rule(problem)
