"""The command line's grammar: every command, its arguments and options, and its help text.

docs/cli.md lists the same commands and options; a test holds the two together.
"""

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

from ..event_loop import LOOP_NAMES

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
Handler = Callable[[argparse.Namespace], int]
_NATS_SCHEMES = ("nats", "tls", "ws", "wss")


class Parser(argparse.ArgumentParser):
    """argparse, with its usage errors as one line (the usage itself is `--help`)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see --help)\n")


def _nats_url(value: str) -> str:
    """A usage error for what cannot be a server's URL, before anything tries to dial it."""
    try:
        parts = urlsplit(value)
        valid = parts.scheme in _NATS_SCHEMES and bool(parts.hostname)
        _ = parts.port
    except ValueError:
        valid = False
    if not valid or any(c.isspace() for c in value):
        raise argparse.ArgumentTypeError("must be a URL such as nats://127.0.0.1:4222")
    return value


def _common(sub: argparse.ArgumentParser, *, client_side: bool) -> None:
    where = "the nearest worker.yaml" if client_side else "./worker.yaml"
    sub.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help=f"the YAML file (default: {where}, if any)",
    )
    sub.add_argument(
        "--nats-url",
        metavar="URL",
        type=_nats_url,
        help="connect here instead of the configured server",
    )
    sub.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        help="the embedded server's directory"
        + (" (default: the nearest .interaction/)" if client_side else ""),
    )
    sub.add_argument("--debug", action="store_true", help="tracebacks on errors")
    if client_side:
        sub.add_argument(
            "--prefix", metavar="P", help="the subject prefix (default: the file's)"
        )
        sub.add_argument(
            "--timeout",
            type=float,
            default=75.0,
            metavar="S",
            help="seconds to wait (75)",
        )


def build_parser(handlers: dict[str, Handler]) -> Parser:
    """The parser; `handlers` maps each command (`mcp discover` for subcommands) to its function."""
    parser = Parser(
        prog="interaction-worker",
        description="Run an agent's tool calls, MCP requests and deliveries over NATS.",
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
        type=int,
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
    _common(run, client_side=False)

    # Its own -h: `call TOOL --help` describes the tool, `call --help` the command.
    call = command(
        "call",
        "send one tool call; print the result, then the observation",
        add_help=False,
    )
    call.add_argument("tool", nargs="?", help="the tool's name (`tools` lists them)")
    call.add_argument("arguments", nargs="*", help="k=v (a string) or k:=JSON")
    call.add_argument("--id", metavar="ID", help="the call id (default: a fresh UUID)")
    call.add_argument(
        "-h",
        "--help",
        action="store_true",
        help="show this help, or with TOOL the tool's arguments",
    )
    _common(call, client_side=True)
    call.set_defaults(format_help=call.format_help)

    tools = command("tools", "list the tools the serving worker offers")
    tools.add_argument("name", nargs="?", help="one tool, with its arguments")
    tools.add_argument(
        "--json",
        action="store_true",
        help="JSON lines even on a terminal (the default when piped)",
    )
    _common(tools, client_side=True)

    mcp = commands.add_parser(
        "mcp", help="MCP over the bus", description="MCP over the bus"
    )
    mcp_commands = mcp.add_subparsers(
        dest="mcp_command", required=True, metavar="COMMAND"
    )
    discover = mcp_commands.add_parser(
        "discover",
        help="list the tools of one server or all",
        description="list the tools of one server or all",
    )
    discover.add_argument("--server", metavar="NAME", help="one server (default: all)")
    _common(discover, client_side=True)
    discover.set_defaults(handler=handlers["mcp discover"])
    invoke = mcp_commands.add_parser(
        "invoke", help="call one MCP tool", description="call one MCP tool"
    )
    invoke.add_argument("server", help="the MCP server's name")
    invoke.add_argument("tool", help="the tool's name (`mcp discover` lists them)")
    invoke.add_argument("arguments", nargs="*", help="k=v (a string) or k:=JSON")
    invoke.add_argument("--id", help="the call id (default: a fresh UUID)")
    _common(invoke, client_side=True)
    invoke.set_defaults(handler=handlers["mcp invoke"])

    deliver = command("deliver", "send one delivery; print the receipt")
    deliver.add_argument("--id", help="the delivery id (default: a fresh UUID)")
    deliver.add_argument(
        "--role",
        default="assistant",
        metavar="ROLE",
        help="the message role (assistant)",
    )
    content = deliver.add_mutually_exclusive_group(required=True)
    content.add_argument("--text", metavar="TEXT", help="the message text")
    content.add_argument(
        "--content", metavar="JSON", help="the message content as JSON"
    )
    deliver.add_argument(
        "--artifact", action="append", default=[], metavar="NAME=URI", help="repeatable"
    )
    _common(deliver, client_side=True)

    schema = command(
        "schema",
        "the JSON Schemas and the AsyncAPI document: one JSON document on stdout, "
        "or files in --out",
    )
    schema.add_argument(
        "--out", type=Path, metavar="DIR", help="write the files to this directory"
    )
    schema.add_argument("--debug", action="store_true", help="tracebacks on errors")

    check = command(
        "check-config", "validate a file; print the effective configuration"
    )
    check.add_argument("file", type=Path, help="the YAML file to check")
    check.add_argument("--debug", action="store_true", help="tracebacks on errors")
    return parser
