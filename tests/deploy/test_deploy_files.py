"""deploy/ read as files (docs/operations.md): the Dockerfile, the compose file and the Kubernetes manifests
statically (these machines have a docker client but no engine, and pull no image), the manifests also
against the Kubernetes schemas offline (`kubernetes-validate`), the NATS configurations by nats-server's
own check, and every configuration against the others: the names the worker configuration gives are the
ones the NATS permissions name, the probes reach the port the worker listens on, the grace periods
outlast the drain. The NATS files run for real in test_deploy_cluster.py."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate.utils as kubernetes  # type: ignore[import-untyped]
import pytest
import trustme
import yaml
from nats_conf import parse

from interaction_worker.config import Settings, parse_settings
from interaction_worker.contracts.wire import DURABLE_KINDS
from interaction_worker.embedded import find_nats_server

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"
NATS = DEPLOY / "nats"
USERS = ("workers", "agent_a", "agent_b", "operator", "ui")
# The accounts of deploy/nats/accounts.conf: the workers', two client identities, the console's, the UIs'.
WORKERS, OPERATOR, UI = "INTERACTION", "OPERATOR", "UI"
CLIENT_ACCOUNTS = ("AGENT_A", "AGENT_B")
# The oldest and the newest Kubernetes whose schemas kubernetes-validate ships.
KUBERNETES_VERSIONS = ("1.25.0", "1.37.0")
# What a pinned image reference looks like: a tag with a full version, or a digest.
PINNED = re.compile(r"^[\w./-]+(:\d+\.\d+\.\d+[\w.-]*|@sha256:[0-9a-f]{64})$")
SECRET_NAME = re.compile(r"PASSWORD|TOKEN|SECRET|_KEY|CREDS|SEED", re.IGNORECASE)


def load_config(path: Path) -> Settings:
    return parse_settings(yaml.safe_load(path.read_text()), base_dir=path.parent)


def seconds(duration: float | str) -> float:
    """`15s`, `500ms`, `2m` (as the configuration writes them) or a number of seconds."""
    if isinstance(duration, int | float):
        return float(duration)
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", duration)
    assert match is not None, duration
    return float(match[1]) * {"ms": 0.001, "s": 1.0, "m": 60.0}[match[2]]


# --------------------------------------------------------------------------- Dockerfile


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    lines: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    assert not pending, "a continuation line ends the file"
    found = []
    for line in lines:
        keyword, _, rest = line.partition(" ")
        found.append((keyword.upper(), rest.strip()))
    return found


def final_stage(found: list[tuple[str, str]]) -> list[tuple[str, str]]:
    last_from = max(i for i, (keyword, _) in enumerate(found) if keyword == "FROM")
    return found[last_from:]


def test_the_dockerfile_builds_on_pinned_images_and_runs_unprivileged() -> None:
    found = instructions(DEPLOY / "Dockerfile")
    bases = [args.split()[0] for keyword, args in found if keyword == "FROM"]
    assert bases, "no FROM"
    for base in bases:
        assert PINNED.match(base), f"{base}: pin the base image to a full version"
    final = final_stage(found)
    users = [args for keyword, args in final if keyword == "USER"]
    assert users, "the final stage must switch to an unprivileged user"
    uid, _, gid = users[-1].partition(":")
    # Numeric, so that Kubernetes' runAsNonRoot can check it; never root.
    assert uid.isdigit() and int(uid) > 0, users[-1]
    assert gid == "" or (gid.isdigit() and int(gid) > 0), users[-1]
    entrypoints = [args for keyword, args in final if keyword == "ENTRYPOINT"]
    assert [json.loads(args) for args in entrypoints] == [["interaction-worker", "run"]]
    assert not [args for keyword, args in final if keyword == "CMD"]


def test_the_dockerfile_installs_the_package_from_the_source_tree() -> None:
    found = instructions(DEPLOY / "Dockerfile")
    copied = [
        args.split()[:-1]
        for keyword, args in found
        if keyword == "COPY" and not args.startswith("--from")
    ]
    sources = {source.rstrip("/") for group in copied for source in group}
    assert {"pyproject.toml", "src"} <= sources
    for source in sources:
        assert (REPO / source).exists(), f"COPY {source}: not in the repository"
    assert any(
        keyword == "RUN" and re.search(r"pip install \.(\s|$)", args)
        for keyword, args in found
    )
    # The build context is the repository root; its ignore file lets in what is copied, only.
    lines = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    ignored = [
        line.strip() for line in lines if line.strip() and not line.startswith("#")
    ]
    assert ignored[0] == "*"
    assert {line[1:].rstrip("/") for line in ignored if line.startswith("!")} == sources
    assert (
        "README.md" in sources
    )  # the package's metadata reads it (pyproject's `readme`)


def test_the_image_holds_no_secret() -> None:
    found = instructions(DEPLOY / "Dockerfile")
    for keyword, args in found:
        if keyword in ("ENV", "ARG"):
            names = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=", args) or [args.split()[0]]
            assert not [n for n in names if SECRET_NAME.search(n)], f"{keyword} {args}"
        if keyword in ("COPY", "ADD"):
            assert not re.search(
                r"\.env\b|\.creds\b|\.pem\b|\.key\b|\.netrc\b|id_", args
            )
    text = (DEPLOY / "Dockerfile").read_text()
    assert "--secret" not in text  # nothing is needed at build time either
    assert not re.search(r"INTERACTION_NATS_(PASSWORD|TOKEN|NKEY_SEED|CREDS)=", text)


def test_the_image_checks_readiness_where_the_worker_serves_it() -> None:
    found = instructions(DEPLOY / "Dockerfile")
    checks = [args for keyword, args in final_stage(found) if keyword == "HEALTHCHECK"]
    assert len(checks) == 1
    command = json.loads(checks[0].split("CMD", 1)[1])
    url = re.search(r"http://127\.0\.0\.1:(\d+)/readyz", " ".join(command))
    assert url is not None, command
    listen = load_config(DEPLOY / "worker.yaml").metrics.listen
    assert listen is not None and listen.endswith(f":{url[1]}")
    exposed = [args for keyword, args in found if keyword == "EXPOSE"]
    assert exposed == [url[1]]
    env = " ".join(args for keyword, args in found if keyword == "ENV")
    assert "INTERACTION_CONFIG=/etc/interaction-worker/worker.yaml" in env


@pytest.mark.slow
def test_an_image_is_built_where_a_docker_engine_runs() -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker client: the Dockerfile is checked statically only")
    info = subprocess.run([docker, "info"], capture_output=True, timeout=30)
    if info.returncode != 0:
        pytest.skip(
            "no Docker engine here (`docker info` failed): the Dockerfile is checked statically only"
        )
    tag = f"interaction-worker-test:{os.getpid()}"
    build = subprocess.run(
        [docker, "build", "-f", str(DEPLOY / "Dockerfile"), "-t", tag, str(REPO)],
        capture_output=True,
        timeout=900,
    )
    assert build.returncode == 0, build.stderr.decode(errors="replace")[-2000:]
    try:
        probe = [docker, "run", "--rm", "--entrypoint", "sh", tag, "-c"]
        uid = subprocess.run([*probe, "id -u"], capture_output=True, timeout=60)
        assert uid.stdout.decode().strip() == "10001"
        usage = subprocess.run(
            [docker, "run", "--rm", tag, "--help"], capture_output=True, timeout=60
        )
        assert usage.returncode == 0 and b"--config" in usage.stdout
    finally:
        subprocess.run(
            [docker, "image", "rm", "-f", tag], capture_output=True, timeout=60
        )


# --------------------------------------------------------------------------- the worker's configuration


def test_the_worker_configuration_is_valid_and_durable_on_three_replicas() -> None:
    settings = load_config(DEPLOY / "worker.yaml")
    assert settings.nats.url is None  # INTERACTION_NATS_URL gives it, per deployment
    assert settings.durable.enabled
    assert settings.durable.replicas == 3
    assert settings.idempotency.replicas == 3
    assert settings.idempotency.enabled in (None, True)  # on in durable mode
    assert settings.metrics.listen == "0.0.0.0:9464"
    # Replies go to the accounts' own inbox slices (deploy/nats/accounts.conf), and nowhere else;
    # a core request through an import only to its own account's.
    assert sorted(settings.subjects.reply_prefixes) == [
        "_INBOX.AGENT_A.",
        "_INBOX.AGENT_B.",
        "_INBOX.OPERATOR.",
    ]
    assert settings.subjects.account_inboxes
    assert settings.nats.inbox_prefix == "_INBOX.AGENT_A"


def test_compose_gives_the_workers_the_same_configuration_plus_its_mcp_server() -> None:
    plain = load_config(DEPLOY / "worker.yaml").effective()
    composed = load_config(DEPLOY / "compose" / "worker.yaml").effective()
    # data_dir resolves beside each file; with a NATS URL nothing uses it.
    apart = ("mcp", "sandbox", "data_dir")
    assert {k: v for k, v in composed.items() if k not in apart} == {
        k: v for k, v in plain.items() if k not in apart
    }
    assert list(composed["mcp"]["servers"]) == ["everything"]
    assert composed["sandbox"]["mcp"] == ["everything"]
    assert composed["sandbox"]["tools"] == plain["sandbox"]["tools"]


# --------------------------------------------------------------------------- NATS


@pytest.fixture(scope="module")
def server_variables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every variable a node reads: the passwords, and the WebSocket listener's certificate and key
    (files the server loads, hence real ones)."""
    folder = tmp_path_factory.mktemp("ws-tls")
    leaf = trustme.CA().issue_cert("nats.example.com")
    cert, key = folder / "cert.pem", folder / "key.pem"
    cert.write_bytes(b"".join(pem.bytes() for pem in leaf.cert_chain_pems))
    leaf.private_key_pem.write_to_path(str(key))
    return password_variables() | {"NATS_WS_CERT": str(cert), "NATS_WS_KEY": str(key)}


