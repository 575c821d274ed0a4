"""The command line's grammar: every command, its arguments and options, and its help text.

docs/cli.md lists the same commands and options; a test holds the two together.
"""

import argparse
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

from ..config.values import LISTEN_RULE, Rule, listen_address, parse_duration
from ..event_loop import LOOP_NAMES

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
Handler = Callable[[argparse.Namespace], int]
_NATS_SCHEMES = ("nats", "tls", "ws", "wss")


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


def _listen_address(value: str) -> str:
    if isinstance(listen_address(value), Rule):
        raise argparse.ArgumentTypeError(LISTEN_RULE.removesuffix(", or null"))
    return value


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError("must be a whole number of at least 1")
    return number


def _port(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(
            "must be a port from 0 to 65535 (0: any free one)"
        )
    return number


def _positive_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not 0 < number < float("inf"):
        raise argparse.ArgumentTypeError("must be a number above 0")
    return number


def _duration(value: str) -> float:
    seconds = parse_duration(value)
    if isinstance(seconds, Rule):
        raise argparse.ArgumentTypeError(seconds.text)
    return seconds


FAMILIES = ("tool", "mcp", "output", "command", "dead")


def _families(value: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in value.split(","))
    unknown = [name for name in names if name not in FAMILIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{', '.join(unknown) or value!r}: the families are {','.join(FAMILIES)}"
        )
    return names


def _common(
    sub: argparse.ArgumentParser,
    *,
    client_side: bool,
    prefix_help: str = "the subject prefix (default: the file's)",
) -> None:
    sub.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="the YAML file (default: the nearest worker.yaml, if any)",
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
        sub.add_argument("--prefix", metavar="P", help=prefix_help)
        sub.add_argument(
            "--timeout",
            type=_positive_float,
            default=75.0,
            metavar="S",
            help="seconds to wait (75)",
        )


def _mcp_auth_commands(
    mcp_commands: "argparse._SubParsersAction[Parser]", handlers: dict[str, Handler]
) -> None:
    """`mcp login`, `mcp logout`, `mcp status` (docs/configuration.md, MCP servers behind OAuth)."""
    login = mcp_commands.add_parser(
        "login",
        help="sign in to an MCP server behind OAuth",
        description="sign in to an MCP server behind OAuth: the authorization URL is printed "
        "on stderr, the redirect taken on the loopback `redirect` (5 minutes at most)",
    )
    login.add_argument("server", help="the MCP server's name")
    how = login.add_mutually_exclusive_group()
    how.add_argument("--open", action="store_true", help="open the URL in a browser")
    how.add_argument(
        "--no-browser",
        action="store_true",
        help="also read the redirect URL pasted back from a browser elsewhere",
    )
    _common(login, client_side=True)
    login.set_defaults(handler=handlers["mcp login"])
    logout = mcp_commands.add_parser(
        "logout",
        help="forget an MCP server's tokens",
        description="forget an MCP server's tokens, revoking them where it offers revocation",
    )
    logout.add_argument("server", help="the MCP server's name")
    _common(logout, client_side=True)
    logout.set_defaults(handler=handlers["mcp logout"])
    status = mcp_commands.add_parser(
        "status",
        help="each OAuth server's sign-in state",
        description="each OAuth server's sign-in state (signed in, scopes, expiry; never a token)",
    )
    _common(status, client_side=True)
    status.set_defaults(handler=handlers["mcp status"])


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
        type=_port,
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
        type=_listen_address,
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
    _mcp_auth_commands(mcp_commands, handlers)

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

    command_ = command(
        "command",
        "send one command of the served command protocol; print its reply",
    )
    command_.add_argument(
        "value", nargs="?", metavar="JSON", help="the command object, as JSON"
    )
    command_.add_argument(
        "--catalog",
        action="store_true",
        help="print the commands served and their model schema instead",
    )
    command_.add_argument(
        "--id",
        metavar="ID",
        help="the Interaction-Command-Id (default: the worker makes one up)",
    )
    _common(command_, client_side=True)

    react = command(
        "react",
        "run a ReAct flow: a model behind an OpenAI-compatible API acts through the "
        "serving worker; print each step, then the result",
        conflict_handler="resolve",  # its --timeout bounds the whole flow
    )
    react.add_argument("question", help="the user's message")
    react.add_argument(
        "--model", required=True, metavar="NAME", help="the model's name on the server"
    )
    react.add_argument(
        "--model-url",
        metavar="URL",
        help="the API's base URL, such as http://127.0.0.1:8080/v1 "
        "(default: INTERACTION_MODEL_URL); the key is INTERACTION_MODEL_API_KEY",
    )
    react.add_argument(
        "--action",
        action="append",
        default=[],
        metavar="TOOL",
        help="offer this tool, repeatable (default: every tool the worker lists)",
    )
    react.add_argument(
        "--mcp-action",
        action="append",
        default=[],
        metavar="SERVER:TOOL",
        help="offer this MCP server's tool, repeatable",
    )
    react.add_argument(
        "--max-steps",
        type=_positive_int,
        default=8,
        metavar="N",
        help="at most N model calls (8)",
    )
    _common(react, client_side=True)
    react.add_argument(
        "--timeout",
        type=_positive_float,
        default=120.0,
        metavar="S",
        help="seconds for the whole flow (120)",
    )

    record = command(
        "record",
        "record the bus traffic of a prefix to a file (JSON Lines), for replay in tests",
    )
    record.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="FILE",
        help="the recording to write, - for stdout; an existing FILE is replaced only by a "
        "recording that ends well",
    )
    record.add_argument(
        "--subject",
        action="append",
        default=[],
        metavar="SUBJ",
        help="a subject to record, repeatable (default: P.>)",
    )
    record.add_argument(
        "--count", type=_positive_int, metavar="N", help="stop after N messages"
    )
    record.add_argument(
        "--duration",
        type=_duration,
        metavar="D",
        help="stop after D (a duration such as 500ms, 30s, 15m, 1h or 2d)",
    )
    record.add_argument(
        "--stream",
        metavar="NAME",
        help="read history from this JetStream stream instead, then stop",
    )
    record.add_argument(
        "--since",
        metavar="TIME",
        help="with --stream: from TIME (RFC 3339, or a duration ago such as 15m)",
    )
    _common(record, client_side=True)

    replay = command(
        "replay",
        "publish a recording's events again, or with --requests send its requests to the "
        "serving worker and compare the outcomes",
    )
    replay.add_argument("file", type=Path, help="a recording made by `record`")
    replay.add_argument(
        "--speed",
        type=_positive_float,
        metavar="X",
        help="events: keep the recorded gaps divided by X (default: as fast as possible)",
    )
    replay.add_argument(
        "--only",
        type=_families,
        metavar="KINDS",
        help="events: only these families, comma-separated: tool,mcp,output,command,dead",
    )
    replay.add_argument(
        "--requests",
        action="store_true",
        help="send the recorded requests instead of publishing the events",
    )
    replay.add_argument(
        "--compare",
        action="store_true",
        help="requests: compare each outcome with the recorded one; differences on stdout",
    )
    replay.add_argument(
        "--id-suffix",
        metavar="S",
        help="requests: append S to every call and delivery id (a ledger runs them afresh)",
    )
    replay.add_argument(
        "--concurrency",
        type=_positive_int,
        default=16,
        metavar="N",
        help="requests: at most N in flight (16)",
    )
    replay.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="PATH",
        help="requests: a field left out of the comparison, dotted, * for any key "
        "(metadata.*.at); repeatable",
    )
    replay.add_argument(
        "--no-progress",
        action="store_true",
        help="requests: no progress bar, even on a terminal",
    )
    _common(
        replay,
        client_side=True,
        prefix_help="publish under this prefix (default: the recording's)",
    )

    about = (
        "serve the operator console: a web page of the worker's live events, dead letters and "
        "deliveries, with a form that sends a call and a delivery"
    )
    console = command("console", about)
    console.add_argument(
        "--listen",
        type=_listen_address,
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
        type=_positive_int,
        metavar="N",
        help="events kept for a page opened late, read first from the events stream "
        "(default: the file's console.history, 200)",
    )
    _common(console, client_side=True)

    mcp_serve = command(
        "mcp-serve",
        "serve the fleet's tools to an MCP host: over stdio, or streamable HTTP with --http",
    )
    mcp_serve.add_argument(
        "--http",
        type=_listen_address,
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
    _common(mcp_serve, client_side=True)

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
