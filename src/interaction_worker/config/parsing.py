"""`parse_settings`: the whole file checked at once, one problem line per bad key."""

import re
from pathlib import Path
from typing import Any

from ..contracts.serving import (
    EMPTY_RULE,
    SERVE_LIST_RULE,
    SERVE_NAMES,
    SERVE_RULE,
    ServeName,
)
from . import defaults
from .mcp import parse_mcp
from .model import (
    COMMAND_NAMES,
    CommandSettings,
    ConsoleSettings,
    DurableSettings,
    IdempotencySettings,
    MetricsSettings,
    NatsSettings,
    SandboxSettings,
    Settings,
    SubjectSettings,
    ToolSettings,
    TracingSettings,
    WebSearchSettings,
)
from .output import parse_output
from .values import (
    NAME_CHARS,
    Problems,
    Rule,
    Section,
    is_stream_name,
    is_subject,
    listen_address,
    mapping,
    parse_duration,
    url_problem,
)

NATS_URL_SCHEMES = ("nats", "tls", "ws", "wss")
NATS_URL_EXAMPLE = "nats://127.0.0.1:4222"


def parse_settings(data: object, *, base_dir: Path) -> Settings:
    """Validate the parsed YAML of a configuration file (None: an empty file).

    Relative paths resolve against `base_dir`, the file's directory.

    Raises:
        ConfigurationError: one line per problem, each naming its key.
    """
    problems = Problems()
    if data is not None and not isinstance(data, dict):
        problems.lines.append("the configuration must be a mapping of keys")
        data = None
    base_dir = base_dir.resolve()
    with mapping(data, "", problems) as top:
        settings = Settings(
            nats=_nats(top),
            subjects=_subjects(top),
            data_dir=top.path("data_dir", base_dir / ".interaction", base_dir),
            workspace=top.path("workspace", base_dir, base_dir),
            sandbox=_sandbox(top) if top.has("sandbox") else None,
            tools=_tools(top) if top.has("tools") else None,
            tool_timeout=top.duration("tool_timeout", defaults.TOOL_TIMEOUT),
            serve=_serve(top),
            mcp=parse_mcp(top, base_dir),
            output=parse_output(top, base_dir),
            concurrency=_concurrency(top),
            max_pending=top.integer("max_pending", defaults.MAX_PENDING),
            shutdown_grace=top.duration("shutdown_grace", 15.0),
            durable=_durable(top),
            idempotency=_idempotency(top),
            metrics=_metrics(top),
            tracing=_tracing(top),
            console=_console(top),
        )
    inbox = settings.nats.inbox_prefix + "."
    # A check across two keys: only once each is valid on its own.
    if not problems.lines and not any(
        inbox.startswith(p) for p in settings.subjects.reply_prefixes
    ):
        problems.lines.append(
            f"nats.inbox_prefix: {settings.nats.inbox_prefix} is not under "
            f"subjects.reply_prefixes ({', '.join(settings.subjects.reply_prefixes)}): "
            "the worker would refuse this package's clients' replies"
        )
    queue = settings.subjects.queue_group
    if not problems.lines and settings.durable.enabled and not is_stream_name(queue):
        problems.lines.append(
            f"subjects.queue: {queue} cannot name the durable consumers (<queue>-<family>): "
            "durable mode needs a queue group of letters, digits, - and _"
        )
    problems.raise_if_any()
    return settings


def _serve(top: Section) -> tuple[ServeName, ...]:
    """`serve:` (docs/configuration.md 1): the kinds this worker serves, at least one."""
    names = top.names(
        "serve",
        SERVE_NAMES,
        lambda v: v in SERVE_NAMES,
        SERVE_RULE,
        list_rule=SERVE_LIST_RULE,
    )
    if top.raw("serve") == []:
        top.fail("serve", EMPTY_RULE)
    return tuple(name for name in SERVE_NAMES if name in names)


