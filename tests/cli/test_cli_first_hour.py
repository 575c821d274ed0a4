"""What a new user meets in the first hour: commands found from any directory, tools that describe
themselves, pipes, schema output, and every command's failures as one line without a traceback.

Behaviour that belongs to the process (pipes, exit codes, finding files from a directory) runs the
CLI in subprocesses; help texts and usage errors call `main(argv)` in-process.
"""

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_reference import commands, render
from test_cli import (
    REPO,
    Run,
    child_env,
    cli_command,
    project_dir,
    start_run,
    without_info,
)

from interaction_worker import config
from interaction_worker.cli import main
from interaction_worker.cli import output as cli_output
from interaction_worker.client import find_project, resolve_target

BROKEN_PIPE = 141
PREFIX = "hour"


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """A project whose worker.yaml sets a prefix; `run` serves it with the default data directory."""
    root = project_dir(tmp_path_factory.mktemp("project"))
    (root / "worker.yaml").write_text(
        f"subjects:\n  prefix: {PREFIX}\n", encoding="utf-8"
    )
    (root / "src" / "deep").mkdir(parents=True)
    run = start_run(root, data_dir=root / ".interaction")
    try:
        yield run
    finally:
        run.stop()


@dataclass
class Outcome:
    code: int
    out: str
    err: str


def run_cli(
    args: list[str],
    cwd: Path,
    *,
    broken_pipe: bool = False,
    env: Mapping[str, str] | None = None,
    search: bool = False,
) -> Outcome:
    """One command in a subprocess; with `broken_pipe`, its stdout's reader is gone before it starts.

    It reads `cwd`'s worker.yaml (`child_env`), or with `search`, the one it finds upwards."""
    reader, writer = os.pipe()
    if broken_pipe:
        os.close(reader)
    try:
        proc = subprocess.run(
            [*cli_command(), *args],
            cwd=cwd,
            env=child_env(env, cwd=None if search else cwd),
            stdin=subprocess.DEVNULL,
            stdout=writer if broken_pipe else subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(writer)
        if not broken_pipe:
            os.close(reader)
    return Outcome(proc.returncode, proc.stdout or "", proc.stderr)


def in_process(
    argv: list[str], capsys: pytest.CaptureFixture[str], cwd: Path | None = None
) -> Outcome:
    """`main(argv)` in `cwd` (else here). A command that reads a configuration reads that
    directory's worker.yaml, never one found upwards (`child_env`), and fails without it."""
    previous = Path.cwd()
    os.chdir(cwd or previous)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("INTERACTION_CONFIG", str(Path.cwd() / "worker.yaml"))
            try:
                code = main(argv)
            except SystemExit as exit:  # argparse's own usage errors and --help
                code = int(exit.code or 0)
    finally:
        os.chdir(previous)
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err)


# --- found from anywhere -------------------------------------------------------------------------


def test_a_client_in_a_subdirectory_finds_the_projects_file_and_server(
    project: Run,
) -> None:
    done = run_cli(["call", "pwd"], project.cwd / "src" / "deep", search=True)

    assert done.code == 0, done.err
    result, observation = (json.loads(line) for line in done.out.splitlines())
    assert result["status"] == "success"
    assert observation["source"] == "pwd"


