"""The `mcp:` block: discovery limits and the MCP servers the worker starts or connects to."""

from pathlib import Path
from typing import Any

from .mcp_auth import parse_auth
from .model import BackoffSettings, McpAuthSettings, McpServerSettings, McpSettings
from .values import (
    ENV_NAME,
    HEADER_NAME,
    Rule,
    Section,
    is_name,
    join,
    resolve_path,
    url_problem,
)

# The MCP registry counts in JavaScript-safe integers, as the reference does.
_MAX_SAFE_INTEGER = 2**53 - 1
_STDIO_KEYS = ("command", "args", "env", "cwd")
_HTTP_KEYS = ("url", "headers_env", "auth")


def parse_mcp(top: Section, base_dir: Path) -> McpSettings:
    with top.section("mcp") as s:
        pages = s.get("max_discovery_pages", 100, _limit)
        capabilities = s.get("max_capabilities", 1000, _limit)
        servers: dict[str, McpServerSettings] = {}
        raw = s.raw("servers")
        if isinstance(raw, dict):
            for index, (name, spec) in enumerate(raw.items()):
                if not isinstance(name, str) or not is_name(name):
                    s.problems.lines.append(
                        f"{s.key('servers')}: the name of server {index + 1} must be 1 to 256 characters"
                    )
                    continue
                where = join(s.key("servers"), name)
                if not isinstance(spec, dict):
                    s.problems.add(where, "must be a mapping")
                    continue
                with Section(spec, where, s.problems) as server:
                    parsed = _server(server, base_dir)
                if parsed is not None:
                    servers[name] = parsed
        elif raw is not None and s.has("servers"):
            s.fail("servers", "must be a mapping of server names to servers")
    return McpSettings(
        max_discovery_pages=pages, max_capabilities=capabilities, servers=servers
    )


def _limit(value: Any) -> int | Rule:
    if type(value) is not int or value < 1:
        return Rule("must be a positive integer")
    if value > _MAX_SAFE_INTEGER:
        return Rule(f"must be at most {_MAX_SAFE_INTEGER}")
    return value


def _server(s: Section, base_dir: Path) -> McpServerSettings | None:
    transport = s.choice("transport", "", ("stdio", "http"))
    if not s.has("transport"):
        s.fail("transport", "must be one of stdio, http")
    timeout = s.duration("timeout", 30.0)
    connect_timeout = s.duration("connect_timeout", 30.0)
    required = s.boolean("required", True)
    backoff = _backoff(s)
    if transport == "stdio":
        _not_used(s, _HTTP_KEYS, "by transport stdio")
        command = s.string(
            "command", "", lambda v: bool(v.strip()), "must be a nonempty string"
        )
        if not s.has("command"):
            s.fail("command", "is required for transport stdio")
        return McpServerSettings(
            transport="stdio",
            command=command,
            args=s.get("args", (), _strings),
            env=_string_map(
                s, "env", _is_env_key, "a variable name", lambda v: "\0" not in v
            ),
            cwd=s.get(
                "cwd", None, lambda v: None if v is None else resolve_path(v, base_dir)
            ),
            timeout=timeout,
            connect_timeout=connect_timeout,
            required=required,
            restart_backoff=backoff,
        )
    if transport == "http":
        _not_used(s, _STDIO_KEYS, "by transport http")
        url = s.get("url", "", _http_url)
        if not s.has("url"):
            s.fail("url", "is required for transport http")
        headers_env = _string_map(
            s,
            "headers_env",
            lambda k: HEADER_NAME.fullmatch(k) is not None,
            "a header name",
            lambda v: ENV_NAME.fullmatch(v) is not None,
            value_rule="must be an environment variable name",
        )
        auth = _auth(s, base_dir)
        if auth is not None and any(h.lower() == "authorization" for h in headers_env):
            s.fail("headers_env", "must not set Authorization beside auth")
        return McpServerSettings(
            transport="http",
            url=url,
            headers_env=headers_env,
            timeout=timeout,
            connect_timeout=connect_timeout,
            required=required,
            restart_backoff=backoff,
            auth=auth,
        )
    for key in (*_STDIO_KEYS, *_HTTP_KEYS):
        s.ignore(key)  # without a transport, these cannot be judged
    return None


def _auth(server: Section, base_dir: Path) -> McpAuthSettings | None:
    if not server.has("auth") or server.raw("auth") is None:
        return None  # absent or null: static headers only
    with server.section("auth") as s:
        return parse_auth(s, base_dir)


def _not_used(s: Section, keys: tuple[str, ...], where: str) -> None:
    for key in keys:
        if s.has(key):
            s.ignore(key)
            s.fail(key, f"is not used {where}")


def _backoff(server: Section) -> BackoffSettings:
    with server.section("restart_backoff") as s:
        initial = s.duration("initial", 0.5)
        longest = s.duration("max", 30.0)
        if initial > longest:
            s.fail("initial", "must not be longer than restart_backoff.max")
    return BackoffSettings(initial=initial, max=longest)


def _strings(value: Any) -> tuple[str, ...] | Rule:
    if not isinstance(value, list) or not all(
        isinstance(v, str) and "\0" not in v for v in value
    ):
        return Rule("must be a list of strings")
    return tuple(value)


def _http_url(value: Any) -> str | Rule:
    if not isinstance(value, str):
        return Rule("must be a URL such as http://127.0.0.1:8000/mcp")
    problem = url_problem(value, ("http", "https"), "http://127.0.0.1:8000/mcp")
    return value if problem is None else Rule(problem)


def _is_env_key(key: str) -> bool:
    return bool(key) and "=" not in key and "\0" not in key


def _string_map(
    server: Section,
    name: str,
    valid_key: Any,
    key_kind: str,
    valid_value: Any,
    *,
    value_rule: str = "must be a string",
) -> dict[str, str]:
    out: dict[str, str] = {}
    with server.section(name) as s:
        for key, value in s.data.items():
            s.ignore(key)
            if not isinstance(key, str) or not valid_key(key):
                s.problems.add(s.where, f"keys must each be {key_kind}")
            elif not isinstance(value, str) or not valid_value(value):
                s.fail(key, value_rule)
            else:
                out[key] = value
    return out