def nats_check(config: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """nats-server's own parse of a configuration file (`-t`), with `env` as its environment."""
    return subprocess.run(
        [find_nats_server(), "-c", str(config), "-t"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def password_variables() -> dict[str, str]:
    return {f"NATS_{user.upper()}_PASSWORD": f"pw{user}" for user in USERS}


@pytest.mark.parametrize("node", [1, 2, 3])
def test_each_node_configuration_is_valid_with_the_password_variables(
    node: int, server_variables: dict[str, str]
) -> None:
    env = {"PATH": os.environ.get("PATH", "")} | server_variables
    checked = nats_check(NATS / f"nats-{node}.conf", env)
    assert checked.returncode == 0, checked.stderr
    assert re.search(
        rf"^server_name: nats-{node}$", (NATS / f"nats-{node}.conf").read_text(), re.M
    )


def test_a_node_refuses_to_start_without_a_password_or_certificate_variable(
    server_variables: dict[str, str],
) -> None:
    for variable in server_variables:
        env = {"PATH": os.environ.get("PATH", "")} | server_variables
        del env[variable]
        checked = nats_check(NATS / "nats-1.conf", env)
        assert checked.returncode != 0
        assert f"variable reference for '{variable}'" in checked.stderr


def test_the_passwords_are_variables_never_values() -> None:
    text = (NATS / "accounts.conf").read_text()
    passwords = re.findall(r"^\s*password:\s*(\S+)", text, re.M)
    assert sorted(passwords) == sorted(f"${name}" for name in password_variables())
    users = re.findall(r"^\s*user:\s*(\S+)", text, re.M)
    assert sorted(users) == sorted(USERS)


def test_the_cluster_has_three_routed_nodes_with_a_jetstream_store() -> None:
    server = (NATS / "server.conf").read_text()
    routes = re.findall(r"nats-route://(nats-\d):6222", server)
    assert sorted(routes) == ["nats-1", "nats-2", "nats-3"]
    assert re.search(r"jetstream\s*\{[^}]*store_dir:\s*/data/jetstream", server)
    names = [
        re.findall(r"^server_name: (\S+)$", (NATS / f"nats-{n}.conf").read_text(), re.M)
        for n in (1, 2, 3)
    ]
    assert names == [["nats-1"], ["nats-2"], ["nats-3"]]


def test_every_node_serves_browsers_over_websocket_with_tls_from_origins_listed() -> (
    None
):
    """docs/operations.md, "Browsers": no plain WebSocket, the certificate from the environment, and
    an explicit list of the pages' origins (a browser sends its Origin; others are refused)."""
    websocket = parse((NATS / "server.conf").read_text())["websocket"]
    assert websocket["tls"] == {
        "cert_file": "$NATS_WS_CERT",
        "key_file": "$NATS_WS_KEY",
    }
    assert "no_tls" not in websocket and "authorization" not in websocket
    origins = websocket["allowed_origins"]
    assert origins and all(re.fullmatch(r"https://[\w.-]+(:\d+)?", o) for o in origins)
    assert websocket["port"] == "8443"
    for node in (1, 2, 3):
        assert "websocket" not in parse((NATS / f"nats-{node}.conf").read_text())


def accounts() -> dict[str, dict[str, Any]]:
    """deploy/nats/accounts.conf's accounts, read as data."""
    document = parse((NATS / "accounts.conf").read_text())
    found: dict[str, dict[str, Any]] = document["accounts"]
    return found


def user(account: str) -> dict[str, Any]:
    """The one user of an account."""
    (only,) = accounts()[account]["users"]
    found: dict[str, Any] = only
    return found


def rights(account: str, direction: str, kind: str = "allow") -> set[str]:
    """The subjects an account's user may (`allow`) or may not (`deny`) publish or subscribe to."""
    permissions = user(account)["permissions"].get(direction, {})
    return set(permissions.get(kind, []))


def imported(account: str) -> dict[str, set[str]]:
    """What an account imports from the workers' account: {"service": subjects, "stream": subjects}."""
    found: dict[str, set[str]] = {"service": set(), "stream": set()}
    for entry in accounts()[account].get("imports", []):
        ((kind, source),) = entry.items()
        assert source["account"] == WORKERS, entry
        found[kind].add(source["subject"])
    return found


def exported(kind: str) -> dict[str, dict[str, Any]]:
    """The workers' account's exports of one kind, by subject, with their settings."""
    found = {}
    for entry in accounts()[WORKERS]["exports"]:
        if kind in entry:
            found[entry[kind]] = {k: v for k, v in entry.items() if k != kind}
    return found


class Names:
    """The subjects and JetStream names deploy/worker.yaml gives, as accounts.conf must name them."""

    def __init__(self, settings: Settings) -> None:
        p = settings.subjects.prefix
        self.requests = {f"{p}.{s}" for s in ("tool.call", "mcp.call", "observe")}
        self.requests |= {f"{p}.{s}" for s in ("output.deliver", "tool.list")}
        self.requests |= {f"{p}.{s}" for s in ("command", "command.catalog")}
        # The console's form: calls, deliveries, the tools' names; never P.observe or commands.
        self.console_requests = {
            f"{p}.{s}" for s in ("tool.call", "mcp.call", "output.deliver", "tool.list")
        }
        self.events = {
            f"{p}.{family}.>"
            for family in (
                "tool.result",
                "tool.observation",
                "mcp.result",
                "mcp.observation",
                "output.receipt",
                "command.done",
            )
        }
        self.dead = f"{p}.dead.>"
        self.sinks = {
            re.sub(r"\{key\}$", ">", sink.subject)
            for sink in settings.output.sinks
            if sink.type == "nats" and sink.subject is not None
        }
        # The jetstream sinks' subjects, and the streams that store them: the browsers read their
        # history with direct gets, and the workers create them when missing.
        self.stored = {
            re.sub(r"\{key\}$", ">", sink.subject)
            for sink in settings.output.sinks
            if sink.type == "jetstream" and sink.subject is not None
        }
        self.sink_streams = {
            sink.stream
            for sink in settings.output.sinks
            if sink.type == "jetstream" and sink.stream is not None
        }
        self.browser_history = {
            f"$JS.API.DIRECT.GET.{stream}" for stream in self.sink_streams
        }
        self.calls = settings.durable.calls_stream
        self.events_stream = settings.durable.events_stream
        self.streams = (self.calls, self.events_stream, settings.durable.dead_stream)
        self.bucket = settings.idempotency.bucket
        # Every durable consumer a worker may create: a worker given commands in code has one more.
        self.consumers = [
            f"{settings.subjects.queue_group}-{kind}" for kind in DURABLE_KINDS
        ]
        self.direct_get = f"$JS.API.DIRECT.GET.{self.events_stream}"


def test_the_workers_account_exports_requests_events_inboxes_and_history_only() -> None:
    """Change a prefix, a stream or a sink in worker.yaml, and this fails until accounts.conf
    follows."""
    names = Names(load_config(DEPLOY / "worker.yaml"))
    assert names.sinks == {"deliveries.>"}
    assert names.stored == {"stored.deliveries.>"}
    assert names.sink_streams == {"DELIVERIES"}
    services = exported("service")
    assert set(services) == names.requests | {names.direct_get} | names.browser_history
    for subject in names.requests:
        # A short life for the server's mapping of a reply that goes elsewhere (docs/operations.md).
        assert seconds(services[subject]["response_threshold"]) <= 10, subject
        assert "accounts" not in services[subject]
    assert services[names.direct_get] == {
        "response_type": "stream",
        "accounts": [OPERATOR],
    }
    for subject in names.browser_history:
        assert services[subject] == {"response_type": "stream", "accounts": [UI]}
    streams = exported("stream")
    assert (
        set(streams)
        == names.events | {names.dead, "_INBOX.*.>"} | names.sinks | names.stored
    )
    assert all(streams[subject] == {} for subject in names.events)
    assert streams[names.dead] == {"accounts": [OPERATOR]}
    assert streams["deliveries.>"] == {"accounts": [OPERATOR, UI]}
    for subject in names.stored:
        assert streams[subject] == {"accounts": [UI]}
    assert streams["_INBOX.*.>"] == {"account_token_position": "2"}
    # Only the workers' account holds streams.
    assert [a for a, block in accounts().items() if "jetstream" in block] == [WORKERS]


def test_each_account_imports_and_may_use_what_its_role_needs_and_nothing_else() -> (
    None
):
    settings = load_config(DEPLOY / "worker.yaml")
    names = Names(settings)
    assert sorted(accounts()) == sorted([WORKERS, *CLIENT_ACCOUNTS, OPERATOR, UI])
    for account in CLIENT_ACCOUNTS:
        inbox = f"_INBOX.{account}.>"
        assert imported(account) == {
            "service": names.requests,
            "stream": names.events | {inbox},
        }
        assert rights(account, "publish") == names.requests
        assert rights(account, "subscribe") == names.events | {inbox}
    assert imported(OPERATOR) == {
        "service": names.console_requests | {names.direct_get},
        "stream": names.events | {names.dead, "_INBOX.OPERATOR.>"} | names.sinks,
    }
    assert rights(OPERATOR, "publish") == names.console_requests | {names.direct_get}
    assert (
        rights(OPERATOR, "subscribe")
        == names.events
        | {
            names.dead,
            "_INBOX.OPERATOR.>",
        }
        | names.sinks
    )
    # A browser, by default (docs/operations.md, "Browsers"): the deliveries of the nats and
    # jetstream sinks, the stored ones' history through direct gets, answered in its own inbox;
    # no event, no request.
    assert imported(UI) == {
        "service": names.browser_history,
        "stream": names.sinks | names.stored,
    }
    assert rights(UI, "publish") == names.browser_history
    assert rights(UI, "publish", "deny") == set()
    assert rights(UI, "subscribe") == names.sinks | names.stored | {"_INBOX.UI.>"}
    assert not rights(UI, "subscribe") & names.events
    # No account but the workers' holds a JetStream right beyond the histories' direct gets: no
    # consumer (its push consumer could deliver onto a request subject), no ledger, no stream.
    for account in (*CLIENT_ACCOUNTS, OPERATOR):
        jetstream = {s for s in rights(account, "publish") if s.startswith("$")}
        assert jetstream <= {names.direct_get}, account
    jetstream = {s for s in rights(UI, "publish") if s.startswith("$")}
    assert jetstream == names.browser_history


def test_the_workers_keep_their_streams_and_answer_where_the_accounts_listen() -> None:
    settings = load_config(DEPLOY / "worker.yaml")
    names = Names(settings)
    publish = rights(WORKERS, "publish")
    assert names.events | {names.dead} | names.sinks | names.stored <= publish
    # Replies: to an account's inbox slice, and to a request's `_R_.` subject through an import.
    assert {"_INBOX.>", "_R_.>"} <= publish
    for stream in (*names.streams, f"KV_{names.bucket}"):
        for action in ("INFO", "CREATE", "UPDATE"):
            assert f"$JS.API.STREAM.{action}.{stream}" in publish
    # The jetstream sinks' streams: looked up, and created when missing; never updated.
    for stream in names.sink_streams:
        for action in ("INFO", "CREATE"):
            assert f"$JS.API.STREAM.{action}.{stream}" in publish
        assert f"$JS.API.STREAM.UPDATE.{stream}" not in publish
    for consumer in names.consumers:
        for action in ("INFO", "DURABLE.CREATE", "MSG.NEXT"):
            assert f"$JS.API.CONSUMER.{action}.{names.calls}.{consumer}" in publish
        assert f"$JS.ACK.{names.calls}.{consumer}.>" in publish
    assert f"$KV.{names.bucket}.>" in publish
    # The MCP servers' OAuth tokens: the workers' alone, exported to nobody.
    for subject in (
        "$JS.API.STREAM.INFO.KV_interaction_mcp_auth",
        "$JS.API.STREAM.CREATE.KV_interaction_mcp_auth",
        "$KV.interaction_mcp_auth.>",
        "$JS.API.DIRECT.GET.KV_interaction_mcp_auth.>",
    ):
        assert subject in publish
    exported = (NATS / "accounts.conf").read_text().split("exports: [", 1)[1]
    assert "mcp_auth" not in exported.split("]", 1)[0]
    # Never delete or purge: nothing in the workers' rights names another JetStream action.
    assert not [s for s in publish if re.search(r"DELETE|PURGE|STEPDOWN|REMOVE", s)]
    assert rights(WORKERS, "subscribe") == names.requests | {"$SRV.>", "_INBOX.>"}
    # Each reply prefix is exactly an account's inbox slice, and the workers read none of them.
    slices = {
        s.removesuffix(">")
        for account in accounts()
        for s in imported(account)["stream"]
        if s.startswith("_INBOX.")
    }
    assert slices == set(settings.subjects.reply_prefixes)
    assert rights(WORKERS, "subscribe", "deny") == {f"{s}>" for s in slices}
    assert settings.nats.inbox_prefix + "." in slices


def check_with_import(
    tmp_path: Path, account: str, entry: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """nats-server's check of nats-1.conf with accounts.conf's `account` importing `entry` too."""
    text = (NATS / "accounts.conf").read_text()
    opened = text.index("imports: [", text.index(f"\n  {account} {{")) + len(
        "imports: ["
    )
    (tmp_path / "accounts.conf").write_text(
        f"{text[:opened]}\n      {entry}{text[opened:]}"
    )
    # nats-server reads an include's path relative to the including file.
    server = os.path.relpath(NATS / "server.conf", tmp_path)
    node = tmp_path / "node.conf"
    node.write_text(f'include "{server}"\ninclude ./accounts.conf\n')
    return nats_check(node, {"PATH": os.environ.get("PATH", "")} | env)


def test_the_unchanged_accounts_pass_the_same_check(
    tmp_path: Path, server_variables: dict[str, str]
) -> None:
    checked = check_with_import(tmp_path, "AGENT_B", "", server_variables)
    assert checked.returncode == 0, checked.stderr


def test_a_deployment_may_show_the_events_to_its_browsers_by_importing_them(
    tmp_path: Path, server_variables: dict[str, str]
) -> None:
    """The opt-in accounts.conf describes: the events are exported to every account."""
    entry = '{stream: {account: INTERACTION, subject: "interaction.tool.result.>"}}'
    checked = check_with_import(tmp_path, "UI", entry, server_variables)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize(
    ("account", "subject"),
    [
        ("AGENT_B", "_INBOX.AGENT_A.>"),  # another account's replies
        ("AGENT_B", "_INBOX.>"),  # every account's replies
        ("AGENT_A", "interaction.dead.>"),  # the bodies every client sent
        ("UI", "interaction.dead.>"),
        ("UI", "_INBOX.AGENT_A.>"),
    ],
)
def test_a_node_refuses_an_account_that_imports_what_is_not_its_own(
    account: str, subject: str, tmp_path: Path, server_variables: dict[str, str]
) -> None:
    entry = f'{{stream: {{account: INTERACTION, subject: "{subject}"}}}}'
    checked = check_with_import(tmp_path, account, entry, server_variables)
    assert checked.returncode != 0
    assert "stream import not authorized" in checked.stderr, checked.stderr


@pytest.mark.parametrize(
    ("account", "subject"),
    [
        ("AGENT_A", "$JS.API.DIRECT.GET.INTERACTION_EVENTS"),
        ("UI", "$JS.API.DIRECT.GET.INTERACTION_EVENTS"),
        ("AGENT_A", "$JS.API.DIRECT.GET.DELIVERIES"),
    ],
)
def test_a_node_refuses_an_account_that_imports_a_service_not_its_own(
    account: str, subject: str, tmp_path: Path, server_variables: dict[str, str]
) -> None:
    entry = f'{{service: {{account: INTERACTION, subject: "{subject}"}}}}'
    checked = check_with_import(tmp_path, account, entry, server_variables)
    assert checked.returncode != 0
    assert "service import not authorized" in checked.stderr, checked.stderr


# --------------------------------------------------------------------------- compose


def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return document


def test_compose_runs_three_nodes_two_workers_and_an_mcp_server_on_pinned_images() -> (
    None
):
    services = compose()["services"]
    assert sorted(services) == [
        "mcp-everything",
        "nats-1",
        "nats-2",
        "nats-3",
        "worker",
    ]
    for name, service in services.items():
        assert PINNED.match(service["image"]), f"{name}: {service['image']}"
    assert services["worker"]["deploy"]["replicas"] == 2
    built = services["worker"]["build"]
    context = (DEPLOY / built["context"]).resolve()
    assert context == REPO
    assert (context / built["dockerfile"]).resolve() == DEPLOY / "Dockerfile"


def test_compose_mounts_files_that_exist_and_parse() -> None:
    services = compose()["services"]
    for node in (1, 2, 3):
        service = services[f"nats-{node}"]
        assert service["command"] == ["-c", f"/etc/nats/nats-{node}.conf"]
        mounts = dict(volume.split(":")[:2] for volume in service["volumes"])
        config_dir = DEPLOY / next(h for h, c in mounts.items() if c == "/etc/nats")
        assert (
            config_dir / f"nats-{node}.conf"
        ).resolve() == NATS / f"nats-{node}.conf"
        assert (
            mounts.get(f"nats-{node}") == "/data"
        )  # the store_dir of server.conf lives there
    worker = services["worker"]
    (mount,) = worker["volumes"]
    host, container, mode = mount.split(":")
    assert container == "/etc/interaction-worker/worker.yaml" and mode == "ro"
    load_config(DEPLOY / host)  # exists and is a valid configuration
    environment = worker["environment"]
    assert environment["INTERACTION_NATS_USER"] == "workers"
    assert re.fullmatch(r"nats://nats-\d:4222", environment["INTERACTION_NATS_URL"])
    assert environment["INTERACTION_NATS_URL"].split("//")[1].split(":")[0] in services


def test_compose_takes_every_password_from_the_environment() -> None:
    services = compose()["services"]
    node_env = services["nats-1"]["environment"]
    tls = {"NATS_WS_CERT", "NATS_WS_KEY"}
    assert sorted(node_env) == sorted([*password_variables(), *tls])
    for service in services.values():
        for name, value in (service.get("environment") or {}).items():
            if name in tls:
                continue  # paths, checked below
            if SECRET_NAME.search(name):
                # Required from the caller's environment: `${VAR:?message}`, never a value.
                assert re.fullmatch(r"\$\{NATS_[A-Z_]+_PASSWORD:\?[^}]+\}", value), name
    # The certificate and key: files of the caller's directory, mounted read-only where the
    # variables point, on every node; nats-1 publishes the WebSocket port beside the client port.
    for node in (1, 2, 3):
        service = services[f"nats-{node}"]
        (tls_mount,) = [v for v in service["volumes"] if v.endswith(":/etc/nats-ws:ro")]
        assert re.fullmatch(r"\$\{NATS_WS_TLS_DIR:\?[^}]+\}:/etc/nats-ws:ro", tls_mount)
        assert service["environment"]["NATS_WS_CERT"] == "/etc/nats-ws/cert.pem"
        assert service["environment"]["NATS_WS_KEY"] == "/etc/nats-ws/key.pem"
    assert "127.0.0.1:8443:8443" in services["nats-1"]["ports"]
    assert services["worker"]["environment"]["INTERACTION_NATS_PASSWORD"].startswith(
        "${NATS_WORKERS_PASSWORD:?"
    )


def test_compose_lets_the_drain_finish_and_points_the_workers_at_its_mcp_server() -> (
    None
):
    services = compose()["services"]
    settings = load_config(DEPLOY / "compose" / "worker.yaml")
    assert seconds(services["worker"]["stop_grace_period"]) > settings.shutdown_grace
    everything = services["mcp-everything"]
    server = settings.mcp.servers["everything"]
    assert (
        server.url == f"http://mcp-everything:{everything['environment']['PORT']}/mcp"
    )
    # The version the test suite runs against its MCP tests.
    pinned = json.loads((REPO / "tests" / "mcp" / "npm" / "package.json").read_text())
    version = pinned["dependencies"]["@modelcontextprotocol/server-everything"]
    assert f"@modelcontextprotocol/server-everything@{version}" in everything["command"]


# --------------------------------------------------------------------------- Kubernetes


def manifests() -> dict[str, dict[str, Any]]:
    """Every manifest of deploy/k8s by kind, the Kustomization included."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(K8S.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            assert document["kind"] not in found, document["kind"]
            found[document["kind"]] = document | {"__file__": path.name}
    return found


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_manifests_validate_against_the_kubernetes_schemas(version: str) -> None:
    found = manifests()
    assert sorted(found) == [
        "ConfigMap",
        "Deployment",
        "Kustomization",
        "PodDisruptionBudget",
        "Secret",
    ]
    for kind, document in found.items():
        if kind == "Kustomization":  # kustomize's own, not a Kubernetes API object
            continue
        resource = {k: v for k, v in document.items() if k != "__file__"}
        # Strict: a misspelt or misplaced field is an error, not ignored.
        kubernetes.validate(resource, version, strict=True)


def test_the_kustomization_applies_every_manifest() -> None:
    found = manifests()
    listed = found["Kustomization"]["resources"]
    assert sorted(listed) == sorted(
        d["__file__"] for k, d in found.items() if k != "Kustomization"
    )


def worker_container() -> dict[str, Any]:
    (container,) = manifests()["Deployment"]["spec"]["template"]["spec"]["containers"]
    return container  # type: ignore[no-any-return]


def test_the_deployment_runs_two_unprivileged_pinned_replicas() -> None:
    deployment = manifests()["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    container = worker_container()
    assert PINNED.match(container["image"]), container["image"]
    security = pod["securityContext"]
    user = [args for k, args in instructions(DEPLOY / "Dockerfile") if k == "USER"][-1]
    assert security["runAsNonRoot"] is True
    assert str(security["runAsUser"]) == user.split(":")[0]  # the image's own user
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_the_probes_ask_the_worker_where_it_serves_them() -> None:
    container = worker_container()
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    listen = load_config(DEPLOY / "worker.yaml").metrics.listen
    assert listen is not None
    assert ports == {"metrics": int(listen.rsplit(":", 1)[1])}
    probes = {
        name: (container[name]["httpGet"]["path"], container[name]["httpGet"]["port"])
        for name in ("readinessProbe", "livenessProbe", "startupProbe")
    }
    assert probes == {
        "readinessProbe": ("/readyz", "metrics"),
        "livenessProbe": ("/healthz", "metrics"),
        "startupProbe": ("/healthz", "metrics"),
    }


def test_the_grace_period_outlasts_the_pre_stop_pause_and_the_drain() -> None:
    pod = manifests()["Deployment"]["spec"]["template"]["spec"]
    command = worker_container()["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep", command
    pause = float(command[1])
    config = yaml.safe_load(manifests()["ConfigMap"]["data"]["worker.yaml"])
    grace = seconds(config["shutdown_grace"])
    # Kubernetes counts the grace period from the preStop hook; SIGTERM comes after it.
    assert pod["terminationGracePeriodSeconds"] > pause + grace


def test_the_config_map_holds_the_worker_configuration_as_committed() -> None:
    found = manifests()
    text = found["ConfigMap"]["data"]["worker.yaml"]
    assert text == (DEPLOY / "worker.yaml").read_text()
    container = worker_container()
    pod = found["Deployment"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    # Mounted where the image reads it (INTERACTION_CONFIG in the Dockerfile).
    config_volume = volumes[mounts["/etc/interaction-worker"]]
    assert config_volume["configMap"]["name"] == found["ConfigMap"]["metadata"]["name"]


def test_the_credentials_come_from_the_secret_which_commits_no_password() -> None:
    found = manifests()
    secret = found["Secret"]
    env = {e["name"]: e for e in worker_container()["env"]}
    for name, key in (
        ("INTERACTION_NATS_USER", "user"),
        ("INTERACTION_NATS_PASSWORD", "password"),
    ):
        reference = env[name]["valueFrom"]["secretKeyRef"]
        assert reference == {"name": secret["metadata"]["name"], "key": key}
    assert secret["stringData"] == {"user": "workers", "password": ""}
    assert "data" not in secret
    # No other variable carries a value that looks like a secret.
    assert not [n for n, e in env.items() if SECRET_NAME.search(n) and "value" in e]


def test_the_disruption_budget_keeps_a_worker_of_the_deployment() -> None:
    found = manifests()
    budget = found["PodDisruptionBudget"]["spec"]
    labels = found["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert budget["selector"]["matchLabels"].items() <= labels.items()
    assert 1 <= budget["minAvailable"] < found["Deployment"]["spec"]["replicas"]


def test_the_readme_shows_deploy_and_links_the_operations_guide() -> None:
    readme = (REPO / "README.md").read_text()
    assert "docs/operations.md" in readme
    layout = readme.split("\n## Layout", 1)[1].split("\n## ", 1)[0]
    assert "deploy/" in layout
