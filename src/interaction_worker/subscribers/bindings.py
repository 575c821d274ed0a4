"""A worker's nodes bound to NATS: the handler every binding shares, the ledger when it is on, and
the nats-py, durable and FastStream bindings, each built from one `BindingOptions`. `InteractionWorker`
(the worker without a transport) asks for them here, so no NATS or FastStream type is its own."""

import os
import socket
from collections.abc import Callable, Collection
from dataclasses import replace

from faststream.nats import NatsRouter
from nats.aio.client import Client as NatsClient

from ..config import DurableSettings, IdempotencySettings
from ..contracts.wire import Subjects
from ..ledger import KeyValueStore, Ledger
from .binding_options import BindingOptions
from .durable_binding import DurableBinding
from .faststream_router import build_router
from .handler import MessageHandler
from .ledger_store import JetStreamStore
from .nats_binding import NatsBinding
from .requests import Nodes

__all__ = [
    "NatsClient",
    "NatsRouter",
    "durable_binding",
    "message_handler",
    "nats_binding",
    "router",
]


def message_handler(
    nodes: Nodes,
    options: BindingOptions,
    *,
    max_payload: int | None = None,
    ledger: Ledger | None = None,
    durable: bool = False,
    serve: Collection[str] | None = None,
) -> MessageHandler:
    """The transport-neutral handling of `nodes`' messages (every binding uses one); with
    `options.tracing`, its traced subclass (docs/tracing.md); `durable`, a durable binding's; `serve`,
    the serve names whose kinds it handles (None: all)."""
    tracing = options.tracing
    handler: Callable[..., MessageHandler] = (
        MessageHandler if tracing is None else tracing.handler
    )
    return handler(
        nodes,
        subjects=Subjects(options.prefix),
        reply_prefixes=options.reply_prefixes,
        account_inboxes=options.account_inboxes,
        max_payload=options.max_payload if max_payload is None else max_payload,
        tool_timeout=options.tool_timeout,
        ledger=ledger,
        durable=durable,
        serve=serve,
    )


def nats_binding(
    nodes: Nodes,
    client: NatsClient,
    options: BindingOptions,
    *,
    concurrency: int | None = None,
    serve: Collection[str] | None = None,
) -> NatsBinding:
    """The standalone serving path on a connected client; with `options.idempotency` enabled,
    calls and deliveries run under the ledger (wire.md 8)."""
    store = _ledger_store(options, options.idempotency, client)
    handler = message_handler(
        nodes,
        options,
        max_payload=client.max_payload,
        ledger=_ledger(options.idempotency, store),
        serve=serve,
    )
    return NatsBinding(
        client,
        handler,
        queue=options.queue_group,
        concurrency=concurrency,
        max_pending=options.max_pending,
        ledger_store=store,
        traced=None if options.tracing is None else options.tracing.traced,
    )


def durable_binding(
    nodes: Nodes,
    client: NatsClient,
    settings: DurableSettings,
    options: BindingOptions,
    *,
    concurrency: int | None = None,
    serve: Collection[str] | None = None,
) -> DurableBinding:
    """Durable mode (wire.md 7) on a connected client. The ledger is on unless
    `options.idempotency.enabled` is False, and a call whose id a running attempt holds comes back
    later instead of waiting."""
    idempotency = options.idempotency
    ledger_settings = replace(
        idempotency or IdempotencySettings(),
        enabled=(idempotency is None or idempotency.enabled is not False),
        wait=0.0,
    )
    store = _ledger_store(options, ledger_settings, client)
    handler = message_handler(
        nodes,
        options,
        max_payload=client.max_payload,
        ledger=_ledger(ledger_settings, store, persistent=True),
        durable=True,
        serve=serve,
    )
    return DurableBinding(
        client,
        handler,
        queue=options.queue_group,
        settings=settings,
        concurrency=concurrency,
        max_pending=options.max_pending,
        ledger_store=store,
        traced=None if options.tracing is None else options.tracing.traced,
        events=options.events,
    )


def router(
    nodes: Nodes,
    options: BindingOptions,
    *,
    concurrency: int | None = None,
    serve: Collection[str] | None = None,
) -> NatsRouter:
    """A FastStream router serving the same subjects; the ledger's bucket, when it is on, is
    created or bound on the broker's connection at first use."""
    store = _ledger_store(options, options.idempotency, None)
    handler = message_handler(
        nodes, options, ledger=_ledger(options.idempotency, store), serve=serve
    )
    return build_router(
        handler,
        queue=options.queue_group,
        concurrency=concurrency or 64,
        ledger_store=store,
    )


def _ledger_store(
    options: BindingOptions,
    settings: IdempotencySettings | None,
    client: NatsClient | None,
) -> KeyValueStore | None:
    """The store given in the options, else the JetStream bucket the settings name; None with the
    ledger off."""
    if settings is None or not settings.enabled:
        return None
    if options.ledger_store is not None:
        return options.ledger_store
    return JetStreamStore(
        client, bucket=settings.bucket, ttl=settings.ttl, replicas=settings.replicas
    )


def _ledger(
    settings: IdempotencySettings | None,
    store: KeyValueStore | None,
    *,
    persistent: bool = False,
) -> Ledger | None:
    """With `persistent` (durable mode), an outcome is written until it is stored (wire.md 7)."""
    if settings is None or store is None:
        return None
    return Ledger(
        store,
        worker=f"{socket.gethostname()}:{os.getpid()}",
        lease=settings.lease,
        wait=settings.wait,
        persistent=persistent,
    )
