"""`interaction-worker console`: the operator console (docs/console.md), served until Ctrl-C."""

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import replace

from nats.aio.client import Client

from ..client import connect as connect_target
from ..client import find_project, resolve_target
from ..config import listen_address
from ..config.values import Rule
from ..console import (
    Console,
    FeedOptions,
    ListenError,
    RemoteNotAllowed,
    check_listen,
    console_token,
)
from ..console.bus import Disconnected
from .output import UsageError
from .parser import EXIT_FAILED, EXIT_OK

CLIENT_NAME = "interaction-worker-console"


def console(args: argparse.Namespace) -> int:
    project = find_project(args.config, env=os.environ, data_dir=args.data_dir)
    settings = project.settings
    listen = args.listen if args.listen is not None else settings.console.listen
    parsed = listen_address(listen)
    if isinstance(parsed, Rule):
        raise UsageError(f"--listen {parsed.text}")
    host, port = parsed
    try:
        check_listen(host, allow_remote=args.allow_remote)
    except RemoteNotAllowed as error:
        raise UsageError(str(error)) from None
    # Resolved once now, so that a bad configuration or environment is a usage error at start.
    first = resolve_target(
        project, os.environ, nats_url=args.nats_url, prefix=args.prefix
    )

    async def connect(on_disconnect: Disconnected) -> Client:
        # Found afresh each time: a restarted embedded server may have a new port.
        fresh = find_project(args.config, env=os.environ, data_dir=args.data_dir)
        target = resolve_target(
            fresh, os.environ, nats_url=args.nats_url, prefix=args.prefix
        )
        target = replace(
            target,
            options={**target.options, "inbox_prefix": settings.nats.inbox_prefix},
        )
        return await connect_target(
            target, name=CLIENT_NAME, disconnected_cb=on_disconnect
        )

    options = FeedOptions(
        prefix=first.prefix,
        delivery_subjects=tuple(
            sink.subject
            for sink in settings.output.sinks
            if sink.type == "nats" and sink.subject is not None
        ),
        events_stream=settings.durable.events_stream,
        history=args.history if args.history is not None else settings.console.history,
        inbox_prefix=settings.nats.inbox_prefix,
        timeout=args.timeout,
    )
    token = None
    if args.allow_remote:
        token, token_file = console_token(project.data_dir)
        print(
            f"token in {token_file} (paste it on /login)", file=sys.stderr, flush=True
        )
    return asyncio.run(_serve(Console(options, connect, token=token), host, port))


async def _serve(console: Console, host: str, port: int) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        url = await console.start(host, port)
    except ListenError as error:
        print(f"interaction-worker: {error}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    waiting = asyncio.ensure_future(stop.wait())
    serving = asyncio.ensure_future(console.wait())
    try:
        # Inside: a reader of stdout that went away (BrokenPipeError) still stops the console first.
        print(f"console {url}/", flush=True)
        await asyncio.wait({waiting, serving}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
        await console.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
    return EXIT_OK
