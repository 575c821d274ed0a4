"""Durable mode under faults (wire.md 7, 8), with real processes: 1,000 calls of a tool whose side
effect is counted (one line per execution), while the worker is killed with SIGKILL twice and the
nats-server restarted once on the same store. Every call must end with exactly one outcome in the
events stream, none lost, none run twice, and every `unknown` must be a call a kill cut."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import nats
import nats.errors
import pytest
from bus_harness import decode

from interaction_worker.testing import NatsServer, NatsServerFactory

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CALLS = 1000
PREFIX = "fault"

APP = '''
import asyncio
import os

from interaction_worker import InteractionWorker, Sandbox

LOG = os.environ["FAULT_LOG"]


class Append:
    """Its side effect: one line per execution, written at once, then a short wait."""

    name = "append"
    input_schema = {"type": "object"}
    effects = ("write",)

    def validate(self, arguments):
        return None

    async def execute(self, arguments, context):
        fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{context.call_id} {os.getpid()}\\n".encode())
        finally:
            os.close(fd)
        await asyncio.sleep(0.02)
        return {"status": "success", "content": "appended"}


worker = InteractionWorker(tools=[Append()], sandbox=Sandbox(tools=["append"]), concurrency=32)
'''


def config(url: str) -> str:
    return f"""
nats: {{url: "{url}"}}
subjects: {{prefix: {PREFIX}}}
durable: {{enabled: true, ack_wait: 3s, max_deliver: 5, nak_backoff: [200ms]}}
idempotency: {{lease: 4s}}
shutdown_grace: 1s
output: {{sinks: []}}
"""


class Workers:
    """`interaction-worker run faultapp:worker` processes in `cwd`."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.procs: list[subprocess.Popen[bytes]] = []
        self.killed: set[int] = set()

    def start(self) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("INTERACTION_")}
        env["FAULT_LOG"] = str(self.cwd / "effects.log")
        env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(self.cwd)])
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "interaction_worker.cli",
                "run",
                "faultapp:worker",
                "--config",
                str(self.cwd / "worker.yaml"),
            ],
            cwd=self.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=(self.cwd / f"worker-{len(self.procs)}.stderr").open("wb"),
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # bounded by the test's own timeout
        assert line.startswith(b"ready "), (
            self.cwd / f"worker-{len(self.procs) - 1}.stderr"
        ).read_text()
        return proc

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        self.killed.add(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)


def effects(cwd: Path) -> list[tuple[str, int]]:
    path = cwd / "effects.log"
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [(line.split(" ")[0], int(line.split(" ")[1])) for line in lines if line]


async def until_effects(cwd: Path, count: int, within: float = 30.0) -> None:
    with anyio.fail_after(within):
        while True:
            if len(effects(cwd)) >= count:
                return
            await asyncio.sleep(0.01)


async def test_killed_workers_and_a_restarted_server_lose_nothing_and_run_nothing_twice(
    nats_server_factory: NatsServerFactory, tmp_path: Path
) -> None:
    began = time.monotonic()
    server: NatsServer = nats_server_factory()
    (tmp_path / "faultapp.py").write_text(APP)
    (tmp_path / "worker.yaml").write_text(config(server.url))
    workers = Workers(tmp_path)
    client = await nats.connect(
        server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2
    )
    try:
        first = await asyncio.to_thread(workers.start)
        js = client.jetstream()
        ids = [f"f-{i}" for i in range(CALLS)]
        for call_id in ids:
            body = json.dumps(
                {"call": {"id": call_id, "name": "append", "arguments": {}}}
            )
            await js.publish(f"{PREFIX}.tool.call", body.encode())

        await until_effects(tmp_path, 150)
        workers.kill(first)
        second = await asyncio.to_thread(workers.start)

        await until_effects(tmp_path, 400)
        nats_server_factory.stop(server)
        nats_server_factory("-p", str(server.port), workdir=server.workdir)

        await until_effects(tmp_path, 650, within=60)
        workers.kill(second)
        await asyncio.to_thread(workers.start)

        results = f"{PREFIX}.tool.result.>"
        with anyio.fail_after(90):
            while True:
                try:
                    info = await js.stream_info(
                        "INTERACTION_EVENTS", subjects_filter=results
                    )
                    if len(info.state.subjects or {}) >= CALLS:
                        break
                except (nats.errors.Error, TimeoutError):
                    pass
                await asyncio.sleep(0.2)
        finished = time.monotonic() - began

        subscription = await js.subscribe(
            results, stream="INTERACTION_EVENTS", ordered_consumer=True
        )
        outcomes: dict[str, list[dict[str, Any]]] = {}
        for _ in range(sum((info.state.subjects or {}).values())):
            msg = await subscription.next_msg(timeout=5)
            outcome = decode(msg)
            outcomes.setdefault(outcome["callId"], []).append(outcome)
        await subscription.unsubscribe()
        dead = await js.stream_info("INTERACTION_DEAD")
    finally:
        workers.close()
        await client.close()

    ran = Counter(call_id for call_id, _ in effects(tmp_path))
    runners = dict(effects(tmp_path))
    statuses = Counter(found[0]["status"] for found in outcomes.values())
    unknown = [
        call_id
        for call_id, found in outcomes.items()
        if found[0]["status"] == "unknown"
    ]
    print(
        f"\n{CALLS} calls in {finished:.1f} s: outcomes {dict(statuses)}, "
        f"side effects {sum(ran.values())}, run twice {sum(1 for n in ran.values() if n > 1)}, "
        f"lost {CALLS - len(outcomes)}, dead letters {dead.state.messages}, "
        f"killed {sorted(workers.killed)}"
    )
    assert sorted(outcomes) == sorted(ids)  # none lost
    assert all(
        len(found) == 1 for found in outcomes.values()
    )  # exactly one outcome each
    assert [call_id for call_id, n in ran.items() if n > 1] == []  # none run twice
    assert dead.state.messages == 0
    for call_id, found in outcomes.items():
        if found[0]["status"] == "success":
            assert ran[call_id] == 1
    # An unknown is a call a kill cut: started in a killed worker (its line, if any, is that worker's).
    assert set(statuses) <= {"success", "unknown"}
    assert len(unknown) <= 2 * 32
    assert all(
        runners.get(call_id, next(iter(workers.killed))) in workers.killed
        for call_id in unknown
    )


