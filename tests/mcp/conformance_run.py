"""One run of the official MCP conformance suite over every scenario (`--suite all`), and each
scenario's verdict from what the run wrote, as the suite itself judges a run against its expected
failures: a scenario with a failed check or a warning must be listed, and a listed one must have one.

The client and the server scenarios (tests/mcp/test_mcp_conformance.py,
tests/gateway/test_gateway_conformance.py) both run the suite once and make each scenario a test of
its own from here. A run that does not end in time is stopped: the scenarios it finished keep their
verdicts, the others fail, saying that the run stopped before them.
"""

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# What a failure message shows of the suite's own output: its end, where it names the scenarios.
OUTPUT_TAIL = 4000


@dataclass
class SuiteRun:
    """Where the run wrote each scenario's checks (`<out>/<prefix><scenario>-<time>/checks.json`,
    a scenario's slashes making directories), its exit status (None: stopped), and its output."""

    out: Path
    prefix: str
    returncode: int | None
    output: str

    def checks(self, scenario: str) -> list[dict[str, Any]] | None:
        *parents, last = f"{self.prefix}{scenario}".split("/")
        pattern = re.compile(re.escape(last) + r"-\d{4}-\d\d-\d\dT[\d-]+Z")
        where = self.out.joinpath(*parents)
        found = (
            [
                directory / "checks.json"
                for directory in where.iterdir()
                if pattern.fullmatch(directory.name)
                and (directory / "checks.json").exists()
            ]
            if where.is_dir()
            else []
        )
        assert len(found) <= 1, f"{scenario}: {len(found)} results written"
        if not found:
            return None
        checks: list[dict[str, Any]] = json.loads(found[0].read_text())
        return checks

    def tail(self) -> str:
        return self.output[-OUTPUT_TAIL:]


def verdict(run: SuiteRun, scenario: str, expected: Sequence[str]) -> str | None:
    """Why the scenario fails against the expected failures, or None when it does not."""
    checks = run.checks(scenario)
    if checks is None:
        stopped = "the run was stopped" if run.returncode is None else "the run ended"
        return f"{scenario}: no result written ({stopped} before it)\n{run.tail()}"
    faults = [check for check in checks if check["status"] in ("FAILURE", "WARNING")]
    if faults and scenario not in expected:
        said = "\n".join(
            f"{check['status']} {check.get('name')}: {check.get('errorMessage') or check.get('description')}"
            for check in faults
        )
        return f"{scenario} fails, and is not among the expected failures:\n{said}"
    if not faults and scenario in expected:
        return f"{scenario} passes: take it out of the expected failures"
    return None


def score(run: SuiteRun, scenario: str) -> str:
    """`passed/counted` of the scenario's checks (SUCCESS among SUCCESS and FAILURE)."""
    statuses = [check["status"] for check in run.checks(scenario) or []]
    counted = [s for s in statuses if s in ("SUCCESS", "FAILURE")]
    return f"{counted.count('SUCCESS')}/{len(counted)}"


async def run_suite(
    argv: Sequence[str],
    *,
    out: Path,
    prefix: str,
    env: Mapping[str, str],
    cwd: Path,
    limit: float,
) -> SuiteRun:
    """Run the suite (`argv`, which writes under `out`) to its end, or stopped after `limit` seconds."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=dict(env),
        cwd=cwd,
    )
    assert process.stdout is not None
    reading = asyncio.create_task(process.stdout.read())
    try:
        await asyncio.wait_for(process.wait(), limit)
    except TimeoutError:
        process.kill()
        await process.wait()
        returncode = None
    else:
        returncode = process.returncode
    try:
        data = await asyncio.wait_for(reading, 10)
    except (TimeoutError, OSError):
        data = b""
    output = data.decode(errors="replace")
    if returncode is None:
        output += f"\n(the suite was stopped after {limit:g} s)"
    return SuiteRun(out, prefix, returncode, output)
