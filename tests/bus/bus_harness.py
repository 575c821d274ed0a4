"""The harness of the bus tests: a worker served by either binding on a real nats-server, under a prefix
of its own, and a raw client that sees everything published under that prefix in arrival order.

Replies are requested on `P.reply.<n>`, which the workers served here take as a reply prefix beside
`_INBOX.` (`reply_prefixes`), so one subscription on `P.>` receives a message's reply, events and dead
letter in the order the worker published them.
"""

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import nats
from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg

from interaction_worker import InteractionWorker
from interaction_worker.app import build_worker
from interaction_worker.config import IdempotencySettings, Settings
from interaction_worker.service import ConnectionStats, ServeOptions, serve
from interaction_worker.subscribers import Kind, NatsBinding, Subjects

BINDINGS = ("nats-py", "faststream")
WAIT = 10.0  # seconds; every wait is bounded
EVENT_FAMILIES = (
    "tool.result",
    "tool.observation",
    "mcp.result",
    "mcp.observation",
    "output.receipt",
    "command.done",
)


def unique_prefix() -> str:
    return f"t{uuid.uuid4().hex}"


def reply_prefixes(prefix: str) -> tuple[str, str]:
    """What the workers served here answer: their clients' inboxes, and the bus's `P.reply.<n>`."""
    return ("_INBOX.", f"{prefix}.reply.")


async def settled(client: Client) -> None:
    """Return once the server has every subscription `client` made so far.

    nats-py 2.16's flush() writes its PING ahead of SUBs still in the client's pending buffer, so one
    PONG proves nothing about them; the second PING goes out after them.
    """
    await client.flush()
    await client.flush()


def decode(msg: Msg) -> Any:
    return json.loads(msg.data)


@dataclass(frozen=True)
class Sent:
    """A message the test published: its body, headers and where its reply should come."""

    kind: Kind
    data: bytes
    headers: dict[str, str]
    reply: str | None


