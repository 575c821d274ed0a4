"""The FastStream binding: the same handlers as a `NatsRouter`, for teams that mount the worker in
their own FastStream application (the AsyncAPI document comes from a typed twin, see asyncapi.py).

Inside the team's broker, each request subject is an ordinary FastStream subscriber: their broker
subscribes it (queue group `P-workers`), its middlewares wrap every message's handling, its logger
logs it, and `broker.stop()` waits up to `graceful_timeout` for the calls in flight, then cancels
them; a call cancelled so publishes its `cancelled` / WORKER_SHUTDOWN outcome, as in the nats-py
binding. FastStream runs up to `max_workers` messages at once per subject; `max_pending`/OVERLOADED
belong to the nats-py binding's dispatcher and do not apply here. That concurrency is FastStream's
and costs about as much per message as a whole plain FastStream handler (a memory stream, a
semaphore taken twice and a task per message, and so a socket write per message): with
`max_workers=1` FastStream takes one message at a time, cheaply, but a call that waits holds up the
ones behind it (docs/benchmarks.md).

What differs from a handler written the obvious FastStream way, and why:

- The reply, events and dead letters are published straight on the broker's nats-py connection
  (`Client.publish`, the same call as the nats-py binding), not through `broker.publish`. FastStream's
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

from typing import Any

from faststream import AckPolicy
from faststream.message import StreamMessage
from faststream.nats import NatsRouter
from nats.aio.msg import Msg

from .handler import MessageHandler
from .incoming import Incoming
from .subjects import KINDS, Kind


def build_router(
    handler: MessageHandler, *, queue: str, max_workers: int = 64
) -> NatsRouter:
    router = NatsRouter()
    # The publishes carry the handler's headers and nothing else (see the module docstring).
    handler.header_allowance = 0
    # FastStream cancels a handler only when its broker stops past `graceful_timeout`: such a call
    # then gets its `cancelled` / WORKER_SHUTDOWN outcome published, as in the nats-py binding.
    handler.shutting_down = True
    for kind in KINDS:
        _subscribe(router, handler, kind, queue, max_workers)
    return router


def _subscribe(
    router: NatsRouter,
    handler: MessageHandler,
    kind: Kind,
    queue: str,
    max_workers: int,
) -> None:
    subject = handler.subjects.request(kind)
    # no_reply: the handler publishes its own reply (or error reply); FastStream would add an empty one.
    subscriber = router.subscriber(
        subject,
        queue=queue,
        max_workers=max_workers,
        title=subject,
        no_reply=True,
        ack_policy=AckPolicy.MANUAL,
        decoder=_incoming,
    )

    @subscriber
    async def on_message(incoming: Incoming) -> None:
        # The subscriber's connection is its broker's: known only once that broker has connected,
        # and its server's max_payload with it (a reconnection may change both).
        connection = subscriber.connection
        handler.max_payload = connection.max_payload or handler.max_payload
        publish = connection.publish
        for target, payload, headers in await handler.handle(kind, incoming):
            await publish(target, payload, headers=headers)


async def _incoming(msg: StreamMessage[Any]) -> Incoming:
    """The message as the handler takes it; its body is not decoded (see the module docstring)."""
    raw: Msg = msg.raw_message
    return Incoming(raw.subject, raw.data, raw.headers, raw.reply)
