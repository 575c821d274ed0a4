"""The client the official MCP conformance suite drives: the worker, over the bus.

`conformance client --command "python adapter.py" --scenario NAME` runs this with the scenario's MCP
server URL as its argument, and for auth scenarios the scenario's context (client id and secret, a
private key) as JSON in `MCP_CONFORMANCE_CONTEXT`. The adapter writes a worker.yaml whose one MCP
server is that URL, with the context in its `auth:`, serves it with `interaction-worker run` on the
suite's nats-server (`CONFORMANCE_NATS_URL`) in this process (as `run` serves it, without a second
interpreter to start), and then, over the bus, does what a person and an agent would:

- `mcp login` once before its first request, for a server a person signs in to (`type: oauth`),
  acting as the person's browser: it follows the printed authorization URL's redirect to the
  login's loopback callback;
- a discover of the server, then an invoke of each tool it lists (arguments from the tool's schema);
- again `mcp login`, then the same request, only for an MCP_UNAUTHORIZED that names a scope, at
  most twice; nothing else is retried.

What the worker answered and what the adapter did go to `CONFORMANCE_NOTES` as one JSON line. The
exit status is 0 when every request succeeded.
"""

import asyncio
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from interaction_worker.app import build_worker, serve_options
from interaction_worker.client import InteractionClient, InteractionRequestError
from interaction_worker.config import load_settings
from interaction_worker.service import serve

HERE = Path(__file__).resolve().parent
CIMD = "https://conformance-test.local/client-metadata.json"
START = 30.0
SCOPE = re.compile(r"needs the scope ")


def auth_block(
    scenario: str, context: dict[str, Any], work: Path
) -> dict[str, Any] | None:
    """The scenario's context as an `auth:` block, and its secrets in the worker's environment."""
    if not scenario.startswith("auth/"):
        return None
    if scenario.startswith("auth/client-credentials"):
        block: dict[str, Any] = {
            "type": "client_credentials",
            "client_id_env": "CONF_CLIENT_ID",
        }
        os.environ["CONF_CLIENT_ID"] = context["client_id"]
        if "private_key_pem" in context:
            key = work / "client.pem"
            key.write_text(context["private_key_pem"])
            key.chmod(0o600)
            block["private_key_file"] = str(key)
            block["signing_algorithm"] = context.get("signing_algorithm")
        else:
            block["client_secret_env"] = "CONF_CLIENT_SECRET"
            os.environ["CONF_CLIENT_SECRET"] = context["client_secret"]
        return block
    block = {"type": "oauth", "client_metadata_url": CIMD}
    if "client_id" in context:
        block = {"type": "oauth", "client_id_env": "CONF_CLIENT_ID"}
        os.environ["CONF_CLIENT_ID"] = context["client_id"]
        if context.get("client_secret"):
            block["client_secret_env"] = "CONF_CLIENT_SECRET"
            os.environ["CONF_CLIENT_SECRET"] = context["client_secret"]
    return block


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    """A value for each required property (and each numbered one), from its type."""
    values = {
        "integer": 2,
        "number": 3,
        "boolean": True,
        "string": "x",
        "array": [],
        "object": {},
    }
    properties = schema.get("properties") or {}
    wanted = set(schema.get("required") or []) | {
        name
        for name, spec in properties.items()
        if spec.get("type") in ("integer", "number")
    }
    return {
        name: properties.get(name, {}).get(
            "default", values.get(properties.get(name, {}).get("type", "string"), "x")
        )
        for name in sorted(wanted)
    }