POISON_APP = '''
import asyncio
import os

from interaction_worker import InteractionWorker, Sandbox


class Lookup:
    """Read-only, so the ledger may run it again; `poison` kills the worker's process each time."""

    name = "lookup"
    input_schema = {"type": "object"}
    effects = ("read",)

    def validate(self, arguments):
        return None

    async def execute(self, arguments, context):
        if arguments.get("poison"):
            os._exit(3)
        await asyncio.sleep(0.01)
        return {"status": "success", "content": "found"}


# One call at a time: only the poison is in flight when it kills the process (calls in flight at a
# crash come back too, and each such return counts as one of their deliveries).
worker = InteractionWorker(tools=[Lookup()], sandbox=Sandbox(tools=["lookup"]), concurrency=1)
'''


async def test_a_call_that_kills_its_worker_every_time_is_dead_lettered_after_max_deliver(
    nats_server_factory: NatsServerFactory, tmp_path: Path
) -> None:
    """The other calls keep flowing; each crash is followed by a new worker, as a supervisor would."""
    server: NatsServer = nats_server_factory()
    (tmp_path / "faultapp.py").write_text(POISON_APP)
    (tmp_path / "worker.yaml").write_text(
        config(server.url)
        .replace("ack_wait: 3s", "ack_wait: 1s")
        .replace("max_deliver: 5", "max_deliver: 3")
        .replace("lease: 4s", "lease: 500ms")
    )
    workers = Workers(tmp_path)
    client = await nats.connect(server.url)
    crashes = 0
    try:
        current = await asyncio.to_thread(workers.start)
        js = client.jetstream()
        await js.publish(
            f"{PREFIX}.tool.call",
            json.dumps(
                {
                    "call": {
                        "id": "poison-1",
                        "name": "lookup",
                        "arguments": {"poison": True},
                    }
                }
            ).encode(),
        )
        for i in range(30):
            body = {"call": {"id": f"ok-{i}", "name": "lookup", "arguments": {}}}
            await js.publish(f"{PREFIX}.tool.call", json.dumps(body).encode())
        with anyio.fail_after(60):
            while True:
                dead = await js.stream_info("INTERACTION_DEAD")
                if dead.state.messages:
                    break
                if current.poll() is not None:
                    crashes += 1
                    current = await asyncio.to_thread(workers.start)
                await asyncio.sleep(0.1)
            results = f"{PREFIX}.tool.result.>"
            while True:
                info = await js.stream_info(
                    "INTERACTION_EVENTS", subjects_filter=results
                )
                if len(info.state.subjects or {}) >= 30:
                    break
                await asyncio.sleep(0.1)
        dead = await js.stream_info("INTERACTION_DEAD")
        letters = await js.subscribe(
            f"{PREFIX}.dead.>", stream="INTERACTION_DEAD", ordered_consumer=True
        )
        letter = decode(await letters.next_msg(timeout=5))
        await letters.unsubscribe()
    finally:
        workers.close()
        await client.close()

    print(
        f"\npoison: {crashes} crashes, then {letter['error']}; 30 other calls answered"
    )
    assert crashes == 3  # one per executed attempt (durable.max_deliver)
    assert letter["callId"] == "poison-1"
    assert letter["error"] == {
        "code": "UNAVAILABLE",
        "message": "Gave up after 3 deliveries",
    }
    assert letter["attempts"] == 3
    assert dead.state.messages == 1
    assert sorted(info.state.subjects or {}) == sorted(
        f"{PREFIX}.tool.result.ok-{i}" for i in range(30)
    )
