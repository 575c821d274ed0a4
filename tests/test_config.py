import os
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from interaction_worker import config
from interaction_worker.cli.main import HANDLERS
from interaction_worker.cli.parser import build_parser
from interaction_worker.config import (
    COMMAND_NAMES,
    DEFAULT_SANDBOX,
    DEFAULT_TOOLS,
    BackoffSettings,
    CommandSettings,
    DurableSettings,
    IdempotencySettings,
    McpServerSettings,
    McpSettings,
    NatsSettings,
    OutputSettings,
    SandboxSettings,
    Settings,
    SinkSettings,
    SubjectSettings,
    ToolSettings,
    WebSearchSettings,
    format_duration,
    load_settings,
    parse_duration,
    parse_settings,
)
from interaction_worker.errors import ConfigurationError

# The two blocks of docs/configuration.md 1, the defaults and the example, their comments shortened
# and a few example values changed so that the tests can tell them from the defaults.
DEFAULTS_YAML = """\
# Defaults: what an absent key means.
nats:
  url: null                    # null (and no INTERACTION_NATS_URL): start an embedded nats-server (section 3)
  name: interaction-worker     # client connection name, also the NATS service name
subjects:
  prefix: interaction
  queue: null                  # null: <prefix>-workers
  reply_prefixes: ["_INBOX."]  # where an Interaction-Reply-To header may point (wire.md section 7)
data_dir: .interaction         # the embedded server's store, URL and token files (created with mode 0700 / 0600)
workspace: .                   # the root that read_text, the read-only commands and file tools may see
sandbox:
  tools: [read_text, grep, ls, cat, find, head, tail, wc, sort, uniq, cut, stat, file, du, pwd]
  mcp: []
  network: []
  read: true
  write: false
  execute: true
tools:                         # absent: read_text and the 14 commands; a given `tools:` block registers only what it lists
  read_text: {}
  commands:
    enabled: [grep, ls, cat, find, head, tail, wc, sort, uniq, cut, stat, file, du, pwd]
    max_entries: 1000          # 1..10000
    max_output_bytes: 65536    # 1..1048576 (must also fit the server's max_payload, wire.md section 1)
    max_error_bytes: 8192      # 1..65536
    timeout: 5s                # past it: status "timeout", code COMMAND_TIMEOUT, the process group killed
tool_timeout: 60s              # any other tool: past it the call is cancelled, status "timeout", code TOOL_TIMEOUT
mcp:
  max_discovery_pages: 100
  max_capabilities: 1000
  servers: {}
output:
  policy: all
  sinks: [{type: console}]     # an explicit [] (and no sink given in code) disables OUTPUT: NOT_FOUND
concurrency: null              # positive integer, or null for no limit
max_pending: 1000
shutdown_grace: 15s            # SIGTERM: calls still running after it are cancelled
durable:
  enabled: false
  calls_stream: INTERACTION_CALLS
  events_stream: INTERACTION_EVENTS
  events_max_age: 24h
  ack_wait: 30s
  dead_stream: INTERACTION_DEAD
  replicas: 1                  # stream replicas (3 on a 3-node cluster)
  max_deliver: 5               # executed attempts; the consumer's server-side max_deliver is this + 1 (wire.md 7)
  max_ack_pending: 1000        # per durable consumer, shared by every worker on it
  nak_backoff: [1s, 5s, 30s]   # redelivery delays for a call that certainly did not start (wire.md 7)
  duplicate_window: 2m         # the calls and events streams' Nats-Msg-Id window
idempotency:
  enabled: null                # null: on in durable mode, off otherwise
  bucket: interaction_ledger
  replicas: 1                  # key-value bucket replicas (3 on a 3-node cluster)
  ttl: 24h
  lease: 30s                   # a claim's lease, renewed while the call runs
  wait: 30s                    # core mode: how long a retry waits for a running first attempt
"""

EXAMPLE_YAML = """\
# Example: everything else.
nats:
  url: nats://nats.internal:4222
sandbox:                       # a configuration that adds tools, servers or providers grants them here
  tools: [read_text, grep, cat, web_search]
  mcp: [files, docs]
  network: ["https://api.search.brave.com"]
  read: true
  execute: true
tools:
  read_text: {}
  commands: {enabled: [grep, cat]}
  web_search:                  # registered only when present
    provider: brave
    timeout: 30s
    max_response_bytes: 1048576
mcp:
  servers:
    files:
      transport: stdio
      command: python
      args: ["-m", "some_mcp_server"]
      env: {}                  # added to a minimal environment; nothing else is inherited
      cwd: null
      timeout: 1s              # per call
      connect_timeout: 45s     # spawning and initialising the session, not bounded by `timeout`
      required: true           # false: the worker starts without it and reconnects in the background
      restart_backoff: {initial: 500ms, max: 30s}   # reconnecting or respawning a lost server
    docs:
      transport: http          # streamable HTTP
      url: "http://127.0.0.1:8000/mcp"
      headers_env: {Authorization: DOCS_MCP_AUTH}   # header name -> environment variable holding its value
      timeout: 30s
output:
  policy: all
  sinks:
    - {type: console}
    - {type: nats, name: ui, subject: "ui.messages.{key}"}      # core publish; {key} = the deliveryId's subject key
    - {type: jetstream, subject: "deliveries.out", stream: DELIVERIES}   # acked publish, Nats-Msg-Id = <name>:<K>
    - {type: http, url: "https://example.test/hook", timeout: 10s}    # POST JSON
    - {type: file, path: "deliveries.jsonl"}                    # one JSON line per delivery
"""


