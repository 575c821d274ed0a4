"""Serving a worker: the server (embedded, or at a URL), the binding, discovery (wire.md 9),
metrics and health when asked (docs/configuration.md, "Metrics and health"), signals and shutdown."""

import asyncio
import contextlib
import gc
import logging
import os
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import event_loop
from ..config import format_duration, listen_address
from ..config.values import Rule
from ..embedded import UI_USER, EmbeddedNatsServer, ui_token_path
from ..errors import McpClientError, ServeError
from ..nodes.protected import PROCESS_FILES
from ..subscribers import (
    SERVICE_NAME,
    BindingOptions,
    Discovery,
    DurableBinding,
    NatsBinding,
)
from ..tools import check_command_limits
from ..tracing import TracerProvider, tracer_provider_from_environment
from ..worker import InteractionWorker
from .connection import (
    ConnectionStats,
    close,
    connect_unless_stopped,
    with_connect_options,
)
from .options import ServeOptions

if (
    TYPE_CHECKING
):  # imported when metrics are on only (see `_monitor`): for the type checker here
    from ..monitoring import Monitor

_LOGGER = logging.getLogger("interaction_worker")
# See `run`. Measured in-process, 256 calls of a tool sleeping 5 ms in flight: 105 collections per
# 20,000 calls (5.2 us of CPU a call) with Python's thresholds, 89 (3.0 us) after gc.freeze(), none
# with this threshold as well.
GC_THRESHOLD = 20_000


async def serve(
    worker: InteractionWorker,
    options: ServeOptions,
    *,
    ready: Callable[[str], None] = lambda url: None,
    stop: asyncio.Event | None = None,
    install_signal_handlers: bool = True,
    metrics_listening: Callable[[str], None] = lambda url: None,
    tracer_provider: TracerProvider | None = None,
) -> ConnectionStats:
    """Serve until SIGTERM/SIGINT (or `stop` is set), then shut down gracefully.

    Once subscribed, the process answers the NATS services protocol (`$SRV.PING|INFO|STATS`) as
    the service `options.name`. With `options.metrics_listen`, the HTTP side (`/metrics`,
    `/healthz`, `/readyz`) listens first, before the server is even reached, so that `/readyz`
    says why the worker is not ready yet; `metrics_listening` gets its URL (`http://HOST:PORT`).

    With `options.tracing`, every request is traced (docs/tracing.md) with `tracer_provider`, or
    without one with the SDK's provider that the OTEL_* environment variables describe.

    Graceful shutdown: `/readyz` turns 503 and discovery stops answering, then stop taking
    messages (a message already received is never dropped), let running calls finish within
    `shutdown_grace`, cancel the rest (WORKER_SHUTDOWN), refuse what had not started
    (SHUTTING_DOWN), close sinks, drain the connection, stop the embedded server, which the
    terminal's Ctrl-C does not reach (`EmbeddedNatsServer`), and last the HTTP side.

    Raises:
        ServeError: `options.name` is not a service name, `metrics_listen` cannot be listened on,
            or the worker cannot start (the connection, a required MCP server, the ledger).
        ConfigurationError: `options.tracing` without the `otel` extra installed, or the
            sandbox's workspace inside the data directory.
    """
    if SERVICE_NAME.fullmatch(options.name) is None:
        raise ServeError(
            "nats.name must be letters, digits, - or _ (it is also the NATS service name)"
        )
    _protect(worker, options)
    stop = stop or asyncio.Event()
    # A second signal: the calls still running are cancelled now.
    hurry = asyncio.Event()
    stats = ConnectionStats()
    loop = asyncio.get_running_loop()
    async with contextlib.AsyncExitStack() as stack:
        if install_signal_handlers:
            # First, and removed last: a signal while the embedded server starts, or during the
            # shutdown below, must not kill the process with its default action and leave the
            # nats-server child running. A signal during start-up stops the worker once the
            # embedded server has started (bounded), or at once while connecting (unbounded).

            def on_signal() -> None:
                (hurry if stop.is_set() else stop).set()

            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, on_signal)
                stack.callback(loop.remove_signal_handler, signum)
        monitor = None
        service_metadata: dict[str, str] = {}
        if options.metrics_listen is not None:
            monitor, metrics_url = await _monitor(worker, options.metrics_listen)
            stack.push_async_callback(monitor.stop)
            _LOGGER.info("metrics and health on %s", metrics_url)
            service_metadata["metrics"] = metrics_url
            metrics_listening(metrics_url)
        tracer_provider = _tracer_provider(options, tracer_provider, stack)
        url = options.url
        connect_options = dict(options.connect_options)
        if url is None:
            embedded = EmbeddedNatsServer(
                options.data_dir,
                port=options.port,
                websocket=options.websocket,
                browsers=options.browsers,
            )
            await embedded.start()
            stack.push_async_callback(embedded.stop)
            url = embedded.url
            connect_options.update(embedded.credentials)
            if embedded.websocket_url is not None:
                _LOGGER.info(
                    "browsers on %s as the user %s, whose password is in %s",
                    embedded.websocket_url,
                    UI_USER,
                    ui_token_path(options.data_dir),
                )
        client = await connect_unless_stopped(
            url, with_connect_options(options, connect_options), stats, stop
        )
        if client is None:
            _LOGGER.info("stopped while connecting")
            return stats
        stack.push_async_callback(close, client, stats)
        if monitor is not None:
            monitor.state.client = client
        # Now that the server's max_payload is known, before anything subscribes (wire.md 1).
        check_command_limits(worker.tools, client.max_payload)
        # One set of binding options, whichever binding serves.
        bound = BindingOptions(
            prefix=options.prefix,
            queue=options.queue,
            reply_prefixes=options.reply_prefixes,
            account_inboxes=options.account_inboxes,
            tool_timeout=options.tool_timeout,
            max_pending=options.max_pending,
            idempotency=options.idempotency,
        )
        binding: NatsBinding | DurableBinding
        if options.durable is not None:
            binding = worker.durable_binding(
                client, bound, durable=options.durable, tracer_provider=tracer_provider
            )
        else:
            binding = worker.nats_binding(
                client, bound, tracer_provider=tracer_provider
            )
        if monitor is not None:
            binding.handler.measure()  # before the first message
            monitor.state.binding = binding
        stack.push_async_callback(worker.aclose)
        try:
            await worker.astart(client)
        except McpClientError as error:  # a required MCP server cannot be reached
            raise ServeError(str(error)) from None
        await binding.start()
        discovery = Discovery(
            client,
            name=options.name,
            endpoints=binding.served_endpoints(),
            metadata=service_metadata,
            reply_prefixes=options.reply_prefixes,
        )
        stack.push_async_callback(discovery.stop)
        await discovery.start()
        if monitor is not None:
            monitor.state.subscribed = True
        if not stop.is_set():
            ready(url)
        await stop.wait()
        _say_shutting_down(
            binding.pending, options.shutdown_grace, install_signal_handlers
        )
        if monitor is not None:
            monitor.state.draining = True
        await discovery.stop()
        await _stop_binding(binding, options.shutdown_grace, hurry)
    return stats


