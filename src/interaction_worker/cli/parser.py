"""The command line's grammar: every command, its arguments and options, and its help text.

docs/cli.md lists the same commands and options; a test holds the two together.
"""

import argparse
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NoReturn

from ..event_loop import LOOP_NAMES
from .arguments import (
    common_options,
    listen_at,
    port_number,
    positive_int,
)
from .recording_grammar import add_recording_commands
from .request_grammar import add_request_commands

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
Handler = Callable[[argparse.Namespace], int]
# Adds one command: its name, its help, and argparse's other keywords.
AddCommand = Callable[..., argparse.ArgumentParser]


class Parser(argparse.ArgumentParser):
    """argparse, with its usage errors as one line (the usage itself is `--help`)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see --help)\n")


def package_version() -> str:
    """The installed distribution's version (`unknown` when run from a tree not installed)."""
    try:
        return version("interaction-worker")
    except PackageNotFoundError:
        return "unknown"


def build_parser(handlers: dict[str, Handler]) -> Parser:
    """The parser; `handlers` maps each command (`mcp discover` for subcommands) to its function."""
    parser = Parser(
        prog="interaction-worker",
        description="Run an agent's tool calls, MCP requests and deliveries over NATS.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {package_version()}"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, **kwargs: Any) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = commands.add_parser(
            name, help=help, description=help, **kwargs
        )
        sub.set_defaults(handler=handlers[name])
        return sub

    run = command("run", "serve (starts an embedded nats-server without a URL)")
    run.add_argument(
        "app", nargs="?", help="a worker built in code, as module:attribute"
    )
    run.add_argument(
        "--port",
        type=port_number,
        metavar="N",
        help="the embedded server's port (0: any free one)",
    )
    run.add_argument(
        "--loop",
        choices=LOOP_NAMES,
        metavar="NAME",
        default="auto",
        help="the event loop: auto (uvloop when installed, else asyncio), asyncio or uvloop",
    )
    run.add_argument(
        "--metrics-listen",
        type=listen_at,
        metavar="ADDR",
        help="serve /metrics, /healthz and /readyz on HOST:PORT (port 0: any free one; "
        "default: the file's metrics.listen)",
    )
    run.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow the embedded server's WebSocket listener (nats.websocket) beyond loopback; "
        "it then needs INTERACTION_NATS_WS_CERT and INTERACTION_NATS_WS_KEY",
    )
    common_options(run, client_side=False)

    add_request_commands(command, commands, handlers)
    add_recording_commands(command)

    about = (
        "serve the operator console: a web page of the worker's live events, dead letters and "
        "deliveries, with a form that sends a call and a delivery"
    )
    console = command("console", about)
    console.add_argument(
        "--listen",
        type=listen_at,
        metavar="ADDR",
        help="HOST:PORT of the page (port 0: any free one; default: the file's "
        "console.listen, 127.0.0.1:8765)",
    )
    console.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --listen; the page then asks for the console's token "
        "(DATA_DIR/console-token)",
    )
    console.add_argument(
        "--history",
        type=positive_int,
        metavar="N",
        help="events kept for a page opened late, read first from the events stream "
        "(default: the file's console.history, 200)",
    )
    common_options(console, client_side=True)

    mcp_serve = command(
        "mcp-serve",
        "serve the fleet's tools to an MCP host: over stdio, or streamable HTTP with --http",
    )
    mcp_serve.add_argument(
        "--http",
        type=listen_at,
        metavar="ADDR",
        help="serve streamable HTTP at HOST:PORT/mcp instead of stdio (port 0: any free one)",
    )
    mcp_serve.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --http; needs --tls-cert and --tls-key, and hosts then send "
        "the bearer token of DATA_DIR/gateway-token",
    )
    mcp_serve.add_argument(
        "--tls-cert",
        type=Path,
        metavar="FILE",
        help="the certificate chain (PEM), for https",
    )
    mcp_serve.add_argument(
        "--tls-key", type=Path, metavar="FILE", help="its private key (PEM)"
    )
    mcp_serve.add_argument(
        "--tool",
        action="append",
        default=[],
        metavar="NAME",
        help="offer this tool of the fleet, repeatable (default: every tool the workers list)",
    )
    mcp_serve.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="SERVER",
        help="also offer the tools of this MCP server behind the fleet, as SERVER__TOOL; "
        "repeatable",
    )
    common_options(mcp_serve, client_side=True)

    schema = command(
        "schema",
        "the JSON Schemas and the AsyncAPI document: one JSON document on stdout, "
        "or files in --out",
    )
    schema.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write the files to this directory (it replaces only files it wrote)",
    )
    schema.add_argument("--debug", action="store_true", help="tracebacks on errors")

    check = command(
        "check-config", "validate a file; print the effective configuration"
    )
    check.add_argument("file", type=Path, help="the YAML file to check")
    check.add_argument("--debug", action="store_true", help="tracebacks on errors")
    return parser