def defaults(base: Path) -> Settings:
    """docs/configuration.md's defaults, written out field by field."""
    return Settings(
        nats=NatsSettings(url=None, name="interaction-worker"),
        subjects=SubjectSettings(
            prefix="interaction", queue=None, reply_prefixes=("_INBOX.",)
        ),
        data_dir=base / ".interaction",
        workspace=base,
        sandbox=None,
        tools=None,
        tool_timeout=60.0,
        mcp=McpSettings(max_discovery_pages=100, max_capabilities=1000, servers={}),
        output=OutputSettings(
            policy="all",
            sinks=(SinkSettings(type="console", name="console#0", timeout=10.0),),
            sinks_given=False,
        ),
        concurrency=None,
        max_pending=1000,
        shutdown_grace=15.0,
        durable=DurableSettings(
            enabled=False,
            calls_stream="INTERACTION_CALLS",
            events_stream="INTERACTION_EVENTS",
            events_max_age=24 * 3600.0,
            ack_wait=30.0,
            dead_stream="INTERACTION_DEAD",
            replicas=1,
            max_deliver=5,
            max_ack_pending=1000,
            nak_backoff=(1.0, 5.0, 30.0),
            duplicate_window=120.0,
        ),
        idempotency=IdempotencySettings(
            enabled=None,
            bucket="interaction_ledger",
            replicas=1,
            ttl=24 * 3600.0,
            lease=30.0,
            wait=30.0,
        ),
    )


def write(directory: Path, text: str, name: str = "worker.yaml") -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(data: object, base: Path = Path("/srv")) -> list[str]:
    with pytest.raises(ConfigurationError) as caught:
        parse_settings(data, base_dir=base)
    return str(caught.value).splitlines()


# --------------------------------------------------------------------------- defaults


def test_an_empty_file_means_the_documented_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, "")
    assert load_settings(path, env={}) == defaults(tmp_path.resolve())


def test_a_file_of_only_comments_means_the_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, "# nothing set yet\n")
    assert load_settings(path, env={}) == defaults(tmp_path.resolve())


def test_no_file_means_the_defaults_relative_to_the_current_directory(
    tmp_path: Path,
) -> None:
    assert load_settings(None, env={}, cwd=tmp_path, bounds=only(tmp_path)) == defaults(
        tmp_path.resolve()
    )


def test_the_absent_sandbox_tools_and_sinks_stand_for_the_documented_defaults() -> None:
    assert DEFAULT_SANDBOX == SandboxSettings(
        tools=("read_text", *COMMAND_NAMES), read=True, write=False, execute=True
    )
    assert len(COMMAND_NAMES) == 14
    assert DEFAULT_TOOLS == ToolSettings(
        read_text=True,
        commands=CommandSettings(
            enabled=COMMAND_NAMES,
            max_entries=1000,
            max_output_bytes=65536,
            max_error_bytes=8192,
            timeout=5.0,
        ),
        web_search=None,
    )


def test_the_documented_defaults_block_spells_out_the_same_settings(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, DEFAULTS_YAML)
    base = defaults(tmp_path.resolve())
    assert load_settings(path, env={}) == replace(
        base,
        sandbox=DEFAULT_SANDBOX,
        tools=DEFAULT_TOOLS,
        output=replace(base.output, sinks_given=True),
    )


def test_the_queue_group_defaults_to_the_prefix() -> None:
    assert SubjectSettings().queue_group == "interaction-workers"
    assert SubjectSettings(prefix="acme.ai").queue_group == "acme.ai-workers"
    assert SubjectSettings(queue="pool").queue_group == "pool"


# --------------------------------------------------------------------------- the example


def test_the_documented_example_parses(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, EXAMPLE_YAML), env={})
    base = tmp_path.resolve()
    assert settings.nats == NatsSettings(url="nats://nats.internal:4222")
    assert settings.sandbox == SandboxSettings(
        tools=("read_text", "grep", "cat", "web_search"),
        mcp=("files", "docs"),
        network=("https://api.search.brave.com",),
        read=True,
        write=False,
        execute=True,
    )
    assert settings.tools == ToolSettings(
        read_text=True,
        commands=CommandSettings(enabled=("grep", "cat")),
        web_search=WebSearchSettings(
            provider="brave", timeout=30.0, max_response_bytes=1_048_576
        ),
    )
    assert settings.mcp.servers == {
        "files": McpServerSettings(
            transport="stdio",
            command="python",
            args=("-m", "some_mcp_server"),
            env={},
            cwd=None,
            timeout=1.0,
            connect_timeout=45.0,
            required=True,
            restart_backoff=BackoffSettings(initial=0.5, max=30.0),
        ),
        "docs": McpServerSettings(
            transport="http",
            url="http://127.0.0.1:8000/mcp",
            headers_env={"Authorization": "DOCS_MCP_AUTH"},
            timeout=30.0,
        ),
    }
    assert settings.output == OutputSettings(
        policy="all",
        sinks=(
            SinkSettings(type="console", name="console#0"),
            SinkSettings(type="nats", name="ui", subject="ui.messages.{key}"),
            SinkSettings(
                type="jetstream",
                name="jetstream#2",
                subject="deliveries.out",
                stream="DELIVERIES",
            ),
            SinkSettings(
                type="http",
                name="http#3",
                url="https://example.test/hook",
                timeout=10.0,
            ),
            SinkSettings(type="file", name="file#4", path=base / "deliveries.jsonl"),
        ),
        sinks_given=True,
    )
    # everything the example leaves out keeps its default
    assert replace(
        settings,
        nats=NatsSettings(),
        sandbox=None,
        tools=None,
        mcp=McpSettings(),
        output=OutputSettings(),
    ) == defaults(base)


# --------------------------------------------------------------------------- blocks


