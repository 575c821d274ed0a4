"""The FastStream binding: the same handlers as a `NatsRouter`, for teams that mount the worker in
their own FastStream application (the AsyncAPI document comes from a typed twin, see asyncapi.py).

Inside the team's broker, each request subject is an ordinary FastStream subscriber: their broker
subscribes it (queue group `P-workers`), its middlewares see every message, its logger logs it, and
`broker.stop()` waits up to `graceful_timeout` for the calls in flight, then cancels them; a call
cancelled so publishes its `cancelled` / WORKER_SHUTDOWN outcome, as in the nats-py binding.
`max_pending`/OVERLOADED belong to the nats-py binding's dispatcher and do not apply here.

Up to the worker's concurrency (64 when it sets none) calls run at once per subject, and that
concurrency is the router's own, not FastStream's `max_workers`. FastStream's concurrent path (a
memory stream, a semaphore taken twice and an anyio task per message, and so a socket write per
message) costs about as much per message as a whole plain FastStream handler: the router on it
reached half the rate of a plain one-at-a-time FastStream handler (docs/benchmarks.md). So each
subscriber takes one message at a time, FastStream's cheap default, and hands the call to a task of
its own, up to the limit; past it, the subscriber waits, as FastStream's would. The subscriber's
`lock`, the `MultiLock` its `stop()` waits on, is replaced by one that each running call holds (and
that cancels what is still running once the wait is over), so shutdown is FastStream's. What a team
sees differently: a subscriber middleware's `consume_scope` ends once the call is handed over, not
when it is answered. With concurrency 1 the call runs inside the subscriber, as a plain handler does.

What differs from a handler written the obvious FastStream way, and why:

- The reply, events and dead letters are published straight on the broker's nats-py connection
  (through `wire_publish`, as the nats-py binding publishes), not through `broker.publish`. FastStream's
  publish pipeline (a publish command, the broker's publish middlewares, a fresh uuid4
  `correlation_id`, its `content-type`/`correlation_id` headers) would add nothing to a body that is
  already encoded and to headers that are already the wire's (docs/wire.md), and it costs more than
  the publish itself (27 µs a publish against 11 µs for nats-py's alone, docs/benchmarks.md). So the
  broker's publish middlewares do not see these publishes, and they carry exactly the wire's headers:
  the handler's `header_allowance` is 0, as on the nats-py binding.
- The handler takes one argument and no context: every `Context()` parameter (the message, the
  broker) is resolved by FastDepends in a worker thread, one thread round trip per parameter and
  message; the two the handler had once cost more than all the rest of its handling. FastStream
  also runs any synchronous parser, decoder or filter in a worker thread: the decoder is async.
- The decoder hands the handler the message as received (`Incoming`): FastStream's own decoder would
  `json.loads` the body before the handler runs, and a body that raises there (an integer of more than
  4,300 digits, nesting past Python's recursion limit, invalid JSON sent with a JSON content-type)
  would get no reply and no dead letter. `await message.decode()` in a middleware returns that
  `Incoming`; a decoder given to the broker does not apply to these subjects.
- `ack_policy=AckPolicy.MANUAL`: core NATS has nothing to acknowledge, and FastStream's default
  policy only wraps every message in an acknowledgement middleware that does nothing.

The parser stays FastStream's, or the broker's own when it has one. A parser of ours could skip a
uuid4 per message (the correlation id of a message that brings none, some 7 µs here), but it would
take the place of the broker's parser on these subjects.
"""

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from faststream import AckPolicy
from faststream._internal.endpoint.subscriber.utils import MultiLock
from faststream.message import StreamMessage
from faststream.nats import NatsRouter
from nats.aio.msg import Msg

from ..contracts.wire import Kind
from ..ledger import KeyValueStore
from .handler import MessageHandler
from .incoming import Incoming
from .wire_publish import WirePublisher

_LOGGER = logging.getLogger("interaction_worker")


