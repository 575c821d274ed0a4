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
import yaml

from interaction_worker.config import Settings, parse_settings
from interaction_worker.embedded import find_nats_server
from interaction_worker.subscribers.durable_streams import DURABLE_KINDS

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"
NATS = DEPLOY / "nats"
USERS = ("clients", "workers", "ui", "operator")
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
    # Replies go to the users' own inboxes (deploy/nats/accounts.conf), and to nothing else.
    assert sorted(settings.subjects.reply_prefixes) == [
        "_INBOX.clients.",
        "_INBOX.operator.",
    ]
    assert settings.nats.inbox_prefix == "_INBOX.clients"


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
    node: int,
) -> None:
    env = {"PATH": os.environ.get("PATH", "")} | password_variables()
    checked = nats_check(NATS / f"nats-{node}.conf", env)
    assert checked.returncode == 0, checked.stderr
    assert re.search(
        rf"^server_name: nats-{node}$", (NATS / f"nats-{node}.conf").read_text(), re.M
    )


def test_a_node_refuses_to_start_without_a_password_variable() -> None:
    for variable in password_variables():
        env = {"PATH": os.environ.get("PATH", "")} | password_variables()
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


def user_block(user: str) -> str:
    """The text of one user's entry in accounts.conf: from its `user:` line to the next one."""
    text = (NATS / "accounts.conf").read_text()
    start = re.search(rf"^\s*user:\s*{user}$", text, re.M)
    assert start is not None, user
    following = re.search(r"^\s*user:\s*\S+$", text[start.end() :], re.M)
    return text[start.end() : start.end() + following.start() if following else None]


def allowed(user: str, direction: str) -> set[str]:
    """The subjects of `direction` (publish or subscribe) `allow: [...]` of one user."""
    block = user_block(user)
    match = re.search(rf"{direction}:\s*\{{\s*allow:\s*\[(.*?)\]", block, re.S)
    if match is None:
        return set()
    lines = (line.split("#", 1)[0].strip().strip('"') for line in match[1].splitlines())
    return {line for line in lines if line}


def test_the_permissions_name_what_the_worker_configuration_names() -> None:
    """Change a prefix, a stream, the bucket or the queue in worker.yaml, and this fails until
    accounts.conf follows."""
    settings = load_config(DEPLOY / "worker.yaml")
    p = settings.subjects.prefix
    requests = {
        f"{p}.{s}" for s in ("tool.call", "mcp.call", "observe", "output.deliver")
    }
    requests |= {f"{p}.{s}" for s in ("tool.list", "command", "command.catalog")}
    events = {
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
    sinks = {
        re.sub(r"\{key\}$", ">", sink.subject)
        for sink in settings.output.sinks
        if sink.type == "nats" and sink.subject is not None
    }
    assert sinks == {"deliveries.>"}
    calls, events_stream = settings.durable.calls_stream, settings.durable.events_stream
    streams = (calls, events_stream, settings.durable.dead_stream)
    bucket = settings.idempotency.bucket
    # Every durable consumer a worker may create: a worker given commands in code has one more.
    consumers = [f"{settings.subjects.queue_group}-{kind}" for kind in DURABLE_KINDS]
    inbox = settings.nats.inbox_prefix

    assert allowed("clients", "publish") == requests
    assert allowed("clients", "subscribe") == events | {f"{inbox}.>"}
    assert allowed("ui", "publish") == set()
    assert allowed("ui", "subscribe") == events
    worker_publish = allowed("workers", "publish")
    assert events | {f"{p}.dead.>"} | sinks <= worker_publish
    for stream in (*streams, f"KV_{bucket}"):
        for action in ("INFO", "CREATE", "UPDATE"):
            assert f"$JS.API.STREAM.{action}.{stream}" in worker_publish
    for consumer in consumers:
        for action in ("INFO", "DURABLE.CREATE", "MSG.NEXT"):
            assert f"$JS.API.CONSUMER.{action}.{calls}.{consumer}" in worker_publish
        assert f"$JS.ACK.{calls}.{consumer}.>" in worker_publish
    assert f"$KV.{bucket}.>" in worker_publish
    # Never delete or purge: nothing in the workers' rights names another JetStream action.
    assert not [
        s for s in worker_publish if re.search(r"DELETE|PURGE|STEPDOWN|REMOVE", s)
    ]
    assert allowed("workers", "subscribe") == requests | {"$SRV.>", "_INBOX.>"}
    denied = re.search(r"deny:\s*\[(.*?)\]", user_block("workers"), re.S)
    assert denied is not None
    assert set(re.findall(r'"([^"]+)"', denied[1])) == {
        "_INBOX.clients.>",
        "_INBOX.operator.>",
    }
    assert allowed("operator", "publish") == {
        f"{p}.tool.call",
        f"{p}.mcp.call",
        f"{p}.output.deliver",
        f"{p}.tool.list",  # the console's form lists the tools
        f"$JS.API.STREAM.INFO.{events_stream}",
        f"$JS.API.CONSUMER.CREATE.{events_stream}",
        f"$JS.FC.{events_stream}.>",
    }
    assert allowed("operator", "subscribe") == events | {
        f"{p}.dead.>",
        "deliveries.>",
        "_INBOX.operator.>",
    }
    # Each reply prefix is exactly a user's inbox: a reply can go nowhere else.
    inboxes = {
        s[: -len(">")]
        for u in USERS
        for s in allowed(u, "subscribe")
        if s.startswith("_INBOX.") and u != "workers"
    }
    assert inboxes == set(settings.subjects.reply_prefixes)


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
    assert sorted(node_env) == sorted(password_variables())
    for service in services.values():
        for name, value in (service.get("environment") or {}).items():
            if SECRET_NAME.search(name):
                # Required from the caller's environment: `${VAR:?message}`, never a value.
                assert re.fullmatch(r"\$\{NATS_[A-Z]+_PASSWORD:\?[^}]+\}", value), name
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