def test_a_given_tools_block_registers_only_what_it_lists() -> None:
    base = Path("/srv")
    assert parse_settings({"tools": {}}, base_dir=base).tools == ToolSettings()
    only_read = ToolSettings(read_text=True)
    assert (
        parse_settings({"tools": {"read_text": None}}, base_dir=base).tools == only_read
    )
    assert (
        parse_settings({"tools": {"read_text": {}}}, base_dir=base).tools == only_read
    )
    commands = parse_settings({"tools": {"commands": {}}}, base_dir=base).tools
    assert commands == ToolSettings(commands=CommandSettings())
    search = parse_settings({"tools": {"web_search": None}}, base_dir=base).tools
    assert search == ToolSettings(web_search=WebSearchSettings())


def test_a_given_sandbox_block_denies_every_key_it_leaves_out() -> None:
    settings = parse_settings({"sandbox": {"tools": ["grep"]}}, base_dir=Path("/srv"))
    assert settings.sandbox == SandboxSettings(
        tools=("grep",), mcp=(), network=(), read=False, write=False, execute=False
    )
    empty = parse_settings({"sandbox": None}, base_dir=Path("/srv"))
    assert empty.sandbox == SandboxSettings()


def test_an_explicit_empty_sink_list_is_kept_empty() -> None:
    settings = parse_settings({"output": {"sinks": []}}, base_dir=Path("/srv"))
    assert settings.output == OutputSettings(policy="all", sinks=(), sinks_given=True)


def test_sinks_are_named_by_type_and_index_unless_named() -> None:
    settings = parse_settings(
        {
            "output": {
                "policy": "any",
                "sinks": [
                    {"type": "file", "path": "a.jsonl"},
                    {"type": "console", "name": "screen", "timeout": "2s"},
                    {"type": "file", "path": "/var/b.jsonl"},
                ],
            }
        },
        base_dir=Path("/srv"),
    )
    assert settings.output.policy == "any"
    assert [(s.name, s.timeout, s.path) for s in settings.output.sinks] == [
        ("file#0", 10.0, Path("/srv/a.jsonl")),
        ("screen", 2.0, None),
        ("file#2", 10.0, Path("/var/b.jsonl")),
    ]


def test_an_mcp_stdio_server_takes_its_defaults_and_a_relative_cwd() -> None:
    settings = parse_settings(
        {
            "mcp": {
                "max_discovery_pages": 3,
                "max_capabilities": 7,
                "servers": {
                    "files": {
                        "transport": "stdio",
                        "command": "python",
                        "env": {"LOG": "debug"},
                        "cwd": "servers/files",
                        "required": False,
                        "restart_backoff": {"initial": "1s"},
                    }
                },
            }
        },
        base_dir=Path("/srv"),
    )
    assert settings.mcp == McpSettings(
        max_discovery_pages=3,
        max_capabilities=7,
        servers={
            "files": McpServerSettings(
                transport="stdio",
                command="python",
                args=(),
                env={"LOG": "debug"},
                cwd=Path("/srv/servers/files"),
                timeout=30.0,
                connect_timeout=30.0,
                required=False,
                restart_backoff=BackoffSettings(initial=1.0, max=30.0),
            )
        },
    )


def test_the_repr_of_settings_never_shows_an_mcp_servers_environment() -> None:
    settings = parse_settings(
        {
            "mcp": {
                "servers": {
                    "s": {
                        "transport": "stdio",
                        "command": "srv",
                        "env": {"API_KEY": "sk-very-secret"},
                    }
                }
            }
        },
        base_dir=Path("/srv"),
    )
    assert settings.mcp.servers["s"].env == {"API_KEY": "sk-very-secret"}
    assert "sk-very-secret" not in repr(settings)


def test_concurrency_takes_a_positive_integer_or_null() -> None:
    base = Path("/srv")
    assert parse_settings({"concurrency": 8}, base_dir=base).concurrency == 8
    assert parse_settings({"concurrency": None}, base_dir=base).concurrency is None


def test_idempotency_may_be_switched_off_explicitly() -> None:
    settings = parse_settings({"idempotency": {"enabled": False}}, base_dir=Path("/"))
    assert settings.idempotency.enabled is False


def test_the_idempotency_ledger_may_be_switched_on() -> None:
    settings = parse_settings(
        {"idempotency": {"enabled": True, "replicas": 3, "lease": "9s", "wait": "2s"}},
        base_dir=Path("/"),
    )
    ledger = settings.idempotency
    assert (ledger.enabled, ledger.replicas, ledger.lease, ledger.wait) == (
        True,
        3,
        9.0,
        2.0,
    )


# --------------------------------------------------------------------------- problems