def _nats(top: Section) -> NatsSettings:
    with top.section("nats") as s:
        return NatsSettings(
            url=s.get("url", None, _nats_url),
            name=s.string(
                "name",
                "interaction-worker",
                lambda v: len(v) <= 256 and NAME_CHARS.fullmatch(v) is not None,
                "must be 1 to 256 letters, digits, - or _ (it is also the NATS service name)",
            ),
            websocket=s.get("websocket", None, _optional_listen),
            inbox_prefix=s.string(
                "inbox_prefix",
                "_INBOX",
                is_subject,
                "must be subject tokens without wildcards, such as _INBOX",
            ),
        )


def _nats_url(value: object) -> str | None | Rule:
    if value is None:
        return None
    if not isinstance(value, str):
        return Rule(f"must be a URL such as {NATS_URL_EXAMPLE}, or null")
    problem = url_problem(value, NATS_URL_SCHEMES, NATS_URL_EXAMPLE)
    return value if problem is None else Rule(problem)


def _subjects(top: Section) -> SubjectSettings:
    with top.section("subjects") as s:
        prefix = s.string(
            "prefix",
            defaults.PREFIX,
            is_subject,
            "must be subject tokens without wildcards, such as interaction",
        )
        queue = s.optional_string(
            "queue",
            lambda v: bool(v) and not any(c.isspace() for c in v),
            "must be a queue group name without spaces, or null",
        )
        reply_prefixes = s.names(
            "reply_prefixes",
            defaults.REPLY_PREFIXES,
            lambda v: v.endswith(".") and is_subject(v[:-1]),
            "must be subject tokens ending with a dot, such as _INBOX.",
            list_rule="must be a list of subject prefixes",
        )
        account_inboxes = s.boolean("account_inboxes", False)
    return SubjectSettings(
        prefix=prefix,
        queue=queue,
        reply_prefixes=reply_prefixes,
        account_inboxes=account_inboxes,
    )


def _is_origin(value: str) -> bool:
    if value == "*":
        return True
    if url_problem(value, ("http", "https"), "") is not None:
        return False
    rest = value.split("://", 1)[1]
    return "/" not in rest and "?" not in rest and "#" not in rest


_COMMAND_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _is_command_id(value: str) -> bool:
    return value == "*" or _COMMAND_ID.fullmatch(value) is not None


def _sandbox(top: Section) -> SandboxSettings:
    def nonblank(value: str) -> bool:
        return bool(value.strip()) and value == value.strip()

    with top.section("sandbox") as s:
        return SandboxSettings(
            tools=s.names("tools", (), nonblank, "must be a name"),
            mcp=s.names("mcp", (), nonblank, "must be a name"),
            network=s.names(
                "network",
                (),
                _is_origin,
                "must be an origin such as https://api.search.brave.com, or *",
                list_rule="must be a list of origins",
            ),
            read=s.boolean("read", False),
            write=s.boolean("write", False),
            execute=s.boolean("execute", False),
            command_ids=s.names(
                "command_ids",
                ("*",),
                _is_command_id,
                "must be a command id (1-64 of A-Z a-z 0-9 _ -) or *",
            ),
        )


def _tools(top: Section) -> ToolSettings:
    with top.section("tools") as s:
        read_text = s.has("read_text")
        value: Any = s.raw("read_text")
        if isinstance(value, dict):
            with mapping(value, s.key("read_text"), s.problems):
                pass  # it takes no keys: each one is reported as unknown
        elif read_text and value is not None:
            s.fail("read_text", "must be {} or empty (leave the key out to disable it)")
        commands = _commands(s) if s.has("commands") else None
        web_search = _web_search(s) if s.has("web_search") else None
    return ToolSettings(read_text=read_text, commands=commands, web_search=web_search)


def _commands(tools: Section) -> CommandSettings:
    with tools.section("commands") as s:
        return CommandSettings(
            enabled=s.names(
                "enabled",
                COMMAND_NAMES,
                lambda v: v in COMMAND_NAMES,
                f"must be one of {', '.join(COMMAND_NAMES)}",
                list_rule="must be a list of command names",
            ),
            max_entries=s.integer("max_entries", 1000, 1, 10_000),
            max_output_bytes=s.integer("max_output_bytes", 65536, 1, 1_048_576),
            max_error_bytes=s.integer("max_error_bytes", 8192, 1, 65536),
            timeout=s.duration("timeout", 5.0),
            max_memory=s.integer(
                "max_memory", 268_435_456, 67_108_864, 1_099_511_627_776
            ),
        )


