"""The server's memory after core calls through an account's service import (docs/operations.md,
"Permissions"): `python bench/import_memory.py [--calls 20000]`.

A request that crosses an import leaves the server a mapping from its `_R_.…` reply subject back to
the requester, until it is answered there or the export's `response_threshold` passes. The worker
answers the package's clients on their `Interaction-Reply-To` inbox, never on `_R_.…`, so each call
leaves one. This starts one nats-server from deploy/nats/accounts.conf as committed (the request
exports with a 5 s threshold), and once more with the thresholds taken out (the server's default, two
minutes); serves a core-mode worker with a no-op tool as the `workers` user; sends `--calls` tool
calls as AGENT_A's `agent_a` through `InteractionClient`, 100 in flight, `--rounds` times; and prints
the server's resident memory (VmRSS) before and after each round, once the threshold has passed.
"""

import argparse
import asyncio
import json
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nats

from interaction_worker import InteractionWorker, Sandbox, ToolContext
from interaction_worker.client import InteractionClient
from interaction_worker.embedded import find_nats_server

ROOT = Path(__file__).resolve().parent.parent
ACCOUNTS = ROOT / "deploy" / "nats" / "accounts.conf"
PASSWORDS = {
    user: f"pw{user.replace('_', '')}"
    for user in ("workers", "agent_a", "agent_b", "operator", "ui")
}
IN_FLIGHT = 100
THRESHOLD = 5.0  # the committed exports' response_threshold


class NoOp:
    name = "noop"
    description = "Does nothing"
    input_schema: dict[str, Any] = {"type": "object"}

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return {"status": "success", "content": "ok"}


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    assert match is not None
    return int(match[1]) / 1024


def start_server(workdir: Path, accounts: str) -> tuple[subprocess.Popen[bytes], int]:
    (workdir / "accounts.conf").write_text(accounts)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (workdir / "server.conf").write_text(
        f"listen: 127.0.0.1:{port}\njetstream {{ store_dir: {workdir / 'js'} }}\n"
        "include ./accounts.conf\n"
    )
    env = {f"NATS_{user.upper()}_PASSWORD": pw for user, pw in PASSWORDS.items()}
    proc = subprocess.Popen(
        [find_nats_server(), "-c", str(workdir / "server.conf")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(workdir / "server.log").open("wb"),
    )
    return proc, port


def until_listening(port: int) -> None:
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the server did not start")


async def connect(port: int, user: str, inbox_prefix: str = "_INBOX") -> Any:
    return await nats.connect(
        f"nats://127.0.0.1:{port}",
        user=user,
        password=PASSWORDS[user],
        inbox_prefix=inbox_prefix,
    )


async def measure(accounts: str, calls: int, rounds: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_server(Path(tmp), accounts)
        until_listening(port)
        try:
            worker_nc = await connect(port, "workers")
            worker = InteractionWorker(tools=[NoOp()], sandbox=Sandbox(tools=["noop"]))
            binding = worker.nats_binding(
                worker_nc,
                reply_prefixes=(
                    "_INBOX.AGENT_A.",
                    "_INBOX.AGENT_B.",
                    "_INBOX.OPERATOR.",
                ),
                account_inboxes=True,
            )
            await binding.start()
            client_nc = await connect(port, "agent_a", "_INBOX.AGENT_A")
            client = InteractionClient(client_nc, inbox_prefix="_INBOX.AGENT_A")
            body = json.dumps({"call": {"id": "x", "name": "noop", "arguments": {}}})
            await client.send("tool.call", body.encode())  # warmed up
            await asyncio.sleep(1.0)
            figures = [rss_mb(proc.pid)]
            slots = asyncio.Semaphore(IN_FLIGHT)

            async def one(n: int) -> None:
                data = json.dumps(
                    {"call": {"id": f"c-{n}", "name": "noop", "arguments": {}}}
                ).encode()
                async with slots:
                    reply = await client.send("tool.call", data)
                    assert b'"success"' in reply.data, reply.data

            for round_ in range(rounds):
                await asyncio.gather(
                    *(one(n) for n in range(round_ * calls, (round_ + 1) * calls))
                )
                # Past the threshold: the mappings of this round may go.
                await asyncio.sleep(THRESHOLD + 2.0)
                figures.append(rss_mb(proc.pid))
            await binding.stop(1.0)
            await client.close()
            await client_nc.close()
            await worker_nc.close()
            return figures
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    committed = ACCOUNTS.read_text()
    without = re.sub(r',\s*response_threshold:\s*"[^"]*"', "", committed)
    assert without != committed
    for name, accounts in (
        ("exports without response_threshold (2 min)", without),
        ("deploy/nats/accounts.conf (response_threshold 5s)", committed),
    ):
        figures = asyncio.run(measure(accounts, args.calls, args.rounds))
        steps = " -> ".join(f"{mb:.1f}" for mb in figures)
        print(
            f"{name}: server RSS (MB) before and {THRESHOLD + 2:g} s after each round of "
            f"{args.calls} core calls through the import: {steps}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