PROBLEMS = [
    pytest.param(
        {"tools": {"commands": {"max_entries": 0}}},
        "tools.commands.max_entries must be an integer from 1 to 10000",
        id="max-entries-zero",
    ),
    pytest.param(
        {"tools": {"commands": {"max_entries": 10001}}},
        "tools.commands.max_entries must be an integer from 1 to 10000",
        id="max-entries-too-big",
    ),
    pytest.param(
        {"tools": {"commands": {"max_entries": "5"}}},
        "tools.commands.max_entries must be an integer from 1 to 10000",
        id="max-entries-string",
    ),
    pytest.param(
        {"tools": {"commands": {"max_entries": True}}},
        "tools.commands.max_entries must be an integer from 1 to 10000",
        id="max-entries-bool",
    ),
    pytest.param(
        {"tools": {"commands": {"max_output_bytes": 1_048_577}}},
        "tools.commands.max_output_bytes must be an integer from 1 to 1048576",
        id="max-output-bytes",
    ),
    pytest.param(
        {"tools": {"commands": {"max_error_bytes": 65537}}},
        "tools.commands.max_error_bytes must be an integer from 1 to 65536",
        id="max-error-bytes",
    ),
    pytest.param(
        {"tools": {"commands": {"max_memory": 67_108_863}}},
        "tools.commands.max_memory must be an integer from 67108864 to 1099511627776",
        id="max-memory",
    ),
    pytest.param(
        {"tools": {"commands": {"max_memory": None}}},
        "tools.commands.max_memory must be an integer from 67108864 to 1099511627776",
        id="max-memory-null",
    ),
    pytest.param(
        {"tools": {"commands": {"timeout": 5}}},
        "tools.commands.timeout must be a duration such as 500ms, 30s or 24h",
        id="command-timeout-number",
    ),
    pytest.param(
        {"tools": {"commands": {"enabled": ["cat", "rm"]}}},
        "tools.commands.enabled[1] must be one of grep, ls, cat, find, head, tail, wc,"
        " sort, uniq, cut, stat, file, du, pwd",
        id="unknown-command",
    ),
    pytest.param(
        {"tools": {"commands": {"enabled": ["cat", "cat"]}}},
        'tools.commands.enabled[1] repeats "cat"',
        id="repeated-command",
    ),
    pytest.param(
        {"tools": {"commands": {"enabled": "cat"}}},
        "tools.commands.enabled must be a list of command names",
        id="commands-not-a-list",
    ),
    pytest.param(
        {"tools": {"read_text": True}},
        "tools.read_text must be {} or empty (leave the key out to disable it)",
        id="read-text-true",
    ),
    pytest.param(
        {"tools": {"web_search": {"provider": "google"}}},
        "tools.web_search.provider must be one of brave",
        id="web-search-provider",
    ),
    pytest.param(
        {"tools": {"web_search": {"max_response_bytes": 16_777_217}}},
        "tools.web_search.max_response_bytes must be an integer from 1 to 16777216",
        id="web-search-max-response-bytes",
    ),
    pytest.param(
        {"tools": []},
        "tools must be a mapping",
        id="tools-not-a-mapping",
    ),
    pytest.param(
        {"max_pending": 0},
        "max_pending must be a positive integer",
        id="max-pending-zero",
    ),
    pytest.param(
        {"max_pending": 1.5},
        "max_pending must be a positive integer",
        id="max-pending-float",
    ),
    pytest.param(
        {"concurrency": 0},
        "concurrency must be a positive integer or null",
        id="concurrency-zero",
    ),
    pytest.param(
        {"shutdown_grace": "15"},
        "shutdown_grace must be a duration such as 500ms, 30s or 24h",
        id="duration-without-unit",
    ),
    pytest.param(
        {"shutdown_grace": "15 s"},
        "shutdown_grace must be a duration such as 500ms, 30s or 24h",
        id="duration-with-space",
    ),
    pytest.param(
        {"shutdown_grace": "-1s"},
        "shutdown_grace must be a duration such as 500ms, 30s or 24h",
        id="duration-negative",
    ),
    pytest.param(
        {"tool_timeout": "0s"},
        "tool_timeout must be a positive duration such as 500ms, 30s or 24h",
        id="duration-zero",
    ),
    pytest.param(
        {"tool_timeout": "100001h"},
        "tool_timeout must be a duration of at most 100000h",
        id="duration-too-long",
    ),
    pytest.param(
        {"output": {"sinks": [{"type": "console"}, {"type": "kafka"}]}},
        "output.sinks[1].type must be one of console, nats, jetstream, http, file",
        id="sink-type",
    ),
    pytest.param(
        {"output": {"sinks": [{"name": "x"}]}},
        "output.sinks[0].type must be one of console, nats, jetstream, http, file",
        id="sink-without-type",
    ),
    pytest.param(
        {"output": {"policy": "most"}},
        "output.policy must be one of all, any",
        id="policy",
    ),
    pytest.param(
        {"output": {"sinks": None}},
        "output.sinks must be a list of sinks ([] for none)",
        id="sinks-null",
    ),
    pytest.param(
        {"output": {"sinks": ["console"]}},
        "output.sinks[0] must be a mapping",
        id="sink-not-a-mapping",
    ),
    pytest.param(
        {"output": {"sinks": [{"type": "nats"}]}},
        "output.sinks[0].subject is required for a nats sink",
        id="nats-sink-without-subject",
    ),
    pytest.param(
        {"output": {"sinks": [{"type": "nats", "subject": "ui.>"}]}},
        "output.sinks[0].subject must be subject tokens without wildcards;"
        " {key} stands for the delivery's key",
        id="nats-sink-wildcard",
    ),
    pytest.param(
        {"output": {"sinks": [{"type": "nats", "subject": "ui.{id}"}]}},
        "output.sinks[0].subject must be subject tokens without wildcards;"
        " {key} stands for the delivery's key",
        id="nats-sink-unknown-placeholder",
    ),
    pytest.param(
        {"output": {"sinks": [{"type": "jetstream", "subject": "a", "stream": "A.B"}]}},
        "output.sinks[0].stream must be a stream name of letters, digits, - and _",
        id="jetstream-stream-name",
    ),
    pytest.param(
        {"output": {"sinks": [{"type": "http", "url": "ftp://example.test/x"}]}},
        "output.sinks[0].url must be a URL such as https://example.test/hook",
        id="http-sink-scheme",
    ),
    pytest.param(
        {"output": {"sinks": [{"type": "http", "url": "https://u:p@example.test/"}]}},
        "output.sinks[0].url must not contain credentials (they come from the environment)",
        id="http-sink-credentials",
    ),
    pytest.param(
        {"output": {"sinks": [{"type": "file"}]}},
        "output.sinks[0].path is required for a file sink",
        id="file-sink-without-path",
    ),
    pytest.param(
        {"output": {"sinks": [{"type": "file", "path": ""}]}},
        "output.sinks[0].path must be a path (a nonempty string)",
        id="file-sink-empty-path",
    ),
    pytest.param(
        {"output": {"sinks": [{"type": "console", "url": "https://x.test"}]}},
        "output.sinks[0].url is not used by a console sink",
        id="field-of-another-sink-type",
    ),
    pytest.param(
        {"output": {"sinks": [{"type": "console", "name": ""}]}},
        "output.sinks[0].name must be a name of 1 to 256 characters",
        id="sink-name-empty",
    ),
    pytest.param(
        {"output": {"sinks": [{"type": "console", "timeout": "soon"}]}},
        "output.sinks[0].timeout must be a duration such as 500ms, 30s or 24h",
        id="sink-timeout",
    ),
    pytest.param(
        {"sandbox": {"tools": "grep"}},
        "sandbox.tools must be a list of names",
        id="sandbox-tools-string",
    ),
    pytest.param(
        {"sandbox": {"mcp": ["files", " "]}},
        "sandbox.mcp[1] must be a name",
        id="sandbox-mcp-blank",
    ),
    pytest.param(
        {"sandbox": {"network": ["https://api.example.test/v1"]}},
        "sandbox.network[0] must be an origin such as https://api.search.brave.com, or *",
        id="sandbox-network-path",
    ),
    pytest.param(
        {"sandbox": {"write": "yes"}},
        "sandbox.write must be true or false",
        id="sandbox-flag",
    ),
    pytest.param(
        {"nats": {"url": "localhost:4222"}},
        "nats.url must be a URL such as nats://127.0.0.1:4222",
        id="nats-url-without-scheme",
    ),
    pytest.param(
        {"nats": {"url": "nats://alice:s3cret@nats.internal:4222"}},
        "nats.url must not contain credentials (they come from the environment)",
        id="nats-url-credentials",
    ),
    pytest.param(
        {"nats": {"url": 4222}},
        "nats.url must be a URL such as nats://127.0.0.1:4222, or null",
        id="nats-url-number",
    ),
    pytest.param(
        {"nats": {"name": "my worker"}},
        "nats.name must be 1 to 256 letters, digits, - or _ (it is also the NATS service name)",
        id="nats-name",
    ),
    pytest.param(
        {"subjects": {"prefix": "a..b"}},
        "subjects.prefix must be subject tokens without wildcards, such as interaction",
        id="prefix-empty-token",
    ),
    pytest.param(
        {"subjects": {"prefix": "a.*"}},
        "subjects.prefix must be subject tokens without wildcards, such as interaction",
        id="prefix-wildcard",
    ),
    pytest.param(
        {"subjects": {"queue": ""}},
        "subjects.queue must be a queue group name without spaces, or null",
        id="queue-empty",
    ),
    pytest.param(
        {"nats": {"inbox_prefix": "_INBOX.>"}},
        "nats.inbox_prefix must be subject tokens without wildcards, such as _INBOX",
        id="inbox-prefix-wildcard",
    ),
    pytest.param(
        {"nats": {"inbox_prefix": "replies"}},
        "nats.inbox_prefix: replies is not under subjects.reply_prefixes (_INBOX.): the "
        "worker would refuse this package's clients' replies",
        id="inbox-prefix-outside-reply-prefixes",
    ),
    pytest.param(
        {"subjects": {"reply_prefixes": ["_INBOX"]}},
        "subjects.reply_prefixes[0] must be subject tokens ending with a dot, such as _INBOX.",
        id="reply-prefix-without-dot",
    ),
    pytest.param(
        {"data_dir": 5},
        "data_dir must be a path (a nonempty string)",
        id="data-dir",
    ),
    pytest.param(
        {"mcp": {"max_discovery_pages": 0}},
        "mcp.max_discovery_pages must be a positive integer",
        id="mcp-pages",
    ),
    pytest.param(
        {"mcp": {"max_capabilities": 2**53}},
        "mcp.max_capabilities must be at most 9007199254740991",
        id="mcp-capabilities-unsafe",
    ),
    pytest.param(
        {"mcp": {"servers": []}},
        "mcp.servers must be a mapping of server names to servers",
        id="mcp-servers-list",
    ),
    pytest.param(
        {"mcp": {"servers": {"x" * 257: {"transport": "stdio", "command": "c"}}}},
        "mcp.servers: the name of server 1 must be 1 to 256 characters",
        id="mcp-server-name-too-long",
    ),
    pytest.param(
        {"mcp": {"servers": {"": {"transport": "stdio", "command": "c"}}}},
        "mcp.servers: the name of server 1 must be 1 to 256 characters",
        id="mcp-server-name-empty",
    ),
    pytest.param(
        {"mcp": {"servers": {"files": {"command": "c"}}}},
        "mcp.servers.files.transport must be one of stdio, http",
        id="mcp-server-without-transport",
    ),
    pytest.param(
        {"mcp": {"servers": {"files": {"transport": "stdio"}}}},
        "mcp.servers.files.command is required for transport stdio",
        id="stdio-without-command",
    ),
    pytest.param(
        {
            "mcp": {
                "servers": {
                    "files": {"transport": "stdio", "command": "c", "args": "-v"}
                }
            }
        },
        "mcp.servers.files.args must be a list of strings",
        id="stdio-args",
    ),
    pytest.param(
        {
            "mcp": {
                "servers": {
                    "f": {"transport": "stdio", "command": "c", "env": {"N": 1}}
                }
            }
        },
        "mcp.servers.f.env.N must be a string",
        id="stdio-env-value",
    ),
    pytest.param(
        {
            "mcp": {
                "servers": {
                    "f": {"transport": "stdio", "command": "c", "url": "http://x"}
                }
            }
        },
        "mcp.servers.f.url is not used by transport stdio",
        id="stdio-with-url",
    ),
    pytest.param(
        {"mcp": {"servers": {"docs": {"transport": "http"}}}},
        "mcp.servers.docs.url is required for transport http",
        id="http-without-url",
    ),
    pytest.param(
        {
            "mcp": {
                "servers": {
                    "docs": {
                        "transport": "http",
                        "url": "http://h/mcp",
                        "headers_env": {"Authorization": "not a name"},
                    }
                }
            }
        },
        "mcp.servers.docs.headers_env.Authorization must be an environment variable name",
        id="http-headers-env",
    ),
    pytest.param(
        {
            "mcp": {
                "servers": {
                    "docs": {
                        "transport": "http",
                        "url": "http://h/mcp",
                        "restart_backoff": {"initial": "1m", "max": "10s"},
                    }
                }
            }
        },
        "mcp.servers.docs.restart_backoff.initial must not be longer than restart_backoff.max",
        id="backoff-order",
    ),
    pytest.param(
        {
            "mcp": {
                "servers": {
                    "f": {"transport": "stdio", "command": "c", "connect_timeout": 0}
                }
            }
        },
        "mcp.servers.f.connect_timeout must be a duration such as 500ms, 30s or 24h",
        id="connect-timeout-number",
    ),
    pytest.param(
        {
            "mcp": {
                "servers": {
                    "f": {
                        "transport": "http",
                        "url": "http://h/mcp",
                        "connect_timeout": "0s",
                    }
                }
            }
        },
        "mcp.servers.f.connect_timeout must be a positive duration such as 500ms, 30s or 24h",
        id="connect-timeout-zero",
    ),
    pytest.param(
        {"mcp": {"servers": {"a.b": {"transport": "ws"}}}},
        'mcp.servers."a.b".transport must be one of stdio, http',
        id="dotted-server-name-is-quoted",
    ),
    pytest.param(
        {"durable": {"enabled": True}, "subjects": {"queue": "a.b"}},
        "subjects.queue: a.b cannot name the durable consumers (<queue>-<family>): "
        "durable mode needs a queue group of letters, digits, - and _",
        id="durable-queue-name",
    ),
    pytest.param(
        {"durable": {"nak_backoff": ["1s", "soon"]}},
        "durable.nak_backoff must be a nonempty list of durations such as [1s, 5s, 30s]",
        id="durable-nak-backoff",
    ),
    pytest.param(
        {"durable": {"replicas": 7}},
        "durable.replicas must be an integer from 1 to 5",
        id="durable-replicas",
    ),
    pytest.param(
        {"durable": {"max_deliver": 0}},
        "durable.max_deliver must be a positive integer",
        id="durable-max-deliver",
    ),
    pytest.param(
        {"durable": {"calls_stream": "calls.in"}},
        "durable.calls_stream must be a stream name of letters, digits, - and _",
        id="durable-stream-name",
    ),
    pytest.param(
        {"idempotency": {"replicas": 0}},
        "idempotency.replicas must be an integer from 1 to 5",
        id="idempotency-replicas",
    ),
    pytest.param(
        {"idempotency": {"lease": "0s"}},
        "idempotency.lease must be a positive duration such as 500ms, 30s or 24h",
        id="idempotency-lease",
    ),
    pytest.param(
        {"idempotency": {"enabled": "auto"}},
        "idempotency.enabled must be true, false or null",
        id="idempotency-enabled-type",
    ),
    pytest.param(
        {"idempotency": {"bucket": "a.b"}},
        "idempotency.bucket must be a bucket name of letters, digits, - and _",
        id="bucket-name",
    ),
    pytest.param(
        ["nats"],
        "the configuration must be a mapping of keys",
        id="not-a-mapping",
    ),
]