def _web_search(tools: Section) -> WebSearchSettings:
    with tools.section("web_search") as s:
        s.choice("provider", "brave", ("brave",))
        return WebSearchSettings(
            provider="brave",
            timeout=s.duration("timeout", 30.0),
            max_response_bytes=s.integer(
                "max_response_bytes", 1_048_576, 1, 16_777_216
            ),
        )


def _concurrency(top: Section) -> int | None:
    rule = Rule("must be a positive integer or null")
    return top.get(
        "concurrency",
        None,
        lambda v: v if v is None or (type(v) is int and v > 0) else rule,
    )


def _stream(section: Section, name: str, default: str) -> str:
    return section.string(
        name,
        default,
        is_stream_name,
        "must be a stream name of letters, digits, - and _",
    )


def _durable(top: Section) -> DurableSettings:
    with top.section("durable") as s:
        return DurableSettings(
            enabled=s.boolean("enabled", False),
            calls_stream=_stream(s, "calls_stream", "INTERACTION_CALLS"),
            events_stream=_stream(s, "events_stream", "INTERACTION_EVENTS"),
            events_max_age=s.duration("events_max_age", 86400.0),
            ack_wait=s.duration("ack_wait", 30.0),
            dead_stream=_stream(s, "dead_stream", "INTERACTION_DEAD"),
            replicas=s.integer("replicas", 1, 1, 5),
            max_deliver=s.integer("max_deliver", 5),
            max_ack_pending=s.integer("max_ack_pending", 1000),
            nak_backoff=s.get("nak_backoff", (1.0, 5.0, 30.0), _delays),
            duplicate_window=s.duration("duplicate_window", 120.0),
        )


def _delays(value: Any) -> tuple[float, ...] | Rule:
    rule = Rule("must be a nonempty list of durations such as [1s, 5s, 30s]")
    if not isinstance(value, list) or not value:
        return rule
    delays = [parse_duration(item) for item in value]
    if any(isinstance(delay, Rule) for delay in delays):
        return rule
    return tuple(delay for delay in delays if not isinstance(delay, Rule))


def _idempotency(top: Section) -> IdempotencySettings:
    with top.section("idempotency") as s:
        enabled = s.raw("enabled") if s.has("enabled") else None
        if enabled is not None and type(enabled) is not bool:
            s.fail("enabled", "must be true, false or null")
            enabled = None
        return IdempotencySettings(
            enabled=enabled,
            bucket=s.string(
                "bucket",
                "interaction_ledger",
                lambda v: NAME_CHARS.fullmatch(v) is not None,
                "must be a bucket name of letters, digits, - and _",
            ),
            replicas=s.integer("replicas", 1, 1, 5),
            ttl=s.duration("ttl", 86400.0),
            lease=s.duration("lease", 30.0),
            wait=s.duration("wait", 30.0),
        )


def _optional_listen(value: object) -> str | None | Rule:
    if value is None:
        return None
    address = listen_address(value)
    return address if isinstance(address, Rule) else str(value)


def _metrics(top: Section) -> MetricsSettings:
    with top.section("metrics") as s:
        return MetricsSettings(listen=s.get("listen", None, _optional_listen))


def _console(top: Section) -> ConsoleSettings:
    def listen(value: object) -> str | Rule:
        address = listen_address(value)
        return address if isinstance(address, Rule) else str(value)

    with top.section("console") as s:
        return ConsoleSettings(
            listen=s.get("listen", "127.0.0.1:8765", listen),
            history=s.integer("history", 200, 1, 100_000),
        )


def _tracing(top: Section) -> TracingSettings:
    with top.section("tracing") as s:
        return TracingSettings(enabled=s.boolean("enabled", False))