def _protect(worker: InteractionWorker, options: ServeOptions) -> None:
    """The secrets this process writes or reads out of every tool's reach (docs/tools.md): the
    embedded server's data directory (its token and configuration), a creds file, and the
    processes' environments."""
    protected = worker.sandbox.protected
    protected.add(PROCESS_FILES)
    if options.url is None:
        protected.add(options.data_dir)
    credentials = options.connect_options.get("user_credentials")
    if isinstance(credentials, str | os.PathLike):
        protected.add(credentials)
    worker.sandbox.check_workspace()


def _say_shutting_down(pending: int, grace: float, signals: bool) -> None:
    if not pending:
        _LOGGER.info("shutting down")
        return
    again = " (a second Ctrl-C or SIGTERM cancels them now)" if signals else ""
    _LOGGER.info(
        "shutting down: waiting up to %s for %d call%s in flight%s",
        format_duration(grace),
        pending,
        "" if pending == 1 else "s",
        again,
    )


async def _stop_binding(
    binding: "NatsBinding | DurableBinding", grace: float, hurry: asyncio.Event
) -> None:
    """`binding.stop(grace)`, cut short when `hurry` is set: what still runs is cancelled at once
    (answered WORKER_SHUTDOWN, as at the end of the grace)."""
    stopping = asyncio.ensure_future(binding.stop(grace))
    hurrying = asyncio.ensure_future(hurry.wait())
    try:
        await asyncio.wait({stopping, hurrying}, return_when=asyncio.FIRST_COMPLETED)
        if not stopping.done():
            _LOGGER.info("cancelling the %d call(s) still in flight", binding.pending)
            # A second stop with no grace cancels what the first one still waits for.
            await binding.stop(0)
    finally:
        hurrying.cancel()
    await stopping


async def _monitor(worker: InteractionWorker, listen: str) -> tuple["Monitor", str]:
    """The HTTP side, listening, and its URL.

    Raises:
        ServeError: `listen` is not HOST:PORT, or cannot be listened on.
    """
    # Imported here, only when metrics are on: Starlette, uvicorn and prometheus_client take
    # about 0.3 s to import, which every other command of the CLI would pay (monitoring/__init__).
    from ..monitoring import Monitor, ServiceState

    address = listen_address(listen)
    if isinstance(address, Rule):
        raise ServeError(f"metrics.listen {address.text}")
    monitor = Monitor(ServiceState(worker))
    return monitor, await monitor.start(*address)


def _tracer_provider(
    options: ServeOptions,
    given: TracerProvider | None,
    stack: contextlib.AsyncExitStack,
) -> TracerProvider | None:
    """With `options.tracing`, the provider given, else the SDK's from the OTEL_* variables, shut
    down (its last spans exported) on the way out; None with tracing off, whatever was given.

    Raises:
        ConfigurationError: tracing is on and the `otel` extra is not installed.
    """
    if not options.tracing:
        return None
    if given is not None:
        return given
    built = tracer_provider_from_environment(os.environ, options.name)
    # In a thread: exporting the last batch blocks for as long as the collector takes.
    stack.push_async_callback(asyncio.to_thread, built.shutdown)
    return built


def run(
    worker: InteractionWorker,
    options: ServeOptions,
    *,
    loop: event_loop.LoopName = "auto",
    ready: Callable[[str], None] = lambda url: None,
) -> ConnectionStats:
    """`serve` as a whole process's work, as `interaction-worker run` does: on `loop` (see
    `event_loop.run`), until SIGTERM or SIGINT.

    Once serving, what start-up allocated (modules, schemas, configuration, connections) is moved out
    of the garbage collector's generations with `gc.freeze()`: it lives as long as the process, and
    otherwise every full collection would walk it again. With calls in flight the collector runs
    often (each call's tasks, frames and futures count as allocations until they end): the first
    generation is collected after `GC_THRESHOLD` net allocations instead of Python's 700, which a few
    hundred calls in flight cross and fall back from many times a second, each collection finding
    nothing (those objects end by reference counting).

    Raises:
        event_loop.LoopUnavailable: `loop` is `uvloop` and it is not installed.
    """

    def serving(url: str) -> None:
        gc.freeze()
        gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
        ready(url)

    return event_loop.run(serve(worker, options, ready=serving), loop)