@pytest.mark.parametrize(("data", "message"), PROBLEMS)
def test_each_problem_is_one_line_naming_its_key(data: object, message: str) -> None:
    assert problems_of(data) == [message]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(
            {"tools": {"commandz": {}}}, "unknown key: tools.commandz", id="nested"
        ),
        pytest.param({"worker": {}}, "unknown key: worker", id="top-level"),
        pytest.param(
            {"output": {"sinks": [{"type": "console", "colour": "red"}]}},
            "unknown key: output.sinks[0].colour",
            id="in-a-sink",
        ),
        pytest.param(
            {
                "mcp": {
                    "servers": {
                        "f": {"transport": "stdio", "command": "c", "shell": True}
                    }
                }
            },
            "unknown key: mcp.servers.f.shell",
            id="in-a-server",
        ),
        pytest.param(
            {"tools": {"read_text": {"max_bytes": 5}}},
            "unknown key: tools.read_text.max_bytes",
            id="in-read-text",
        ),
        pytest.param(
            {"sandbox": {"skills": []}}, "unknown key: sandbox.skills", id="sandbox"
        ),
        pytest.param({7: True}, "unknown key: 7", id="not-a-string"),
        pytest.param({"a b": 1}, 'unknown key: "a b"', id="quoted"),
    ],
)
def test_unknown_keys_are_named(data: object, message: str) -> None:
    assert problems_of(data) == [message]


