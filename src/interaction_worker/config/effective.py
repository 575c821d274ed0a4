"""The configuration in effect written out as plain data (`interaction-worker check-config`), which
`parse_settings` reads back: the file's form of `Settings`, apart from the settings themselves."""

from typing import Any

from .model import (
    DEFAULT_SANDBOX,
    DEFAULT_TOOLS,
    McpAuthSettings,
    McpServerSettings,
    Settings,
    SinkSettings,
    ToolSettings,
)
from .values import format_duration


def effective_settings(settings: Settings) -> dict[str, Any]:
    """`settings` as YAML-able data; absent `sandbox`, `tools` and `output.sinks` written out as the
    defaults they stand for."""
    d = format_duration
    sandbox = settings.sandbox or DEFAULT_SANDBOX
    tools = settings.tools or DEFAULT_TOOLS
    durable = settings.durable
    ledger = settings.idempotency
    return {
        "nats": {
            "url": settings.nats.url,
            "name": settings.nats.name,
            "websocket": settings.nats.websocket,
            "inbox_prefix": settings.nats.inbox_prefix,
        },
        "subjects": {
            "prefix": settings.subjects.prefix,
            "queue": settings.subjects.queue,
            "reply_prefixes": list(settings.subjects.reply_prefixes),
            "account_inboxes": settings.subjects.account_inboxes,
        },
        "data_dir": str(settings.data_dir),
        "workspace": str(settings.workspace),
        "sandbox": {
            "tools": list(sandbox.tools),
            "mcp": list(sandbox.mcp),
            "network": list(sandbox.network),
            "read": sandbox.read,
            "write": sandbox.write,
            "execute": sandbox.execute,
            "command_ids": list(sandbox.command_ids),
        },
        "tools": _tools(tools),
        "tool_timeout": d(settings.tool_timeout),
        "serve": list(settings.serve),
        "mcp": {
            "max_discovery_pages": settings.mcp.max_discovery_pages,
            "max_capabilities": settings.mcp.max_capabilities,
            "servers": {n: _server(s) for n, s in settings.mcp.servers.items()},
        },
        "output": {
            "policy": settings.output.policy,
            "sinks": [_sink(s) for s in settings.output.sinks],
        },
        "concurrency": settings.concurrency,
        "max_pending": settings.max_pending,
        "shutdown_grace": d(settings.shutdown_grace),
        "durable": {
            "enabled": durable.enabled,
            "calls_stream": durable.calls_stream,
            "events_stream": durable.events_stream,
            "events_max_age": d(durable.events_max_age),
            "ack_wait": d(durable.ack_wait),
            "dead_stream": durable.dead_stream,
            "replicas": durable.replicas,
            "max_deliver": durable.max_deliver,
            "max_ack_pending": durable.max_ack_pending,
            "nak_backoff": [d(delay) for delay in durable.nak_backoff],
            "duplicate_window": d(durable.duplicate_window),
        },
        "idempotency": {
            "enabled": ledger.enabled,
            "bucket": ledger.bucket,
            "replicas": ledger.replicas,
            "ttl": d(ledger.ttl),
            "lease": d(ledger.lease),
            "wait": d(ledger.wait),
        },
        "metrics": {"listen": settings.metrics.listen},
        "tracing": {"enabled": settings.tracing.enabled},
        "console": {
            "listen": settings.console.listen,
            "history": settings.console.history,
        },
    }


def _tools(tools: ToolSettings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if tools.read_text:
        out["read_text"] = {}
    if (c := tools.commands) is not None:
        out["commands"] = {
            "enabled": list(c.enabled),
            "max_entries": c.max_entries,
            "max_output_bytes": c.max_output_bytes,
            "max_error_bytes": c.max_error_bytes,
            "timeout": format_duration(c.timeout),
            "max_memory": c.max_memory,
        }
    if (w := tools.web_search) is not None:
        out["web_search"] = {
            "provider": w.provider,
            "timeout": format_duration(w.timeout),
            "max_response_bytes": w.max_response_bytes,
        }
    return out


def _server(server: McpServerSettings) -> dict[str, Any]:
    out: dict[str, Any] = {"transport": server.transport}
    if server.transport == "stdio":
        out["command"] = server.command
        out["args"] = list(server.args)
        out["env"] = dict(server.env)
        out["cwd"] = None if server.cwd is None else str(server.cwd)
    else:
        out["url"] = server.url
        out["headers_env"] = dict(server.headers_env)
        if server.auth is not None:
            out["auth"] = _auth(server.auth)
    out["timeout"] = format_duration(server.timeout)
    out["connect_timeout"] = format_duration(server.connect_timeout)
    out["required"] = server.required
    out["restart_backoff"] = {
        "initial": format_duration(server.restart_backoff.initial),
        "max": format_duration(server.restart_backoff.max),
    }
    return out


def _auth(auth: McpAuthSettings) -> dict[str, Any]:
    """The `auth:` block as written: variable names and a key's path, never what they hold."""
    out: dict[str, Any] = {"type": auth.type}
    out["client_id_env"] = auth.client_id_env
    out["client_secret_env"] = auth.client_secret_env
    if auth.type == "oauth":
        out["client_metadata_url"] = auth.client_metadata_url
        out["redirect"] = auth.redirect
    else:
        out["private_key_file"] = (
            None if auth.private_key_file is None else str(auth.private_key_file)
        )
        out["signing_algorithm"] = auth.signing_algorithm
        out["issuer"] = auth.issuer
    out["token_endpoint_auth"] = auth.token_endpoint_auth
    out["scopes"] = None if auth.scopes is None else list(auth.scopes)
    return out


def _sink(sink: SinkSettings) -> dict[str, Any]:
    out: dict[str, Any] = {"type": sink.type, "name": sink.name}
    for key in ("subject", "stream", "url"):
        if (value := getattr(sink, key)) is not None:
            out[key] = value
    if sink.path is not None:
        out["path"] = str(sink.path)
    out["timeout"] = format_duration(sink.timeout)
    return out
