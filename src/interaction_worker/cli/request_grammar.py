"""The grammar of the commands that send a request to the serving workers and print its answer:
call, tools, mcp (discover, invoke, login, logout, status), deliver, command and react."""

import argparse
from typing import TYPE_CHECKING

from .arguments import (
    common_options,
    positive_float,
    positive_int,
)

if TYPE_CHECKING:
    from .parser import AddCommand, Handler, Parser


def add_request_commands(
    command: "AddCommand",
    commands: "argparse._SubParsersAction[Parser]",
    handlers: "dict[str, Handler]",
) -> None:
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
    common_options(call, client_side=True)
    call.set_defaults(format_help=call.format_help)

    tools = command("tools", "list the tools the serving worker offers")
    tools.add_argument("name", nargs="?", help="one tool, with its arguments")
    tools.add_argument(
        "--json",
        action="store_true",
        help="JSON lines even on a terminal (the default when piped)",
    )
    common_options(tools, client_side=True)

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
    common_options(discover, client_side=True)
    discover.set_defaults(handler=handlers["mcp discover"])
    invoke = mcp_commands.add_parser(
        "invoke", help="call one MCP tool", description="call one MCP tool"
    )
    invoke.add_argument("server", help="the MCP server's name")
    invoke.add_argument("tool", help="the tool's name (`mcp discover` lists them)")
    invoke.add_argument("arguments", nargs="*", help="k=v (a string) or k:=JSON")
    invoke.add_argument("--id", help="the call id (default: a fresh UUID)")
    common_options(invoke, client_side=True)
    invoke.set_defaults(handler=handlers["mcp invoke"])
    mcp_auth_commands(mcp_commands, handlers)

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
    common_options(deliver, client_side=True)

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
    common_options(command_, client_side=True)

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
        type=positive_int,
        default=8,
        metavar="N",
        help="at most N model calls (8)",
    )
    common_options(react, client_side=True)
    react.add_argument(
        "--timeout",
        type=positive_float,
        default=120.0,
        metavar="S",
        help="seconds for the whole flow (120)",
    )


def mcp_auth_commands(
    mcp_commands: "argparse._SubParsersAction[Parser]", handlers: "dict[str, Handler]"
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
    common_options(login, client_side=True)
    login.set_defaults(handler=handlers["mcp login"])
    logout = mcp_commands.add_parser(
        "logout",
        help="forget an MCP server's tokens",
        description="forget an MCP server's tokens, revoking them where it offers revocation",
    )
    logout.add_argument("server", help="the MCP server's name")
    common_options(logout, client_side=True)
    logout.set_defaults(handler=handlers["mcp logout"])
    status = mcp_commands.add_parser(
        "status",
        help="each OAuth server's sign-in state",
        description="each OAuth server's sign-in state (signed in, scopes, expiry; never a token)",
    )
    common_options(status, client_side=True)
    status.set_defaults(handler=handlers["mcp status"])
