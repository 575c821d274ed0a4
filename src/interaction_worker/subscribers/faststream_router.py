"""The FastStream binding: the same handlers as a `NatsRouter`, for teams that mount the worker in
their own FastStream application, and for the AsyncAPI document.

It costs more CPU per message than the nats-py binding (FastStream's per-message machinery) and runs
up to `max_workers` messages at once per subject; `max_pending`/OVERLOADED belong to the nats-py
binding's dispatcher and do not apply here. FastStream adds its own `content-type` and
`correlation_id` headers to everything it publishes.
"""

from typing import Any

from faststream.message import StreamMessage
from faststream.nats import NatsMessage, NatsRouter
from faststream.nats.annotations import NatsBroker

from .handler import MessageHandler
from .incoming import Incoming
from .subjects import KINDS, Kind

# Room for the headers FastStream adds to what it publishes (`content-type`, `correlation_id`: 70
# bytes), with some to spare for a publish middleware's; they count against the server's max_payload.
_FASTSTREAM_HEADERS = 256


def build_router(
    handler: MessageHandler, *, queue: str, max_workers: int = 64
) -> NatsRouter:
    router = NatsRouter()
    handler.header_allowance = _FASTSTREAM_HEADERS
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
    @router.subscriber(
        subject,
        queue=queue,
        max_workers=max_workers,
        title=subject,
        no_reply=True,
        decoder=_undecoded,
    )
    async def on_message(msg: NatsMessage, broker: NatsBroker) -> None:
        # The router is built before any connection: the server's max_payload is known only now.
        handler.max_payload = broker.connection.max_payload or handler.max_payload
        raw = msg.raw_message
        incoming = Incoming(raw.subject, raw.data, raw.headers, raw.reply)
        for target, payload, headers in await handler.handle(kind, incoming):
            await broker.publish(payload, target, headers=headers)


async def _undecoded(msg: StreamMessage[Any]) -> bytes:
    """The body as received. FastStream's own decoder would `json.loads` it before the handler runs,
    and a body that raises there (an integer of more than 4,300 digits, nesting past Python's recursion
    limit, invalid JSON sent with a JSON content-type) would get no reply and no dead letter."""
    return msg.body