def test_the_nearest_file_and_data_directory_win(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    inner = outer / "inner" / "deeper"
    inner.mkdir(parents=True)
    (outer / ".interaction").mkdir(mode=0o700)
    # The search stops at tmp_path, as at a home directory: nothing above it can be found.
    bounds = config.SearchBounds(os.geteuid(), tmp_path)
    found = find_project(None, env={}, cwd=inner, bounds=bounds)
    assert found.data_dir == outer / ".interaction"

    (outer / "inner" / "worker.yaml").write_text(
        "data_dir: state\nsubjects:\n  prefix: inner\n", encoding="utf-8"
    )
    found = find_project(None, env={}, cwd=inner, bounds=bounds)
    assert found.settings.subjects.prefix == "inner"
    assert found.data_dir == outer / "inner" / "state"

    named = find_project(
        None, env={}, cwd=inner, data_dir=Path("elsewhere"), bounds=bounds
    )
    assert named.data_dir == inner / "elsewhere"
    (tmp_path / "other.yaml").write_text("subjects:\n  prefix: other\n")
    by_env = find_project(
        None, env={"INTERACTION_CONFIG": "../../../other.yaml"}, cwd=inner
    )
    assert by_env.settings.subjects.prefix == "other"


def test_the_embedded_servers_token_goes_only_to_the_server_it_belongs_to(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / ".interaction"
    data_dir.mkdir(mode=0o700)
    (data_dir / "url").write_text("nats://127.0.0.1:4321\n")
    (data_dir / "token").write_text("t" * 24 + "\n")
    project = find_project(
        None, env={}, cwd=tmp_path, bounds=config.SearchBounds(os.geteuid(), tmp_path)
    )

    default = resolve_target(project, {})
    named = resolve_target(project, {}, nats_url="nats://localhost:4321")
    other = resolve_target(project, {}, nats_url="nats://127.0.0.1:4322")
    by_env = resolve_target(
        project, {"INTERACTION_NATS_TOKEN": "mine"}, nats_url="nats://127.0.0.1:4321"
    )

    # The server knows a `worker` user whose password is the token (docs/configuration.md 3).
    assert (default.url, default.options) == (
        "nats://127.0.0.1:4321",
        {"user": "worker", "password": "t" * 24},
    )
    assert named.options == {"user": "worker", "password": "t" * 24}
    assert other.options == {}
    assert "records another server" in other.credentials
    assert by_env.options == {"token": "mine"}
    assert by_env.credentials == "credentials from INTERACTION_NATS_TOKEN"


def test_a_connection_failure_is_one_line_saying_what_was_tried(
    tmp_path: Path,
) -> None:
    url = f"nats://127.0.0.1:{closed_port()}"

    done = run_cli(["call", "pwd", "--nats-url", url], tmp_path)

    assert done.code == 1
    (line,) = done.err.splitlines()
    assert line.startswith(f"interaction-worker: cannot connect to NATS at {url} ")
    for hint in (
        "connection refused",
        "--nats-url",
        "no token",
        "--data-dir",
        "INTERACTION_NATS_URL",
    ):
        assert hint in line


def test_the_ui_example_finds_the_embedded_servers_token(project: Run) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "ui_fanout.py"), "--nats-url", project.url, "--count", "1"],
        cwd=project.cwd / "src",
        env=child_env(cwd=project.cwd),
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


# --- tools that describe themselves ----------------------------------------------------------------


