"""The command line, driven in subprocesses as a person or a script drives it (docs/configuration.md
3, docs/cli.md).

Every `run` serves from a temporary directory on a free port (`--port 0`) with a temporary
`--data-dir`: never port 4222, never the repository's `./.interaction`. Each `run` is stopped
(SIGTERM, then SIGKILL) at teardown, whatever the test's outcome. Starting the CLI costs about a
second of imports, so independent invocations of one test run side by side.
"""

import json
import os
import queue
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
READY_BOUND = (
    60.0  # seconds for `run` to print its ready line (a loaded 2-core CI machine)
)
STOP_BOUND = (
    15.0  # seconds for `run` to exit after SIGTERM (the default shutdown_grace)
)
COMMAND_BOUND = 60.0  # seconds for any one client command
READY_RE = re.compile(r"ready (nats://127\.0\.0\.1:(\d+))")
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

README = "# Demo\n\nA project for the agent example.\n"
PYPROJECT = '[project]\nname = "demo-project"\nversion = "1.0"\n'


def cli_command() -> list[str]:
    """The console script of the current virtualenv, else the module."""
    script = Path(sys.executable).parent / "interaction-worker"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "interaction_worker.cli"]


def child_env(
    extra: Mapping[str, str] | None = None, *, cwd: Path | None = None
) -> dict[str, str]:
    """The test's environment without INTERACTION_* settings, with the repository importable
    (for `run examples.custom_tool:worker` from a temporary directory).

    With `cwd`, `INTERACTION_CONFIG` names its `worker.yaml` (an empty one is made when there is
    none), unless `extra` names another: the command never searches upwards, so a worker.yaml
    left in a parent directory (/tmp) cannot change what the test runs. Only the tests of that
    search leave `cwd` out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERACTION_")}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
    )
    if cwd is not None:
        env["INTERACTION_CONFIG"] = str(own_config(cwd))
    env.update(extra or {})
    return env


def own_config(cwd: Path) -> Path:
    """`cwd/worker.yaml`, made empty (the defaults, relative to `cwd`) when there is none."""
    config = cwd / "worker.yaml"
    if not config.exists():
        config.write_text("", encoding="utf-8")
    return config


def process_with(pid: int, marker: str) -> bool:
    """Whether `pid` is a live process whose command line mentions `marker` (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return marker.encode() in cmdline


def embedded_server_pid(data_dir: Path) -> int | None:
    """The embedded nats-server's pid, from the ports file it writes in the data directory."""
    for ports in data_dir.glob("nats-server_*.ports"):
        return int(ports.stem.rsplit("_", 1)[1])
    return None


# `run`'s log lines at level INFO (the configuration file it reads comes first): not errors.
INFO_LOG = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO ")


def without_info(text: str) -> list[str]:
    """stderr's lines, but the INFO log lines."""
    return [line for line in text.splitlines() if not INFO_LOG.match(line)]


def one_line(text: str) -> str:
    """Rich's panels wrap long lines: the text of stderr with borders and line breaks removed."""
    return " ".join(
        " ".join(line.strip(" │╭╮╰╯─").split()) for line in text.splitlines()
    )


@dataclass
class Done:
    """A finished command: its exit code and output."""

    args: Sequence[str]
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[Any]:
        return [json.loads(line) for line in self.out.splitlines()]

    def error_lines(self) -> list[str]:
        """stderr, checked to be one-line errors without a traceback."""
        assert "Traceback" not in self.err, self.err
        lines = without_info(self.err)
        assert lines, f"{self.args}: nothing on stderr"
        for line in lines:
            assert line.startswith("interaction-worker: "), self.err
        return lines


def spawn(
    args: Sequence[str],
    cwd: Path,
    env: Mapping[str, str] | None = None,
    *,
    search: bool = False,
) -> subprocess.Popen[str]:
    """The command in `cwd`, reading `cwd`'s worker.yaml, or with `search` the one it finds."""
    return subprocess.Popen(
        [*cli_command(), *args],
        cwd=cwd,
        env=child_env(env, cwd=None if search else cwd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> Done:
    try:
        out, err = proc.communicate(timeout=COMMAND_BOUND)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"{proc.args!r} did not finish within {COMMAND_BOUND:g} s: {err}")
    args = proc.args
    assert isinstance(args, list)
    return Done(args, proc.returncode, out, err)


def cli(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None, search: bool = False
) -> Done:
    return finish(spawn(args, cwd, env, search=search))


def cli_all(
    invocations: Sequence[Sequence[str]],
    cwd: Path,
    env: Mapping[str, str] | None = None,
) -> list[Done]:
    """Independent commands side by side (each CLI start costs about a second of imports)."""
    procs = [spawn(args, cwd, env) for args in invocations]
    return [finish(proc) for proc in procs]


@dataclass
class Run:
    """A running `interaction-worker run`: its ready URL, stdout lines and stderr file."""

    proc: subprocess.Popen[str]
    cwd: Path
    data_dir: Path
    stderr_file: Path
    url: str = ""
    stdout: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None
    server_pid: int | None = None

    def stderr(self) -> str:
        return self.stderr_file.read_text(encoding="utf-8", errors="replace")

    def wait_stderr(self, *texts: str, bound: float = 10.0) -> str:
        """Wait until every text is in stderr (panels unwrapped); return it."""
        deadline = time.monotonic() + bound
        while True:
            seen = one_line(self.stderr())
            if all(text in seen for text in texts):
                return seen
            if time.monotonic() > deadline:
                pytest.fail(f"{texts} not on run's stderr within {bound:g} s: {seen}")
            time.sleep(0.05)

    def client(self, *args: str) -> list[str]:
        """A client command's arguments, finding this server through `--data-dir`."""
        return [*args, "--data-dir", str(self.data_dir)]

    def stop(self, signum: int = signal.SIGTERM, bound: float = STOP_BOUND) -> int:
        """Signal, then SIGKILL after `bound`; the exit code. An orphaned server is killed too."""
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
            try:
                self.proc.wait(timeout=bound)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.server_pid is not None and process_with(
            self.server_pid, str(self.data_dir)
        ):
            os.kill(
                self.server_pid, signal.SIGKILL
            )  # the child of our run, left behind
        if self.reader is not None:
            self.reader.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode


def start_run(
    cwd: Path,
    *args: str,
    data_dir: Path,
    env: Mapping[str, str] | None = None,
    port: bool = True,
    search: bool = False,
) -> Run:
    """Start `run ARGS --data-dir DATA_DIR [--port 0]` in `cwd`; wait for `ready <url>`.

    With `search`, `run` finds its configuration and data directory itself, as a person's does
    (no INTERACTION_CONFIG, no --data-dir): `data_dir` is where the test expects it then."""
    stderr_file = cwd / f"run-{uuid.uuid4().hex[:8]}.stderr"
    argv = ["run", *args] + ([] if search else ["--data-dir", str(data_dir)])
    if port:
        argv += ["--port", "0"]
    with stderr_file.open("w") as stderr:
        proc = subprocess.Popen(
            [*cli_command(), *argv],
            cwd=cwd,
            env=child_env(env, cwd=None if search else cwd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    run = Run(proc, cwd, data_dir, stderr_file)
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            run.stdout.append(line.rstrip("\n"))
            lines.put(line)
        lines.put(None)

    run.reader = threading.Thread(target=read, daemon=True)
    run.reader.start()
    try:
        try:
            first = lines.get(timeout=READY_BOUND)
        except queue.Empty:
            pytest.fail(f"run printed nothing within {READY_BOUND:g} s: {run.stderr()}")
        if first is None:
            pytest.fail(f"run exited with {proc.wait()} before ready: {run.stderr()}")
        match = READY_RE.fullmatch(first.rstrip("\n"))
        if match is None and port:
            pytest.fail(f"unexpected first line {first!r}")
        run.url = match.group(1) if match else first.rstrip("\n").removeprefix("ready ")
        run.server_pid = embedded_server_pid(data_dir)
    except BaseException:
        run.stop()
        raise
    return run


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def project_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "README.md").write_text(README, encoding="utf-8")
    (path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """The default worker (read_text, the console sink) over a directory holding a small project."""
    cwd = project_dir(tmp_path_factory.mktemp("served"))
    run = start_run(cwd, data_dir=cwd / "data")
    try:
        yield run
    finally:
        run.stop()


@pytest.fixture(scope="module")
def custom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """`examples.custom_tool:worker`: the echo and sleep tools, built in code."""
    cwd = tmp_path_factory.mktemp("custom")
    run = start_run(cwd, "examples.custom_tool:worker", data_dir=cwd / "data")
    try:
        yield run
    finally:
        run.stop()


# --- run: the ready line, the embedded server's files, a clean stop ---------------------------


def test_run_prints_only_its_ready_line_and_stops_on_sigterm(tmp_path: Path) -> None:
    cwd = project_dir(tmp_path / "project")
    data_dir = tmp_path / "data"
    run = start_run(cwd, data_dir=data_dir)
    try:
        assert READY_RE.fullmatch(run.stdout[0])
        assert run.url != "nats://127.0.0.1:4222"
        # The token and URL files are private; every client in this module finds its server
        # through them, with --data-dir.
        assert mode(data_dir) == 0o700
        assert mode(data_dir / "token") == 0o600
        assert mode(data_dir / "url") == 0o600
        assert (data_dir / "url").read_text().strip() == run.url
        token = (data_dir / "token").read_text().strip()
        assert run.server_pid is not None
        cmdline = Path(f"/proc/{run.server_pid}/cmdline").read_bytes()
        assert token.encode() not in cmdline  # the token never on a command line
    finally:
        code = run.stop()
    assert code == 0, run.stderr()
    assert run.stdout == [f"ready {run.url}"]
    assert not (data_dir / "url").exists()  # no client dials a stopped server
    assert not process_with(run.server_pid, str(data_dir))


def test_run_that_cannot_start_exits_with_one_line(tmp_path: Path) -> None:
    """Exit code 2 for a bad configuration or APP, refused before anything starts; 1 for a port
    in use. (An unreachable NATS URL: `test_run_gives_up_on_an_unreachable_nats_url`.)"""
    bad_value = tmp_path / "bad-value"
    bad_value.mkdir()
    (bad_value / "worker.yaml").write_text("max_pending: 0\n")
    not_built = tmp_path / "not-built"
    not_built.mkdir()
    # Valid for the parser, refused when the sink is built: a name that goes into a header.
    (not_built / "worker.yaml").write_text(
        'output:\n  sinks: [{type: nats, name: "ui\\tone", subject: ui}]\n'
    )
    no_app = tmp_path / "no-app"
    no_app.mkdir()
    # The workspace inside the data directory (`--data-dir data`), where the tokens are.
    inside = tmp_path / "inside"
    (inside / "data" / "ws").mkdir(parents=True)
    (inside / "worker.yaml").write_text("workspace: data/ws\n")
    # Not an INTERNAL reply to the first call: refused at start, naming the key.
    no_workspace = tmp_path / "no-workspace"
    no_workspace.mkdir()
    (no_workspace / "worker.yaml").write_text("workspace: missing\n")
    refused = [
        (bad_value, []),
        (not_built, []),
        (no_app, ["no_such_module:worker"]),
        (inside, []),
        (no_workspace, []),
    ]
    procs = [
        spawn(["run", *app, "--port", "0", "--data-dir", str(cwd / "data")], cwd)
        for cwd, app in refused
    ]
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        in_use = cli(
            "run", "--port", str(port), "--data-dir", str(tmp_path / "d"), cwd=tmp_path
        )
    results = [finish(proc) for proc in procs]

    for done, (cwd, _app) in zip(results, refused, strict=True):
        assert done.code == 2, done.err
        assert done.out == ""
        assert len(done.error_lines()) == 1
        # Refused before anything started.
        assert not (cwd / "data").exists() or os.listdir(cwd / "data") == ["ws"]
    value_error, build_error, import_error, inside_error, workspace_error = results
    assert value_error.error_lines() == [
        "interaction-worker: max_pending must be a positive integer"
    ]
    assert "output.sinks[0]" in build_error.err
    assert "no_such_module" in import_error.err
    assert inside_error.error_lines() == [
        "interaction-worker: workspace must not be inside data_dir or another directory "
        "the worker keeps its secrets in: no tool may read them"
    ]
    assert workspace_error.error_lines() == [
        "interaction-worker: workspace must be an existing directory: nothing is there"
    ]

    assert in_use.code == 1
    assert in_use.out == ""
    assert in_use.error_lines() == [f"interaction-worker: port {port} is in use"]


# --- call ----------------------------------------------------------------------------------


def test_call_prints_the_result_then_the_observation(served: Run) -> None:
    call_id = "call 1.é"  # the observation subject is found through its escaped key
    with_id = cli(
        *served.client("call", "read_text", "path=README.md", "--id", call_id),
        cwd=served.cwd,
    )
    assert with_id.code == 0, with_id.err
    assert with_id.err == ""
    result, observation = with_id.lines
    assert result == {
        "callId": call_id,
        "source": "read_text",
        "status": "success",
        "content": README,
    }
    assert observation["callId"] == call_id
    assert observation["status"] == "success"
    assert observation["message"] == {
        "role": "tool",
        "name": "read_text",
        "content": README,
    }


def test_failed_calls_exit_1(served: Run) -> None:
    unknown, escaping, missing = cli_all(
        [
            served.client("call", "no_such_tool"),
            served.client("call", "read_text", "path=../x"),
            served.client("call", "read_text", "path=missing.txt"),
        ],
        cwd=served.cwd,
    )
    # An error reply: one line, no events. The default sandbox grants only its tools.
    assert unknown.code == 1
    assert unknown.lines == [
        {
            "error": {
                "code": "PERMISSION_DENIED",
                "message": "Permission denied: tools:no_such_tool",
            }
        }
    ]
    assert escaping.code == 1
    [reply] = escaping.lines
    assert reply["error"]["code"] == "INVALID_INPUT"
    # A business failure: an ordinary result and its observation.
    assert missing.code == 1
    result, observation = missing.lines
    assert result["status"] == "failed"
    assert result["error"]["code"] == "FILE_NOT_FOUND"
    assert UUID_RE.fullmatch(result["callId"])  # no --id: a fresh UUID
    assert observation["status"] == "failed"
    assert observation["callId"] == result["callId"]


def test_arguments_arrive_as_strings_or_json(custom: Run) -> None:
    echo, string_seconds, interleaved = cli_all(
        [
            custom.client(
                "call",
                "echo",
                "s=text",
                "n:=5",
                "five=5",
                "l:=[1,2]",
                'o:={"a":null}',
                "t:=true",
                "empty=",
                "eq=a=b",
                "url=http://h/?q:=1",
            ),
            custom.client("call", "sleep", "seconds=1"),
            # Options between the arguments, as people type them.
            ["call", "echo", "a=1", "--data-dir", str(custom.data_dir), "b:=2", "c=3"],
        ],
        cwd=custom.cwd,
    )
    assert echo.code == 0, echo.err
    result, _observation = echo.lines
    assert result["structuredContent"]["arguments"] == {
        "s": "text",
        "n": 5,
        "five": "5",
        "l": [1, 2],
        "o": {"a": None},
        "t": True,
        "empty": "",
        "eq": "a=b",
        "url": "http://h/?q:=1",
    }
    assert result["structuredContent"]["types"]["five"] == "string"
    # `seconds=1` is the string "1": the tool's validate refuses it, and its message is the error.
    assert interleaved.code == 0, interleaved.err
    assert interleaved.lines[0]["structuredContent"]["arguments"] == {
        "a": "1",
        "b": 2,
        "c": "3",
    }
    assert string_seconds.code == 1
    assert string_seconds.lines == [
        {
            "error": {
                "code": "INVALID_INPUT",
                "message": "seconds must be a number from 0 to 60",
            }
        }
    ]


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    results = cli_all(
        [
            ["call"],
            ["call", "read_text", "k:=notjson"],
            ["deliver"],
            ["deliver", "--content", "not json"],
        ],
        cwd=tmp_path,
    )
    for done in results:
        assert done.code == 2, (done.args, done.err)
        assert done.out == ""
        assert "Traceback" not in done.err
        assert done.err.strip(), done.args
    # Refused before connecting: the bad value is named.
    assert results[1].error_lines() == ["interaction-worker: k:= needs a JSON value"]
    assert results[3].error_lines() == [
        "interaction-worker: --content needs a JSON value"
    ]


# --- deliver, mcp --------------------------------------------------------------------------


def test_deliver_prints_the_receipt_and_the_console_sink_shows_it(served: Run) -> None:
    text, content = cli_all(
        [
            served.client("deliver", "--text", "hi there", "--id", "delivery-text-1"),
            served.client(
                "deliver",
                "--content",
                '{"a":1}',
                "--artifact",
                "report=file:///x",
                "--role",
                "user",
            ),
        ],
        cwd=served.cwd,
    )
    assert text.code == 0, text.err
    assert text.lines == [{"deliveryId": "delivery-text-1", "status": "accepted"}]
    assert content.code == 0, content.err
    [receipt] = content.lines
    assert receipt["status"] == "accepted"
    assert UUID_RE.fullmatch(receipt["deliveryId"])
    served.wait_stderr("assistant", "delivery delivery-text-1", "hi there")
    served.wait_stderr(
        "user", f"delivery {receipt['deliveryId']}", '"a": 1', "report file:///x"
    )


def test_mcp_discover_without_mcp_is_not_found(served: Run) -> None:
    done = cli(*served.client("mcp", "discover"), cwd=served.cwd)
    assert done.code == 1
    [reply] = done.lines
    assert reply["error"]["code"] == "NOT_FOUND"


# --- check-config, schema ------------------------------------------------------------------


def test_check_config(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(
        "max_pending: 5\nshutdown_grace: 500ms\nidempotency: {enabled: true, wait: 2s}\n"
    )
    (tmp_path / "bad.yaml").write_text(
        "max_pending: 0\nshutdown_grace: soon\ntool_timeout: 1s\n"
    )
    (tmp_path / "a-file").write_text("")
    (tmp_path / "no-workspace.yaml").write_text(
        "workspace: missing\n"
        "mcp: {servers: {f: {transport: stdio, command: srv, cwd: a-file}}}\n"
    )
    good, bad, no_workspace = cli_all(
        [
            ["check-config", "good.yaml"],
            ["check-config", "bad.yaml"],
            ["check-config", "no-workspace.yaml"],
        ],
        cwd=tmp_path,
    )
    assert good.code == 0, good.err
    effective = yaml.safe_load(good.out)
    assert effective["max_pending"] == 5
    assert effective["idempotency"] == {
        "enabled": True,
        "bucket": "interaction_ledger",
        "replicas": 1,
        "ttl": "24h",
        "lease": "30s",
        "wait": "2s",
    }
    assert effective["nats"]["url"] is None
    assert Path(effective["workspace"]) == tmp_path
    assert bad.code == 2
    assert bad.out == ""
    lines = bad.error_lines()
    assert len(lines) == 2
    assert "max_pending" in lines[0]
    assert "shutdown_grace" in lines[1]
    assert no_workspace.code == 2
    assert no_workspace.out == ""
    assert no_workspace.error_lines() == [
        "interaction-worker: workspace must be an existing directory: nothing is there",
        "interaction-worker: mcp.servers.f.cwd must be a directory, not a file",
    ]


def test_schema_writes_the_schema_files(tmp_path: Path) -> None:
    out = tmp_path / "schemas"
    done = cli("schema", "--out", str(out), cwd=tmp_path)
    assert done.code == 0, done.err
    written = {Path(line["wrote"]) for line in done.lines}
    assert written == set(out.iterdir())
    assert out / "ExternalResult.schema.json" in written
    for path in written:
        assert isinstance(json.loads(path.read_text()), dict)


# --- run's event loop -----------------------------------------------------------------------

LOOP_PROBE_APP = """
import asyncio
import gc

from interaction_worker import InteractionWorker, Sandbox


class LoopProbe:
    name = "loop_probe"
    description = "The serving event loop's module and how many objects the collector keeps frozen"
    input_schema = {"type": "object"}
    effects = ()
    requires_approval = False
    idempotent = True

    def validate(self, arguments):
        return None

    async def execute(self, arguments, context):
        loop = type(asyncio.get_running_loop()).__module__
        return {
            "status": "success",
            "structuredContent": {
                "loop": loop,
                "frozen": gc.get_freeze_count(),
                "threshold": gc.get_threshold()[0],
            },
        }


worker = InteractionWorker(tools=[LoopProbe()], sandbox=Sandbox(tools=["loop_probe"]))
"""


def test_run_serves_on_uvloop_unless_told_and_settles_its_garbage_collector(
    tmp_path: Path,
) -> None:
    (tmp_path / "loop_probe_app.py").write_text(LOOP_PROBE_APP, encoding="utf-8")
    app = "loop_probe_app:worker"
    default = start_run(tmp_path, app, data_dir=tmp_path / "default")
    try:
        plain = start_run(
            tmp_path, app, "--loop", "asyncio", data_dir=tmp_path / "plain"
        )
        try:
            on_default, on_plain = cli_all(
                [
                    default.client("call", "loop_probe"),
                    plain.client("call", "loop_probe"),
                ],
                cwd=tmp_path,
            )
        finally:
            assert plain.stop() == 0
    finally:
        assert default.stop() == 0
    for done in (on_default, on_plain):
        assert done.code == 0, done.err
    seen_default = on_default.lines[0]["structuredContent"]
    seen_plain = on_plain.lines[0]["structuredContent"]
    assert seen_default["loop"] == "uvloop"
    assert seen_plain["loop"].startswith("asyncio.")
    # What start-up allocated (the imports alone are tens of thousands of objects) is frozen.
    assert seen_default["frozen"] > 10_000
    assert seen_plain["frozen"] > 10_000
    assert seen_default["threshold"] == seen_plain["threshold"] == 20_000


def test_run_refuses_an_unknown_loop(tmp_path: Path) -> None:
    done = cli("run", "--loop", "trio", "--data-dir", str(tmp_path), cwd=tmp_path)
    assert done.code == 2
    assert "--loop" in done.err and "trio" in done.err
    # Refused before anything started: nothing there but the test's configuration.
    assert [path.name for path in tmp_path.iterdir()] == ["worker.yaml"]


def test_mcp_over_stdio_under_run_on_uvloop(tmp_path: Path) -> None:
    """The MCP SDK's stdio client (anyio subprocesses and streams) on the loop `run` serves on."""
    server = REPO / "tests" / "mcp" / "mcp_probe_server.py"
    config = {
        "mcp": {
            "servers": {
                "probe": {
                    "transport": "stdio",
                    "command": sys.executable,
                    "args": [str(server)],
                }
            }
        },
        "sandbox": {"mcp": ["probe"]},
    }
    (tmp_path / "worker.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    run = start_run(tmp_path, data_dir=tmp_path / "data")
    try:
        discovered, invoked = cli_all(
            [
                run.client("mcp", "discover", "--server", "probe"),
                run.client("mcp", "invoke", "probe", "echo", "text=over uvloop"),
            ],
            cwd=tmp_path,
        )
    finally:
        assert run.stop() == 0
    assert discovered.code == 0, discovered.err
    assert invoked.code == 0, invoked.err
    names = {tool["name"] for tool in discovered.lines[0]["capabilities"]}
    assert {"echo", "measure", "slow"} <= names
    result = invoked.lines[0]["result"]
    assert result["status"] == "success"
    assert result["content"] == [{"type": "text", "text": "over uvloop"}]


# --- connection precedence -----------------------------------------------------------------


def test_a_separate_server_through_nats_url_and_the_environment(
    tmp_path: Path, nats_url: str
) -> None:
    """`run --nats-url` serves on a shared server; clients find it by flag or by environment.
    The worker.yaml in the directory gives both sides a private prefix and a wider sandbox."""
    cwd = project_dir(tmp_path / "project")
    prefix = f"t{uuid.uuid4().hex}"
    (cwd / "worker.yaml").write_text(
        f"subjects: {{prefix: {prefix}}}\nsandbox: {{tools: ['*'], read: true}}\n"
    )
    data_dir = tmp_path / "data"
    run = start_run(cwd, "--nats-url", nats_url, data_dir=data_dir, port=False)
    try:
        assert run.stdout == [f"ready {nats_url}"]
        procs = [
            spawn(["call", "no_such_tool", "--nats-url", nats_url], cwd),
            spawn(
                ["call", "read_text", "path=README.md"],
                cwd,
                env={"INTERACTION_NATS_URL": nats_url},
            ),
        ]
        by_flag, by_env = (finish(proc) for proc in procs)
        # This worker grants every tool: an unknown one is NOT_FOUND, from this worker.
        assert by_flag.code == 1
        assert by_flag.lines == [
            {"error": {"code": "NOT_FOUND", "message": "Unknown tool: no_such_tool"}}
        ]
        assert by_env.code == 0, by_env.err
        assert by_env.lines[0]["content"] == README
        assert not data_dir.exists()  # no embedded server
    finally:
        code = run.stop()
    assert code == 0, run.stderr()


# --- examples/agent.py ---------------------------------------------------------------------


def run_agent(served: Run, *args: str) -> Done:
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "examples" / "agent.py"), *args],
        cwd=served.cwd,
        env=child_env(cwd=served.cwd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return finish(proc)


def test_agent_example_reads_observes_and_delivers(served: Run) -> None:
    done = run_agent(served, "--data-dir", str(served.data_dir))
    assert done.code == 0, done.err
    readme, pyproject, receipt = done.lines
    assert readme["status"] == pyproject["status"] == "success"
    assert readme["message"]["content"] == README
    assert pyproject["message"]["content"] == PYPROJECT
    assert receipt["status"] == "accepted"
    summary = "This is demo-project: README.md has 3 lines, pyproject.toml has 3 lines."
    served.wait_stderr(f"delivery {receipt['deliveryId']}", summary)


def test_agent_example_exits_1_when_a_step_fails(custom: Run) -> None:
    # This worker does not grant read_text.
    done = run_agent(custom, "--data-dir", str(custom.data_dir))
    assert done.code == 1
    assert done.out == ""
    [line] = done.err.splitlines()
    assert line == "agent: PERMISSION_DENIED: Permission denied: tools:read_text"


# --- last: a `run` started with the module, so that its 10 s of retries overlap the tests above ---


@pytest.fixture(scope="module", autouse=True)
def unreachable_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`run --nats-url` where nothing listens, started before this module's first test."""
    cwd = tmp_path_factory.mktemp("unreachable")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"nats://127.0.0.1:{closed.getsockname()[1]}"
    proc = spawn(["run", "--nats-url", url], cwd)
    try:
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_run_gives_up_on_an_unreachable_nats_url(
    unreachable_run: tuple[subprocess.Popen[str], str],
) -> None:
    proc, url = unreachable_run
    done = finish(proc)
    assert done.code == 1
    assert done.out == ""
    # One line, naming the last failed attempt: no warning per attempt, no traceback.
    assert without_info(done.err) == [
        f"interaction-worker: cannot connect to NATS at {url}: no connection within 10 s "
        "(connection refused)"
    ]