class Adapter:
    def __init__(
        self, url: str, scenario: str, context: dict[str, Any], work: Path
    ) -> None:
        self.url = url
        self.scenario = scenario
        self.work = work
        self.server = f"conformance-{uuid.uuid4().hex[:8]}"
        self.auth = auth_block(scenario, context, work)
        self.config = work / "worker.yaml"
        self.did: list[str] = []
        self.worker_said: list[str] = []
        self.logins = 0
        server: dict[str, Any] = {
            "transport": "http",
            "url": url,
            "timeout": "10s",
            "connect_timeout": "10s",
        }
        if self.auth is not None:
            server["auth"] = self.auth
        self.config.write_text(
            json.dumps(
                {
                    "nats": {"url": os.environ["CONFORMANCE_NATS_URL"]},
                    "subjects": {"prefix": f"conf{uuid.uuid4().hex[:8]}"},
                    "data_dir": str(work / "data"),
                    "sandbox": {"mcp": [self.server]},
                    "tools": {},
                    "mcp": {"servers": {self.server: server}},
                    "output": {"sinks": []},
                }
            )
        )

    def cli(self, *args: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "interaction_worker.cli",
            *args,
            "--config",
            str(self.config),
        ]

    async def run(self) -> bool:
        settings = load_settings(self.config, env=os.environ)
        ready, stop = asyncio.Event(), asyncio.Event()
        serving = asyncio.create_task(
            serve(
                build_worker(settings),
                serve_options(settings, os.environ),
                ready=lambda url: ready.set(),
                stop=stop,
                install_signal_handlers=False,
            )
        )
        try:
            await asyncio.wait(
                {serving, asyncio.create_task(ready.wait())},
                timeout=START,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not ready.is_set():
                self.did.append("the worker did not start")
                return False
            if self.auth is not None and self.auth["type"] == "oauth":
                await self.login()
            async with await InteractionClient.connect(
                config=self.config, timeout=30.0
            ) as client:
                return await self.drive(client)
        finally:
            stop.set()
            await asyncio.wait({serving}, timeout=15)

    async def login(self) -> None:
        self.logins += 1
        self.did.append("mcp login")
        process = await asyncio.create_subprocess_exec(
            *self.cli("mcp", "login", self.server),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert process.stderr is not None
        said = []
        async for raw in process.stderr:
            text = raw.decode().rstrip()
            said.append(text)
            if text.startswith("sign in at: "):
                asyncio.get_running_loop().create_task(
                    asyncio.to_thread(browse, text.removeprefix("sign in at: "))
                )
        code = await process.wait()
        self.did.append(f"mcp login exited {code}: {said[-1] if said else ''}")

    async def drive(self, client: InteractionClient) -> bool:
        tools = await self.retried(lambda: client.mcp_discover(self.server), "discover")
        if tools is None:
            return False
        fine = True
        for capability in tools.capabilities:
            arguments = arguments_for(capability.input_schema)
            outcome = await self.retried(
                lambda name=capability.name, a=arguments: client.mcp_invoke(
                    self.server, name, a
                ),
                f"invoke {capability.name}",
            )
            fine = fine and outcome is not None
        return fine

    async def retried(self, ask: Any, what: str) -> Any:
        while True:
            self.did.append(what)
            scope_named = False
            try:
                answer = await ask()
            except InteractionRequestError as error:
                self.worker_said.append(f"{what}: error {error.code}: {error.message}")
                scope_named = error.code == "MCP_UNAUTHORIZED" and bool(
                    SCOPE.search(error.message)
                )
                answer = None
            else:
                result = getattr(answer, "result", None)
                if result is not None and result.status != "success":
                    failure = result.error
                    self.worker_said.append(
                        f"{what}: {result.status} {failure.code if failure else ''}: {failure.message if failure else ''}"
                    )
                    scope_named = (
                        failure is not None
                        and failure.code == "MCP_UNAUTHORIZED"
                        and bool(SCOPE.search(failure.message))
                    )
                    answer = None
                else:
                    self.worker_said.append(f"{what}: success")
            if answer is not None:
                return answer
            if (
                not scope_named
                or self.logins > 2
                or self.auth is None
                or self.auth["type"] != "oauth"
            ):
                return None
            await self.login()


def browse(url: str) -> None:
    """The person's browser: open the URL, follow the redirect to the loopback callback."""
    try:
        with urllib.request.urlopen(url, timeout=15) as answer:
            answer.read()
    except OSError:
        pass


def main() -> int:
    url = sys.argv[1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        logging.basicConfig(
            filename=Path(scratch) / "worker.log",
            level=logging.INFO,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        logging.getLogger("httpx2").setLevel(logging.WARNING)
        adapter = Adapter(url, scenario, context, Path(scratch))
        fine = asyncio.run(adapter.run())
        notes = os.environ.get("CONFORMANCE_NOTES")
        if notes:
            with open(notes, "a") as file:
                file.write(
                    json.dumps(
                        {
                            "scenario": scenario,
                            "adapter": adapter.did,
                            "worker": adapter.worker_said,
                            "seconds": round(time.monotonic() - started, 1),
                            "worker_log": (Path(scratch) / "worker.log").read_text()[
                                -3000:
                            ],
                        }
                    )
                    + "\n"
                )
    return 0 if fine else 1


if __name__ == "__main__":
    sys.exit(main())