def build_router(
    handler: MessageHandler,
    *,
    queue: str,
    concurrency: int = 64,
    ledger_store: KeyValueStore | None = None,
) -> NatsRouter:
    router = NatsRouter()
    # The publishes carry the handler's headers and nothing else (see the module docstring).
    handler.header_allowance = 0
    # FastStream cancels a handler only when its broker stops past `graceful_timeout`: such a call
    # then gets its `cancelled` / WORKER_SHUTDOWN outcome published, as in the nats-py binding.
    handler.shutting_down = True
    for kind in handler.kinds:
        _subscribe(router, handler, kind, queue, concurrency, ledger_store)
    return router


def _subscribe(
    router: NatsRouter,
    handler: MessageHandler,
    kind: Kind,
    queue: str,
    concurrency: int,
    ledger_store: KeyValueStore | None,
) -> None:
    subject = handler.subjects.request(kind)
    # no_reply: the handler publishes its own reply (or error reply); FastStream would add an empty one.
    subscriber = router.subscriber(
        subject,
        queue=queue,
        title=subject,
        no_reply=True,
        ack_policy=AckPolicy.MANUAL,
        decoder=_incoming,
    )

    wire: WirePublisher | None = (
        None  # the publishing adapter of the broker's connection
    )
    # Our bucket's store binds to the broker's connection once it has one; an injected store needs none.
    bind = getattr(ledger_store, "bind", None)

    async def serve(incoming: Incoming) -> None:
        nonlocal wire
        # The subscriber's connection is its broker's: known only once that broker has connected,
        # and its server's max_payload with it (a reconnection may change both).
        connection = subscriber.connection
        handler.max_payload = connection.max_payload or handler.max_payload
        if bind is not None:
            bind(connection)
        if wire is None or wire.client is not connection:
            wire = WirePublisher(connection)
        await wire.publish(await handler.handle(kind, incoming))

    if concurrency == 1:
        subscriber(serve)
        return

    calls = _CallsInFlight(concurrency, subject)

    @subscriber
    async def on_message(incoming: Incoming) -> None:
        await calls.start(subscriber, serve(incoming))


async def _incoming(msg: StreamMessage[Any]) -> Incoming:
    """The message as the handler takes it; its body is not decoded (see the module docstring)."""
    raw: Msg = msg.raw_message
    return Incoming(raw.subject, raw.data, raw.headers, raw.reply)


class _CallsInFlight(MultiLock):
    """The calls a subscriber has handed off, as the lock its `stop()` waits on.

    FastStream's `stop()` waits up to `graceful_timeout` on its subscriber's `lock` (a `MultiLock`
    each message holds while it is consumed), then goes on. Put in that lock's place, this one is
    held by each running call, so the wait covers the calls, and once the wait is over it cancels the
    calls still running and waits for them to publish their outcome.
    """

    def __init__(self, limit: int, subject: str) -> None:
        super().__init__()
        self.limit = asyncio.Semaphore(limit)
        self.subject = subject
        self.running: set[asyncio.Task[None]] = set()
        self.stopping = False

    async def start(self, subscriber: Any, call: Coroutine[Any, Any, None]) -> None:
        # Waiting for a free place holds up the subscription, as FastStream's own limit does.
        await self.limit.acquire()
        if subscriber.lock is not self:
            subscriber.lock = self  # a new one at each start of the subscriber
            self.stopping = False
        self.acquire()
        task = asyncio.create_task(call)
        self.running.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self.running.discard(task)
        self.release()
        self.limit.release()
        if task.cancelled():
            if not self.stopping:  # cancelled by something else than the broker's stop
                _LOGGER.error("a call on %s was cancelled unanswered", self.subject)
        elif (error := task.exception()) is not None:
            # The handler answers every failure on the wire; what is left is a publish that failed.
            _LOGGER.error("a call on %s ended unanswered", self.subject, exc_info=error)

    async def wait_release(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 (FastStream's signature)
        await super().wait_release(timeout)
        self.stopping = True
        for task in self.running:
            task.cancel()
        await asyncio.gather(*self.running, return_exceptions=True)