def test_several_problems_give_one_line_each() -> None:
    assert problems_of(
        {
            "tools": {"commandz": {}, "commands": {"max_entries": 0}},
            "max_pending": -1,
            "shutdown_grace": "soon",
            "output": {
                "sinks": [
                    {"type": "console", "name": "ui"},
                    {"type": "fax"},
                    {"type": "nats", "name": "ui", "subject": "ui.{key}"},
                ]
            },
            "durable": {"enabled": True, "nak_backoff": []},
        }
    ) == [
        "tools.commands.max_entries must be an integer from 1 to 10000",
        "unknown key: tools.commandz",
        "output.sinks[1].type must be one of console, nats, jetstream, http, file",
        'output.sinks[2].name "ui" is used twice',
        "max_pending must be a positive integer",
        "shutdown_grace must be a duration such as 500ms, 30s or 24h",
        "durable.nak_backoff must be a nonempty list of durations such as [1s, 5s, 30s]",
    ]


def test_a_default_sink_name_clashing_with_a_given_one_is_reported() -> None:
    assert problems_of(
        {
            "output": {
                "sinks": [{"type": "console"}, {"type": "console", "name": "console#0"}]
            }
        }
    ) == ['output.sinks[1].name "console#0" is used twice']


def test_no_problem_line_repeats_a_value_from_the_file() -> None:
    secret = "hunter2-secret-value"
    lines = problems_of(
        {
            "nats": {"url": f"nats://me:{secret}@h:4222", "name": secret + " x"},
            "max_pending": secret,
            "tools": {"commands": {"enabled": [secret]}},
            "mcp": {
                "servers": {
                    "s": {"transport": "stdio", "command": "c", "env": {"K": [secret]}}
                }
            },
            "output": {
                "sinks": [{"type": "http", "url": f"https://x.test/?k={secret} "}]
            },
        }
    )
    assert len(lines) == 6
    assert not any(secret in line for line in lines)


