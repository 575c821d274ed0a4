"""`interaction-worker mcp-serve`: the fleet's tools as an MCP server (docs/gateway.md), over stdio
(nothing but MCP on stdout; logs on stderr) or, with `--http`, over streamable HTTP until Ctrl-C."""

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from .. import event_loop
from ..client import InteractionClient, find_project, resolve_target
from ..config import listen_address
from ..config.values import Rule
from ..gateway import (
    BusLink,
    Gateway,
    GatewayOptions,
    HttpOptions,
    ListenError,
    RemoteNotAllowed,
    check_remote,
    check_tls,
    gateway_token,
    serve_http,
    serve_stdio,
)
from .output import UsageError
from .parser import EXIT_FAILED, EXIT_OK

CLIENT_NAME = "interaction-worker-gateway"


def mcp_serve(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    project = find_project(args.config, env=os.environ, data_dir=args.data_dir)
    http = _http_options(args, project.data_dir) if args.http is not None else None
    if http is None and (args.allow_remote or args.tls_cert or args.tls_key):
        raise UsageError("--allow-remote, --tls-cert and --tls-key go with --http")
    # Resolved once now, so that a bad configuration or environment is a usage error at start.
    resolve_target(project, os.environ, nats_url=args.nats_url, prefix=args.prefix)

    async def connect() -> InteractionClient:
        # Found afresh each time: a restarted embedded server may have a new port.
        return await InteractionClient.connect(
            args.nats_url,
            args.config,
            data_dir=args.data_dir,
            prefix=args.prefix,
            timeout=args.timeout,
            name=CLIENT_NAME,
        )

    options = GatewayOptions(
        tools=tuple(args.tool), servers=tuple(args.mcp), timeout=args.timeout
    )
    # The serving loop of `run` (uvloop where installed): a call's wake-ups cost less there.
    return event_loop.run(_serve(Gateway(BusLink(connect), options), http))


def _http_options(args: argparse.Namespace, data_dir: Path) -> HttpOptions:
    parsed = listen_address(args.http)
    if isinstance(parsed, Rule):
        raise UsageError(f"--http {parsed.text}")
    host, port = parsed
    if (args.tls_cert is None) != (args.tls_key is None):
        raise UsageError("--tls-cert and --tls-key go together")
    try:
        check_remote(
            host, allow_remote=args.allow_remote, tls=args.tls_cert is not None
        )
        if args.tls_cert is not None:
            check_tls(args.tls_cert, args.tls_key)
    except (RemoteNotAllowed, ListenError) as error:
        raise UsageError(str(error)) from None
    token = None
    if args.allow_remote:
        token, token_file = gateway_token(data_dir)
        print(
            f"hosts send Authorization: Bearer <the token in {token_file}>",
            file=sys.stderr,
            flush=True,
        )
    return HttpOptions(
        host=host,
        port=port,
        token=token,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
    )


async def _serve(gateway: Gateway, http: HttpOptions | None) -> int:
    try:
        if http is None:
            await serve_stdio(gateway)
            return EXIT_OK
        return await _serve_http(gateway, http)
    finally:
        await gateway.link.aclose()


async def _serve_http(gateway: Gateway, http: HttpOptions) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    gone: list[BrokenPipeError] = []

    def ready(url: str) -> None:
        try:
            print(f"mcp {url}", flush=True)
        except BrokenPipeError as error:
            # The reader of stdout went away: stop serving first, then end as the CLI does.
            gone.append(error)
            stop.set()

    try:
        await serve_http(gateway, http, ready=ready, stop=stop)
    except ListenError as error:
        print(f"interaction-worker: {error}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    if gone:
        raise gone[0]
    return EXIT_OK