class Bus:
    """A raw nats-py client watching `P.>`; every wait is bounded by `anyio.fail_after`."""

    def __init__(self, client: Client, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.subjects = Subjects(prefix)
        self.messages: list[Msg] = []
        self._changed = asyncio.Event()
        self._replies = 0

    async def watch(self) -> None:
        await self.client.subscribe(f"{self.prefix}.>", cb=self._on_message)
        await settled(self.client)

    async def watch_also(self, subject: str) -> None:
        """Collect `subject` too (e.g. an `Interaction-Reply-To` inbox), in the same list."""
        await self.client.subscribe(subject, cb=self._on_message)
        await settled(self.client)

    async def _on_message(self, msg: Msg) -> None:
        self.messages.append(msg)
        self._changed.set()

    def reply_subject(self) -> str:
        self._replies += 1
        return f"{self.prefix}.reply.{self._replies}"

    async def send(
        self,
        kind: Kind,
        body: bytes | Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        reply: bool = True,
    ) -> Sent:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        sent = Sent(
            kind, data, dict(headers or {}), self.reply_subject() if reply else None
        )
        await self.client.publish(
            self.subjects.request(kind),
            data,
            reply=sent.reply or "",
            headers=sent.headers or None,
        )
        return sent

    async def wait(
        self,
        predicate: Callable[[Msg], bool],
        count: int = 1,
        within: float = WAIT,
        since: int = 0,
    ) -> list[Msg]:
        """The messages matching `predicate` (received from index `since` on), once there are at
        least `count` of them."""
        with anyio.fail_after(within):
            while True:
                found = [m for m in self.messages[since:] if predicate(m)]
                if len(found) >= count:
                    return found
                self._changed.clear()
                await self._changed.wait()

    async def wait_subject(
        self, subject: str, count: int = 1, within: float = WAIT
    ) -> list[Msg]:
        return await self.wait(lambda m: m.subject == subject, count, within)

    async def reply(self, sent: Sent, within: float = WAIT) -> Msg:
        assert sent.reply is not None
        (msg,) = (await self.wait_subject(sent.reply, 1, within))[:1]
        return msg

    async def request(
        self,
        kind: Kind,
        body: bytes | Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
    ) -> Msg:
        return await self.reply(await self.send(kind, body, headers=headers))

    def on(self, subject: str) -> list[Msg]:
        return [m for m in self.messages if m.subject == subject]

    def is_event(self, msg: Msg) -> bool:
        return any(
            msg.subject.startswith(f"{self.prefix}.{family}.")
            for family in EVENT_FAMILIES
        )

    def is_dead(self, msg: Msg) -> bool:
        return msg.subject.startswith(f"{self.prefix}.dead.")

    def events(self) -> list[Msg]:
        return [m for m in self.messages if self.is_event(m)]

    def dead_letters(self) -> list[Msg]:
        """Dead letters of the test's own messages (the settle markers are left out)."""
        return [
            m
            for m in self.messages
            if self.is_dead(m) and "X-Marker" not in decode(m)["headers"]
        ]

    async def settle(self, kind: Kind) -> None:
        """Wait until the worker has published everything of the messages sent before on `kind`.

        A marker (an invalid body) goes to the same subject; with a worker of concurrency 1 it is
        handled after them, so its reply comes after all their publishes.
        """
        sent = await self.send(kind, b"marker", headers={"X-Marker": "1"})
        await self.reply(sent)


@dataclass
class Served:
    """A running worker: its prefix, the binding serving it and the bus that watches it."""

    binding: str
    prefix: str
    bus: Bus
    worker: InteractionWorker
    nats_binding: NatsBinding | None = None
    broker: NatsBroker | None = None
    client: Client | None = None
    stopped: bool = False

    async def stop(self, grace: float = 5.0) -> None:
        """Stop serving: `binding.stop(grace)` for nats-py, `broker.stop()` for FastStream."""
        if self.stopped:
            return
        self.stopped = True
        if self.nats_binding is not None:
            await self.nats_binding.stop(grace)
        if self.client is not None:
            await self.client.drain()
        if self.broker is not None:
            await self.broker.stop()


@dataclass
class Serve:
    """Starts workers on the real server with one binding; stops all of them at teardown."""

    binding: str
    url: str
    served: list[Served] = field(default_factory=list)
    _buses: dict[tuple[str, str], Bus] = field(default_factory=dict)
    _clients: list[Client] = field(default_factory=list)

    async def bus(self, url: str, prefix: str) -> Bus:
        bus = self._buses.get((url, prefix))
        if bus is None:
            client = await nats.connect(url, max_reconnect_attempts=1)
            self._clients.append(client)
            bus = Bus(client, prefix)
            await bus.watch()
            self._buses[(url, prefix)] = bus
        return bus

    async def __call__(
        self,
        worker: InteractionWorker,
        *,
        url: str | None = None,
        prefix: str | None = None,
        binding: str | None = None,
        tool_timeout: float | None = 60.0,
        max_pending: int = 1000,
        graceful_timeout: float = 5.0,
        idempotency: IdempotencySettings | None = None,
        account_inboxes: bool = False,
    ) -> Served:
        url = url or self.url
        prefix = prefix or unique_prefix()
        binding = binding or self.binding
        bus = await self.bus(url, prefix)
        served = Served(binding, prefix, bus, worker)
        if binding == "nats-py":
            client = await nats.connect(url, max_reconnect_attempts=1)
            served.client = client
            served.nats_binding = worker.nats_binding(
                client,
                prefix=prefix,
                reply_prefixes=reply_prefixes(prefix),
                max_pending=max_pending,
                tool_timeout=tool_timeout,
                idempotency=idempotency,
                account_inboxes=account_inboxes,
            )
            self.served.append(served)
            await served.nats_binding.start()
        else:
            broker = NatsBroker(url, logger=None, graceful_timeout=graceful_timeout)
            broker.include_router(
                worker.router(
                    prefix=prefix,
                    reply_prefixes=reply_prefixes(prefix),
                    tool_timeout=tool_timeout,
                    idempotency=idempotency,
                    account_inboxes=account_inboxes,
                )
            )
            served.broker = broker
            self.served.append(served)
            await broker.start()
            await settled(broker.connection)
        return served

    async def close(self) -> None:
        for served in reversed(self.served):
            await served.stop(grace=1.0)
        for client in self._clients:
            await client.close()


@dataclass
class Running:
    """A worker served from its configuration as `run` serves it: the bus watching its prefix, the
    event that stops it, and the task of `service.serve`."""

    bus: Bus
    stop: asyncio.Event
    task: asyncio.Task[ConnectionStats]


@contextlib.asynccontextmanager
async def running_service(
    settings: Settings, options: ServeOptions, *, start_bound: float = WAIT
) -> AsyncIterator[Running]:
    """`service.serve` of the worker `settings` build, until the block ends (or `stop` is set);
    it answers the bus's `P.reply.<n>` too."""
    options = replace(
        options,
        reply_prefixes=(*options.reply_prefixes, f"{options.prefix}.reply."),
    )
    assert options.url is not None
    ready, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(
        serve(
            build_worker(settings),
            options,
            ready=lambda url: ready.set(),
            stop=stop,
            install_signal_handlers=False,
        )
    )
    watcher = Serve("nats-py", options.url)
    try:
        with anyio.fail_after(start_bound):
            await ready.wait()
        yield Running(await watcher.bus(options.url, options.prefix), stop, task)
    finally:
        stop.set()
        await watcher.close()
        await asyncio.wait({task})
