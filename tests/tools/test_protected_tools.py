"""No built-in tool reads the worker's secrets: read_text and the 14 commands, each against every
spelling of a protected path (docs/tools.md), on the real programs."""

import json
import os
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from interaction_worker import Sandbox, ToolRegistry
from interaction_worker.app import build_worker
from interaction_worker.config import parse_settings
from interaction_worker.errors import InvalidInput, PermissionDenied
from interaction_worker.tools import (
    READ_ONLY_COMMANDS,
    ReadTextTool,
    SubprocessExecutor,
    read_only_command_tools,
)

SECRET = "s3cr3t-token-value"
DENIED = "Permission denied: protected path"
TOOLS = ("read_text", *READ_ONLY_COMMANDS)
PATH_TOOLS = tuple(name for name in TOOLS if name != "pwd")


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A workspace holding the data directory `.interaction` (a token and the server's configuration)
    and a TLS key kept outside; each reached inside under other names. Returns (workspace, key)."""
    base = tmp_path_factory.mktemp("protected")
    workspace = base / "ws"
    data = workspace / ".interaction"
    data.mkdir(parents=True)
    (data / "token").write_text(f"{SECRET}\n", encoding="utf-8")
    (data / "nats-server.conf").write_text(f"token: {SECRET}\n", encoding="utf-8")
    key = base / "keys" / "tls.key"
    key.parent.mkdir()
    key.write_text(f"-----BEGIN PRIVATE KEY-----\n{SECRET}\n", encoding="utf-8")
    (workspace / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    docs = workspace / "docs"
    docs.mkdir()
    (docs / "readme.md").write_text("# readme\n", encoding="utf-8")
    os.link(data / "token", docs / "copy.txt")
    os.link(data / "nats-server.conf", docs / "conf.txt")
    os.link(key, docs / "key.pem")
    (workspace / "data").symlink_to(".interaction")
    (workspace / "token-link").symlink_to(".interaction/token")
    odd = workspace / "odd*[1]"
    odd.mkdir()
    os.link(data / "token", odd / "x?y")
    return workspace, key


def sandbox(workspace: Path, key: Path) -> Sandbox:
    box = Sandbox(
        tools=["*"],
        read=True,
        execute=True,
        workspace=workspace,
        executor=SubprocessExecutor(timeout=10),
    )
    box.protected.add(workspace / ".interaction")
    box.protected.add(key)
    return box


REGISTRY = ToolRegistry([ReadTextTool(), *read_only_command_tools()])


def arguments(tool: str, path: str) -> dict[str, Any]:
    if tool == "grep":
        return {"pattern": SECRET[:6], "paths": [path], "recursive": True}
    if tool == "cut":
        return {"path": path, "fields": "1"}
    return {} if tool == "pwd" else {"path": path}


async def call(box: Sandbox, tool: str, args: dict[str, Any]) -> Any:
    return await REGISTRY.call({"id": "c", "name": tool, "arguments": args}, box)


# What each spelling names; every one is refused before anything runs.
NAMED = [
    pytest.param(".interaction/token", PermissionDenied, id="relative"),
    pytest.param(".interaction", PermissionDenied, id="relative-directory"),
    pytest.param("./.interaction/nats-server.conf", PermissionDenied, id="dot-slash"),
    pytest.param("docs/../.interaction/token", InvalidInput, id="dotdot"),
    pytest.param("{workspace}/.interaction/token", InvalidInput, id="absolute"),
    pytest.param("token-link", PermissionDenied, id="symlink-to-the-file"),
    pytest.param("data", PermissionDenied, id="symlink-to-the-directory"),
    pytest.param("data/token", PermissionDenied, id="through-a-directory-symlink"),
    pytest.param("docs/copy.txt", PermissionDenied, id="hard-link-to-the-token"),
    pytest.param("docs/conf.txt", PermissionDenied, id="hard-link-into-the-directory"),
    pytest.param("docs/key.pem", PermissionDenied, id="hard-link-to-a-key-outside"),
    pytest.param(".interaction/*", PermissionDenied, id="glob-below"),
]


@pytest.mark.parametrize(("spelling", "refusal"), NAMED)
async def test_every_spelling_of_a_protected_path_is_refused_by_every_tool(
    secrets: tuple[Path, Path], spelling: str, refusal: type[Exception]
) -> None:
    workspace, key = secrets
    path = spelling.format(workspace=workspace)
    box = sandbox(workspace, key)
    wrong: dict[str, object] = {}
    for tool in (
        PATH_TOOLS
    ):  # one test per spelling, the 14 tools in it: a list of those that fail
        try:
            wrong[tool] = await call(box, tool, arguments(tool, path))
        except refusal as refused:
            if refusal is PermissionDenied and refused.args != (DENIED,):
                wrong[tool] = refused
        except Exception as error:
            wrong[tool] = error
    assert wrong == {}


# Paths that name no protected entry, yet lead a tool near them or below them.
NEAR = [
    pytest.param(".", id="descent-from-the-workspace"),
    pytest.param("docs", id="descent-into-hard-links"),
    pytest.param("odd*[1]", id="glob-characters-in-names"),
    pytest.param(".interact*", id="glob-is-a-name"),
]


@pytest.mark.parametrize("path", NEAR)
async def test_what_a_tool_may_read_near_the_secrets_shows_none_of_them(
    secrets: tuple[Path, Path], path: str
) -> None:
    workspace, key = secrets
    box = sandbox(workspace, key)
    shown: dict[str, str] = {}
    for tool in TOOLS:
        result = await call(box, tool, arguments(tool, path))
        wire = json.dumps(result.to_wire())
        output = result.content if isinstance(result.content, str) else ""
        names = (".interaction", "copy.txt", "conf.txt", "key.pem", "x?y")
        if SECRET in wire or any(name in output for name in names):
            shown[tool] = wire
    assert shown == {}


async def test_the_descending_commands_still_show_everything_else(
    secrets: tuple[Path, Path],
) -> None:
    workspace, key = secrets
    box = sandbox(workspace, key)
    find = await call(box, "find", {"path": ".", "type": "file"})
    assert sorted(find.content.splitlines()) == ["./docs/readme.md", "./notes.txt"]
    grep = await call(box, "grep", {"pattern": "a", "paths": ["."], "recursive": True})
    assert sorted(grep.content.splitlines()) == [
        "./docs/readme.md:1:# readme",
        "./notes.txt:1:alpha",
        "./notes.txt:2:beta",
    ]
    listing = await call(box, "ls", {"all": True})
    assert listing.content.splitlines() == [
        ".",
        "..",
        "data",
        "docs",
        "notes.txt",
        "odd*[1]",
        "token-link",
    ]
    du = await call(box, "du", {"path": ".", "maxDepth": 1})
    assert sorted(line.split("\t")[1] for line in du.content.splitlines()) == [
        ".",
        "./docs",
        "./odd*[1]",
    ]
    # The arguments say what was skipped: grep by name, find and du by path.
    assert "--exclude-dir=.interaction" in grep.structured_content["args"]
    assert "./odd\\*\\[1\\]/x\\?y" in find.structured_content["args"]


async def test_a_workspace_without_protected_entries_runs_the_commands_as_built(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text("x\n", encoding="utf-8")
    box = Sandbox(
        tools=["*"], execute=True, workspace=tmp_path, executor=SubprocessExecutor()
    )
    box.protected.add(tmp_path.parent / f"{tmp_path.name}-data")
    find = await call(box, "find", {})
    assert find.structured_content["args"] == [".", "-maxdepth", "8", "-print"]
    grep = await call(box, "grep", {"pattern": "x", "paths": ["."], "recursive": True})
    assert grep.structured_content["args"] == ["-n", "-r", "--", "x", "."]


async def test_the_default_worker_never_reads_its_token(tmp_path: Path) -> None:
    """The defaults: the data directory `.interaction` inside the workspace, a creds file and a TLS
    key from the environment."""
    data = tmp_path / ".interaction"
    data.mkdir()
    (data / "token").write_text(f"{SECRET}\n", encoding="utf-8")
    for name in ("console-token", "gateway-token", "ui-token"):
        (data / name).write_text(f"{SECRET}\n", encoding="utf-8")
    (tmp_path / "user.creds").write_text(f"{SECRET}\n", encoding="utf-8")
    (tmp_path / "tls.key").write_text(f"{SECRET}\n", encoding="utf-8")
    env = {
        "INTERACTION_NATS_CREDS": str(tmp_path / "user.creds"),
        "INTERACTION_NATS_TLS_KEY": str(tmp_path / "tls.key"),
    }
    worker = build_worker(parse_settings({}, base_dir=tmp_path), env=env)
    for tool, args in [
        ("read_text", {"path": ".interaction/token"}),
        ("cat", {"path": ".interaction/console-token"}),
        ("tail", {"path": ".interaction/gateway-token"}),
        ("read_text", {"path": ".interaction/ui-token"}),
        ("cat", {"path": "user.creds"}),
        ("head", {"path": "tls.key"}),
    ]:
        with pytest.raises(PermissionDenied):
            await worker.call_tool(
                {"call": {"id": "c", "name": tool, "arguments": args}}
            )
    grep = await worker.call_tool(
        {
            "call": {
                "id": "g",
                "name": "grep",
                "arguments": {"pattern": SECRET, "paths": ["."], "recursive": True},
            }
        }
    )
    assert (grep.status, grep.content) == ("failed", "")  # grep found nothing


def test_a_workspace_inside_the_data_directory_is_refused_at_start(
    tmp_path: Path,
) -> None:
    (tmp_path / "data" / "ws").mkdir(parents=True)
    settings = parse_settings(
        {"data_dir": "data", "workspace": "data/ws"}, base_dir=tmp_path
    )
    with pytest.raises(Exception, match="^workspace must not be inside data_dir"):
        build_worker(settings)
    same = parse_settings({"data_dir": "data", "workspace": "data"}, base_dir=tmp_path)
    with pytest.raises(Exception, match="^workspace must not be inside data_dir"):
        build_worker(same)


async def test_the_environment_of_the_worker_is_no_file_a_tool_reads(
    tmp_path: Path,
) -> None:
    """With the whole machine as its workspace, `/proc/PID/environ` would hand out the credentials
    the worker and its children were started with."""
    settings = parse_settings({"workspace": "/"}, base_dir=tmp_path)
    worker = build_worker(settings, env={})
    for tool, path in [
        ("read_text", "proc/self/environ"),
        ("cat", f"proc/{os.getpid()}/environ"),
        ("ls", "proc"),
    ]:
        with pytest.raises(PermissionDenied):
            await worker.call_tool(
                {"call": {"id": "c", "name": tool, "arguments": {"path": path}}}
            )


async def test_no_tool_reads_an_mcp_servers_tokens_or_private_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token directory outside the data directory (`data_dir` elsewhere) and a key file in the
    workspace: both are the worker's secrets as soon as a server's `auth:` names them."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    (tmp_path / "signing.pem").write_bytes(pem)
    servers = {
        "billing": {
            "transport": "http",
            "url": "https://billing.example.test/mcp",
            "auth": {
                "type": "client_credentials",
                "client_id_env": "BILLING_ID",
                "private_key_file": "signing.pem",
                "issuer": "https://billing.example.test",
            },
            "required": False,
        }
    }
    monkeypatch.setenv("BILLING_ID", "id")
    settings = parse_settings({"mcp": {"servers": servers}}, base_dir=tmp_path)
    worker = build_worker(settings, env={"BILLING_ID": "id"})
    for tool, args in [
        ("read_text", {"path": "signing.pem"}),
        ("cat", {"path": "./signing.pem"}),
    ]:
        with pytest.raises(PermissionDenied):
            await worker.call_tool(
                {"call": {"id": "k", "name": tool, "arguments": args}}
            )