def test_tools_lists_json_lines_when_piped_and_a_table_on_a_terminal(
    project: Run, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    piped = in_process(["tools"], capsys, cwd=project.cwd)
    monkeypatch.setattr(cli_output, "is_terminal", lambda: True)
    monkeypatch.setattr("interaction_worker.cli.requests.is_terminal", lambda: True)
    shown = in_process(["tools"], capsys, cwd=project.cwd)
    one = in_process(["tools", "grep"], capsys, cwd=project.cwd)

    assert piped.code == shown.code == one.code == 0
    definitions = [json.loads(line) for line in piped.out.splitlines()]
    names = [d["name"] for d in definitions]
    assert names[:2] == ["read_text", "grep"] and "pwd" in names
    assert all("inputSchema" in d and d.get("description") for d in definitions)
    header, *rows = shown.out.splitlines()
    assert header.split() == ["TOOL", "EFFECTS", "DESCRIPTION"]
    assert [row.split()[0] for row in rows if not row.startswith(" ")] == names
    assert one.out.startswith("usage: interaction-worker call grep ")


def test_call_tool_help_shows_the_tools_arguments(
    project: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    described = in_process(["call", "grep", "--help"], capsys, cwd=project.cwd)
    plain = in_process(["call", "--help"], capsys, cwd=project.cwd)
    unknown = in_process(["call", "nope", "--help"], capsys, cwd=project.cwd)

    assert described.code == 0
    for text in (
        "Search text in workspace files",
        "pattern",
        "paths",
        "required",
        "recursive",
        "default false",
    ):
        assert text in described.out  # fmt: skip
    assert plain.code == 0 and plain.out.startswith("usage: interaction-worker call")
    assert unknown.code == 2
    assert (
        unknown.err
        == "interaction-worker: nope: PERMISSION_DENIED: Permission denied: tools:nope\n"
    )


def test_an_unexpected_argument_is_named(
    project: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    done = in_process(
        ["call", "grep", "pattern=TODO", "path=."], capsys, cwd=project.cwd
    )

    assert done.code == 1
    assert json.loads(done.out) == {
        "error": {
            "code": "INVALID_INPUT",
            "message": "Unexpected command argument: path",
        }
    }


# --- schema, ids ---------------------------------------------------------------------------------


def test_schema_prints_one_document_and_writes_nothing_without_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = in_process(["schema"], capsys, cwd=tmp_path)

    assert done.code == 0
    documents = json.loads(done.out)
    assert {"ToolCallRequest", "ToolList", "ExternalResult", "asyncapi"} <= set(
        documents
    )
    assert documents["asyncapi"]["asyncapi"].startswith("3.")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["existing-file", "unwritable"])
def test_schema_out_that_cannot_be_written_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    target = tmp_path / "taken"
    target.write_text("not a directory")
    out = target if where == "existing-file" else target / "below"

    done = in_process(["schema", "--out", str(out)], capsys)

    assert done.code == 2
    (line,) = done.err.splitlines()
    assert line.startswith(f"interaction-worker: --out {out}: cannot write there")


@pytest.mark.parametrize(
    "argv",
    [
        ["deliver", "--id", "", "--text", "x"],
        ["call", "pwd", "--id", ""],
        ["mcp", "invoke", "s", "t", "--id", ""],
    ],
)
def test_an_explicit_empty_id_is_bad_usage(
    argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    done = in_process(argv, capsys, cwd=tmp_path)

    assert done.code == 2
    assert (
        done.err
        == "interaction-worker: --id must not be empty (leave it out for a fresh UUID)\n"
    )


# --- the docs say what --help says ----------------------------------------------------------------


def test_docs_list_every_command_with_the_options_its_help_shows() -> None:
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")

    assert text.split("## Commands\n\n", 1)[1] == render()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "docs/cli.md" in readme and "docs/tools.md" in readme


# --- every command: a broken pipe, a bad path, no server ------------------------------------------


def failure_cases(project: Run, scratch: Path) -> dict[str, dict[str, list[str]]]:
    """For each command: arguments run with stdout's reader gone, with a path that does not work,
    and with no server to talk to (None where a command needs none)."""
    served = ["--data-dir", str(project.data_dir), "--prefix", PREFIX]
    nowhere = ["--nats-url", f"nats://127.0.0.1:{closed_port()}"]
    missing = ["--config", str(scratch / "missing" / "worker.yaml")]
    client = {
        "call": ["call", "pwd"],
        "tools": ["tools"],
        "mcp discover": ["mcp", "discover"],
        "mcp invoke": ["mcp", "invoke", "files", "read"],
        "deliver": ["deliver", "--text", "hello"],
    }
    cases = {
        words: {
            "pipe": [*argv, *served],
            "path": [*argv, *missing],
            "server": [*argv, *nowhere],
        }
        for words, argv in client.items()
    }
    cases["run"] = {
        "pipe": ["run", "--port", "0", "--data-dir", str(scratch / "data")],
        "path": ["run", *missing],
        "server": ["run", *nowhere],
    }
    cases["schema"] = {
        "pipe": ["schema"],
        "path": ["schema", "--out", str(project.cwd / "README.md")],
        "server": ["schema", "--out", str(scratch / "schemas")],
    }
    cases["check-config"] = {
        "pipe": ["check-config", str(project.cwd / "worker.yaml")],
        "path": ["check-config", str(scratch / "missing.yaml")],
        "server": ["check-config", str(project.cwd / "worker.yaml")],
    }
    # A recorded `pwd` whose recorded result differs from any real one: a difference line on stdout.
    recording = scratch / "replay.jsonl"
    recording.write_text(
        '{"format": "interaction-recording", "version": 1, "prefix": "hour"}\n'
        '{"seq": 1, "subject": "hour.tool.call", "body": "{\\"call\\": {\\"id\\": \\"r-1\\", \\"name\\": \\"pwd\\", \\"arguments\\": {}}}"}\n'
        '{"seq": 2, "subject": "hour.tool.result.r-1", "body": "{\\"callId\\": \\"r-1\\", \\"status\\": \\"failed\\"}"}\n',
        encoding="utf-8",
    )
    cases["replay"] = {
        "pipe": ["replay", str(recording), "--requests", "--compare", *served],
        "path": ["replay", str(scratch / "missing.jsonl")],
        "server": ["replay", str(recording), *nowhere],
    }
    # The project's worker is served from its file, which binds no command protocol (handlers are
    # code): nothing to print, so no broken pipe here; tests/bus/test_bus_commands_served.py ends
    # a `command` on one against a worker that has commands.
    cases["command"] = {
        "path": ["command", "--catalog", *missing],
        "server": ["command", '{"type": "reply"}', *nowhere],
    }
    # A model server that is not there: the flow ends with MODEL_ERROR, and its result is printed.
    model = ["--model", "m", "--model-url", f"http://127.0.0.1:{closed_port()}/v1"]
    cases["react"] = {
        "pipe": ["react", "question", *model, "--action", "pwd", *served],
        "path": ["react", "question", *model, *missing],
        "server": ["react", "question", *model, *nowhere],
    }
    # The console waits for its server (the page shows it disconnected) instead of ending.
    cases["console"] = {
        "pipe": ["console", "--listen", "127.0.0.1:0", *served],
        "path": ["console", *missing],
    }
    # The sign-in commands print on stderr (status: nothing, with no server behind OAuth here).
    cases["mcp login"] = {"path": ["mcp", "login", "docs", *missing]}
    cases["mcp logout"] = {"path": ["mcp", "logout", "docs", *missing]}
    cases["mcp status"] = {"path": ["mcp", "status", *missing]}
    # The gateway waits for its server too (its tools come when the bus does); over stdio it writes
    # only MCP messages, so its broken pipe is the HTTP address it prints.
    cases["mcp-serve"] = {
        "pipe": ["mcp-serve", "--http", "127.0.0.1:0", *served],
        "path": ["mcp-serve", *missing],
    }
    # record writes nothing on stdout: no broken pipe to end on.
    cases["record"] = {
        "path": ["record", "--out", str(scratch / "missing" / "r.jsonl"), *served],
        "server": ["record", "--out", str(scratch / "unreached.jsonl"), *nowhere],
    }
    return cases  # fmt: skip


def test_every_command_fails_in_one_line_and_ends_quietly_on_a_broken_pipe(
    project: Run, tmp_path: Path
) -> None:
    cases = failure_cases(project, tmp_path)
    assert set(cases) == set(commands()), "a command without failure cases"
    jobs = [
        (words, kind, argv)
        for words, kinds in cases.items()
        for kind, argv in kinds.items()
    ]
    # `run` with no server waits out its 10 s connect timeout: first in, so the rest run meanwhile.
    jobs.sort(key=lambda job: job[:2] != ("run", "server"))

    def one(job: tuple[str, str, list[str]]) -> tuple[str, str, Outcome]:
        words, kind, argv = job
        return words, kind, run_cli(argv, tmp_path, broken_pipe=kind == "pipe")

    with ThreadPoolExecutor(max_workers=6) as pool:
        outcomes = list(pool.map(one, jobs))

    for words, kind, done in outcomes:
        where = f"{words} ({kind}): exit {done.code}, stderr {done.err!r}"
        assert "Traceback" not in done.err, where
        if kind == "pipe":
            assert (done.code, without_info(done.err)) == (BROKEN_PIPE, []), where
            continue
        needs_no_server = kind == "server" and words in ("schema", "check-config")
        if needs_no_server:
            assert (done.code, done.err) == (0, ""), where
            continue
        lines = without_info(done.err)
        assert len(lines) == 1 and lines[0].startswith("interaction-worker: "), where
        assert done.code == (2 if kind == "path" else 1), where


@pytest.mark.parametrize("command", [["call", "pwd"], ["tools"], ["run"]])
@pytest.mark.parametrize("url", ["bad", "localhost:4222", "nats://", "http://h:4222"])
def test_a_nats_url_that_cannot_be_one_is_bad_usage(
    command: list[str], url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    done = in_process([*command, "--nats-url", url], capsys, cwd=tmp_path)

    assert done.code == 2
    (line,) = done.err.splitlines()
    assert line.endswith(
        "argument --nats-url: must be a URL such as nats://127.0.0.1:4222 (see --help)"
    )
