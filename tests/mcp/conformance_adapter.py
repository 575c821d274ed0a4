"""The worker's side of the official MCP conformance suite's client scenarios, in the test's process.

The suite starts `conformance/adapter.py` once per scenario, with the scenario's MCP server URL as its
argument and, for auth scenarios, the scenario's context (client id and secret, a private key) as
JSON in `MCP_CONFORMANCE_CONTEXT`. That script only hands the scenario over a socket to `adapters`,
here, and exits with the status it is given back: the worker, its MCP client and `mcp login` run in
this process, already imported, instead of a fresh interpreter (and a second one to sign in) for each
scenario.

For each scenario a worker.yaml names the URL as its one MCP server, with the context in its `auth:`
(the secrets in environment variables of the scenario's own names); the worker is served with
`service.serve` as `interaction-worker run` serves it, on the test's nats-server, under a prefix of
its own; then, over the bus, the adapter does what a person and an agent would:

- `mcp login --open` once before its first request, for a server a person signs in to
  (`type: oauth`): the command line's own code, in a thread, with `webbrowser.open` as the person's
  browser, which follows the authorization URL's redirect to the login's loopback callback;
- a discover of the server, then an invoke of each tool it lists (arguments from the tool's schema);
- again `mcp login`, then the same request, only for an MCP_UNAUTHORIZED that names a scope, at
  most twice; nothing else is retried.

The exit status is 0 when every request succeeded; what the worker answered and what the adapter
did are kept, per scenario, in `Notes`.
"""

import asyncio
import contextlib
import functools
import json
import os
import re
import tempfile
import urllib.request
import uuid
import webbrowser
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from interaction_worker.app import build_worker, serve_options
from interaction_worker.cli.main import main as cli
from interaction_worker.client import InteractionClient, InteractionRequestError
from interaction_worker.config import load_settings
from interaction_worker.service import serve

CIMD = "https://conformance-test.local/client-metadata.json"
START = 30.0
SCOPE = re.compile(r"needs the scope ")
# Environment variables the command line reads and a test's own environment may hold: the
# adapter's worker and sign-in see only what its configuration says, as the suite's process did.
FOREIGN = "INTERACTION_"


@dataclass
class Note:
    """What the adapter did and what the worker answered, in one scenario."""

    did: list[str] = field(default_factory=list)
    worker_said: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def __str__(self) -> str:
        return json.dumps(
            {"adapter": self.did, "worker": self.worker_said, "seconds": self.seconds}
        )


Notes = dict[str, Note]