# --------------------------------------------------------------------------- paths


def test_relative_paths_resolve_against_the_files_directory(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    path = write(
        conf,
        "data_dir: state\n"
        "workspace: ../project\n"
        "output:\n  sinks: [{type: file, path: out/deliveries.jsonl}]\n"
        "mcp:\n  servers:\n    f: {transport: stdio, command: srv, cwd: tools}\n",
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    settings = load_settings(Path("../conf/worker.yaml"), env={}, cwd=elsewhere)
    base = conf.resolve()
    assert settings.data_dir == base / "state"
    assert settings.workspace == tmp_path.resolve() / "project"
    assert settings.output.sinks[0].path == base / "out" / "deliveries.jsonl"
    assert settings.mcp.servers["f"].cwd == base / "tools"
    assert path.exists()


def test_absolute_paths_are_kept(tmp_path: Path) -> None:
    target = (tmp_path / "data").resolve()
    settings = parse_settings({"data_dir": str(target)}, base_dir=Path("/elsewhere"))
    assert settings.data_dir == target


# --------------------------------------------------------------------------- finding the file


def only(directory: Path) -> config.SearchBounds:
    """A search that looks in `directory` alone (as if it were the home directory): no
    worker.yaml in a parent of the test's (/tmp) can be found."""
    return config.SearchBounds(os.geteuid(), directory)


def test_interaction_config_names_the_file(tmp_path: Path) -> None:
    write(tmp_path, "max_pending: 7\n", name="custom.yaml")
    write(tmp_path, "max_pending: 9\n")
    env = {"INTERACTION_CONFIG": "custom.yaml"}
    assert load_settings(None, env=env, cwd=tmp_path).max_pending == 7


def test_an_explicit_path_beats_interaction_config(tmp_path: Path) -> None:
    given = write(tmp_path, "max_pending: 3\n", name="given.yaml")
    env = {
        "INTERACTION_CONFIG": str(write(tmp_path, "max_pending: 7\n", name="c.yaml"))
    }
    assert load_settings(given, env=env, cwd=tmp_path).max_pending == 3


def test_worker_yaml_in_the_current_directory_is_read_when_present(
    tmp_path: Path,
) -> None:
    write(tmp_path, "max_pending: 9\n")
    assert (
        load_settings(None, env={}, cwd=tmp_path, bounds=only(tmp_path)).max_pending
        == 9
    )


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_a_named_file_that_does_not_exist_is_an_error(tmp_path: Path, how: str) -> None:
    missing = tmp_path / "nope.yaml"
    path, env = (
        (missing, {})
        if how == "argument"
        else (None, {"INTERACTION_CONFIG": str(missing)})
    )
    with pytest.raises(ConfigurationError) as caught:
        load_settings(path, env=env, cwd=tmp_path)
    assert str(caught.value) == f"configuration file not found: {missing}"


def test_a_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "nats:\n  url: nats://h:4222\n max_pending: [1\n")
    with pytest.raises(ConfigurationError) as caught:
        load_settings(path, env={})
    message = str(caught.value)
    assert message.startswith(f"{path}: invalid YAML at line 3, column 2: ")
    assert "\n" not in message and "Traceback" not in message


def test_a_key_given_twice_is_an_error_not_an_overwrite(tmp_path: Path) -> None:
    path = write(tmp_path, "max_pending: 5\nworkspace: .\nmax_pending: 6\n")
    with pytest.raises(ConfigurationError) as caught:
        load_settings(path, env={})
    assert str(caught.value) == (
        f"{path}: invalid YAML at line 3, column 1: duplicate key max_pending"
    )


def test_a_file_of_the_wrong_shape_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "- nats\n- tools\n")
    with pytest.raises(ConfigurationError) as caught:
        load_settings(path, env={})
    assert str(caught.value) == "the configuration must be a mapping of keys"


# --------------------------------------------------------------------------- environment