def auth_block(
    scenario: str, context: dict[str, Any], work: Path, secrets: dict[str, str]
) -> dict[str, Any] | None:
    """The scenario's context as an `auth:` block; its secrets go into `secrets`, under environment
    variable names of this scenario's own, so that scenarios run side by side do not share them."""
    if not scenario.startswith("auth/"):
        return None
    tag = uuid.uuid4().hex[:8].upper()
    client_id, client_secret = f"CONF_CLIENT_ID_{tag}", f"CONF_CLIENT_SECRET_{tag}"
    if scenario.startswith("auth/client-credentials"):
        block: dict[str, Any] = {
            "type": "client_credentials",
            "client_id_env": client_id,
        }
        secrets[client_id] = context["client_id"]
        if "private_key_pem" in context:
            key = work / "client.pem"
            key.write_text(context["private_key_pem"])
            key.chmod(0o600)
            block["private_key_file"] = str(key)
            block["signing_algorithm"] = context.get("signing_algorithm")
        else:
            block["client_secret_env"] = client_secret
            secrets[client_secret] = context["client_secret"]
        return block
    block = {"type": "oauth", "client_metadata_url": CIMD}
    if "client_id" in context:
        block = {"type": "oauth", "client_id_env": client_id}
        secrets[client_id] = context["client_id"]
        if context.get("client_secret"):
            block["client_secret_env"] = client_secret
            secrets[client_secret] = context["client_secret"]
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
        self,
        url: str,
        scenario: str,
        context: dict[str, Any],
        work: Path,
        nats_url: str,
        note: Note,
    ) -> None:
        self.url = url
        self.scenario = scenario
        self.work = work
        self.nats_url = nats_url
        self.note = note
        self.server = f"conformance-{uuid.uuid4().hex[:8]}"
        self.secrets: dict[str, str] = {}
        self.auth = auth_block(scenario, context, work, self.secrets)
        self.config = work / "worker.yaml"
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
                    "nats": {"url": nats_url},
                    "subjects": {"prefix": f"conf{uuid.uuid4().hex[:8]}"},
                    "data_dir": str(work / "data"),
                    "sandbox": {"mcp": [self.server]},
                    "tools": {},
                    "mcp": {"servers": {self.server: server}},
                    "output": {"sinks": []},
                }
            )
        )

    async def run(self) -> bool:
        # `mcp login` reads its secrets from the process's environment, as a person's shell
        # gives them; the names are this scenario's own, and go when it ends.
        os.environ.update(self.secrets)
        try:
            return await self._run()
        finally:
            for name in self.secrets:
                os.environ.pop(name, None)

    async def _run(self) -> bool:
        env = {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN)}
        settings = load_settings(self.config, env=env)
        ready, stop = asyncio.Event(), asyncio.Event()
        serving = asyncio.create_task(
            serve(
                build_worker(settings),
                serve_options(settings, env),
                ready=lambda url: ready.set(),
                stop=stop,
                install_signal_handlers=False,
            )
        )
        waiting = asyncio.create_task(ready.wait())
        try:
            await asyncio.wait(
                {serving, waiting},
                timeout=START,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not ready.is_set():
                self.note.did.append("the worker did not start")
                return False
            if self.auth is not None and self.auth["type"] == "oauth":
                await self.login()
            async with await InteractionClient.connect(
                config=self.config, timeout=30.0
            ) as client:
                return await self.drive(client)
        finally:
            waiting.cancel()
            stop.set()
            await asyncio.wait({serving}, timeout=15)

    async def login(self) -> None:
        """`interaction-worker mcp login --open SERVER`, in a thread: it runs its own event loop."""
        self.logins += 1
        self.note.did.append("mcp login")
        argv = [
            "mcp",
            "login",
            self.server,
            "--open",
            "--config",
            str(self.config),
            "--nats-url",
            self.nats_url,
        ]
        code = await asyncio.to_thread(cli, argv)
        self.note.did.append(f"mcp login exited {code}")

    async def drive(self, client: InteractionClient) -> bool:
        tools = await self.retried(lambda: client.mcp_discover(self.server), "discover")
        if tools is None:
            return False
        fine = True
        for capability in tools.capabilities:
            arguments = arguments_for(capability.input_schema)
            outcome = await self.retried(
                functools.partial(
                    client.mcp_invoke, self.server, capability.name, arguments
                ),
                f"invoke {capability.name}",
            )
            fine = fine and outcome is not None
        return fine

    async def retried(self, ask: Callable[[], Awaitable[Any]], what: str) -> Any:
        while True:
            self.note.did.append(what)
            scope_named = False
            try:
                answer = await ask()
            except InteractionRequestError as error:
                self.note.worker_said.append(
                    f"{what}: error {error.code}: {error.message}"
                )
                scope_named = error.code == "MCP_UNAUTHORIZED" and bool(
                    SCOPE.search(error.message)
                )
                answer = None
            else:
                result = getattr(answer, "result", None)
                if result is not None and result.status != "success":
                    failure = result.error
                    self.note.worker_said.append(
                        f"{what}: {result.status} {failure.code if failure else ''}: {failure.message if failure else ''}"
                    )
                    scope_named = (
                        failure is not None
                        and failure.code == "MCP_UNAUTHORIZED"
                        and bool(SCOPE.search(failure.message))
                    )
                    answer = None
                else:
                    self.note.worker_said.append(f"{what}: success")
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


def browse(url: str, new: int = 0, autoraise: bool = True) -> bool:
    """The person's browser (`webbrowser.open`'s signature): open the URL, follow the redirect to
    the loopback callback."""
    try:
        with urllib.request.urlopen(url, timeout=15) as answer:
            answer.read()
    except OSError:
        pass
    return True


@contextlib.contextmanager
def person_browser() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(webbrowser, "open", browse)
        yield


class Turns:
    """At most `at_once` scenarios driven side by side, and a scenario that must run alone (its
    checks time the client to a fraction of a second, which a busy event loop would miss) waits
    for the others to end, while those that come after it wait for it."""

    def __init__(self, at_once: int) -> None:
        self.at_once = at_once
        self.running = 0
        self.alone_waiting = 0
        self.alone_running = False
        self.changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def turn(self, *, alone: bool) -> AsyncIterator[None]:
        async with self.changed:
            if alone:
                self.alone_waiting += 1
                await self.changed.wait_for(
                    lambda: self.running == 0 and not self.alone_running
                )
                self.alone_waiting -= 1
                self.alone_running = True
            else:
                await self.changed.wait_for(
                    lambda: (
                        self.running < self.at_once
                        and not self.alone_waiting
                        and not self.alone_running
                    )
                )
            self.running += 1
        try:
            yield
        finally:
            async with self.changed:
                self.running -= 1
                self.alone_running = self.alone_running and not alone
                self.changed.notify_all()


@contextlib.asynccontextmanager
async def adapters(
    nats_url: str, *, at_once: int, alone: frozenset[str] = frozenset()
) -> AsyncIterator[tuple[str, Notes]]:
    """A loopback address `conformance/adapter.py` hands its scenario to, `HOST:PORT`, and the
    notes of the scenarios run; at most `at_once` scenarios are driven at the same time (the
    suite starts them all together, which would starve the worker's starts on a small machine),
    and the scenarios of `alone` with no other."""
    notes: Notes = {}
    turns = Turns(at_once)
    handlers: set[asyncio.Task[None]] = set()

    async def scenario(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        fine = False
        try:
            asked = json.loads(await reader.readline())
            note = notes.setdefault(asked["scenario"], Note())
            async with turns.turn(alone=asked["scenario"] in alone):
                started = asyncio.get_running_loop().time()
                try:
                    with tempfile.TemporaryDirectory() as work:
                        fine = await Adapter(
                            asked["url"],
                            asked["scenario"],
                            asked["context"],
                            Path(work),
                            nats_url,
                            note,
                        ).run()
                # The scenario fails, saying why; the others go on.
                except Exception as error:
                    note.did.append(f"the adapter failed: {error!r}")
                note.seconds = round(asyncio.get_running_loop().time() - started, 1)
        finally:
            with contextlib.suppress(ConnectionError):
                writer.write(json.dumps({"exit": 0 if fine else 1}).encode() + b"\n")
                await writer.drain()
            writer.close()

    with person_browser():
        listening = await asyncio.start_server(scenario, "127.0.0.1", 0)
        try:
            host, port = listening.sockets[0].getsockname()[:2]
            yield f"{host}:{port}", notes
        finally:
            listening.close()
            for handler in handlers:
                handler.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)