def test_interaction_nats_url_overrides_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "nats:\n  url: nats://from-file:4222\n  name: w1\n")
    env = {"INTERACTION_NATS_URL": "tls://from-env:4443"}
    settings = load_settings(path, env=env)
    assert settings.nats == NatsSettings(url="tls://from-env:4443", name="w1")
    assert load_settings(path, env={"INTERACTION_NATS_URL": ""}).nats.url == (
        "nats://from-file:4222"
    )


def test_interaction_nats_url_applies_without_a_file(tmp_path: Path) -> None:
    env = {"INTERACTION_NATS_URL": "nats://127.0.0.1:4222"}
    assert (
        load_settings(None, env=env, cwd=tmp_path, bounds=only(tmp_path)).nats.url
        == "nats://127.0.0.1:4222"
    )


def test_a_bad_interaction_nats_url_is_named_with_the_files_problems(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "max_pending: 0\n")
    env = {"INTERACTION_NATS_URL": "nats://user:pw-secret@h:4222"}
    with pytest.raises(ConfigurationError) as caught:
        load_settings(path, env=env)
    assert str(caught.value).splitlines() == [
        "max_pending must be a positive integer",
        "INTERACTION_NATS_URL must not contain credentials (they come from the environment)",
    ]


# --------------------------------------------------------------------------- effective


def test_effective_renders_plain_yaml_with_durations_as_strings(tmp_path: Path) -> None:
    effective = load_settings(write(tmp_path, EXAMPLE_YAML), env={}).effective()
    assert yaml.safe_load(yaml.safe_dump(effective)) == effective
    assert effective["tool_timeout"] == "1m"
    assert effective["shutdown_grace"] == "15s"
    assert effective["durable"]["events_max_age"] == "24h"
    assert effective["mcp"]["servers"]["files"]["restart_backoff"] == {
        "initial": "500ms",
        "max": "30s",
    }
    files, docs = effective["mcp"]["servers"].values()
    assert (files["timeout"], files["connect_timeout"]) == ("1s", "45s")
    assert (docs["timeout"], docs["connect_timeout"]) == ("30s", "30s")
    assert effective["output"]["sinks"][1] == {
        "type": "nats",
        "name": "ui",
        "subject": "ui.messages.{key}",
        "timeout": "10s",
    }


def test_effective_round_trips_through_parse_settings(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, EXAMPLE_YAML), env={})
    dumped = yaml.safe_dump(settings.effective())
    assert parse_settings(yaml.safe_load(dumped), base_dir=Path("/other")) == settings


def test_effective_writes_absent_blocks_out_as_their_defaults(tmp_path: Path) -> None:
    settings = load_settings(None, env={}, cwd=tmp_path, bounds=only(tmp_path))
    effective = settings.effective()
    assert effective["sandbox"]["tools"] == ["read_text", *COMMAND_NAMES]
    assert effective["tools"]["read_text"] == {}
    again = parse_settings(effective, base_dir=Path("/other"))
    assert again == replace(
        settings,
        sandbox=DEFAULT_SANDBOX,
        tools=DEFAULT_TOOLS,
        output=replace(settings.output, sinks_given=True),
    )
    assert again.effective() == effective


# --------------------------------------------------------------------------- durations


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("30s", 30.0),
        ("1.5s", 1.5),
        ("2m", 120.0),
        ("24h", 86400.0),
        ("2d", 172800.0),
        ("0.25ms", 0.00025),
    ],
)
def test_durations_read_and_write_back(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize(
    "text", ["2d", "1500ms", "15m", "0.5h", "15", "15 s", "soon", "0s"]
)
def test_the_file_and_the_command_line_read_a_duration_alike(text: str) -> None:
    try:
        in_file: float | str = parse_settings(
            {"durable": {"ack_wait": text}}, base_dir=Path("/srv")
        ).durable.ack_wait
    except ConfigurationError as error:
        in_file = str(error).removeprefix("durable.ack_wait ")
    try:
        arguments = ["record", "--out", "r.jsonl", "--duration", text]
        on_line: float | str = build_parser(HANDLERS).parse_args(arguments).duration
    except SystemExit:
        on_line = "refused"
    if isinstance(in_file, float):
        assert on_line == in_file
    else:
        assert on_line == "refused" and in_file.startswith("must be a")


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.5, "500ms"), (60.0, "1m"), (90.0, "90s"), (7200.0, "2h")]
)
def test_durations_are_written_in_the_largest_whole_unit(
    seconds: float, text: str
) -> None:
    assert format_duration(seconds) == text


def test_the_inbox_prefix_defaults_to_inbox_and_may_name_its_own_reply_prefix() -> None:
    assert parse_settings(None, base_dir=Path.cwd()).nats.inbox_prefix == "_INBOX"
    own = parse_settings(
        {
            "nats": {"inbox_prefix": "team.inbox"},
            "subjects": {"reply_prefixes": ["team."]},
        },
        base_dir=Path.cwd(),
    )
    assert own.nats.inbox_prefix == "team.inbox"
    assert own.effective()["nats"]["inbox_prefix"] == "team.inbox"


def test_account_inboxes_is_off_by_default_and_read_as_a_boolean() -> None:
    assert not parse_settings(None, base_dir=Path.cwd()).subjects.account_inboxes
    on = parse_settings({"subjects": {"account_inboxes": True}}, base_dir=Path.cwd())
    assert on.subjects.account_inboxes
    assert on.effective()["subjects"]["account_inboxes"] is True
    again = parse_settings(on.effective(), base_dir=Path.cwd())
    assert again.subjects == on.subjects
    with pytest.raises(ConfigurationError) as refused:
        parse_settings({"subjects": {"account_inboxes": "yes"}}, base_dir=Path.cwd())
    assert "subjects.account_inboxes must be true or false" in str(refused.value)
