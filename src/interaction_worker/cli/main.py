"""The entry point: parse, run one command, and turn every failure into an exit code and one line.

Nothing heavy is imported here at module level: importing the package's command line (the client,
the configuration, pydantic) takes about a second, and a Ctrl-C during it must end the command as
one during the command does (exit code 130, nothing printed), which only `main` can see to.
"""

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence

Handler = Callable[[argparse.Namespace], int]

# What a shell reports for a process killed by SIGPIPE (128 + 13, `cmd | head -1`) and by SIGINT
# (128 + 2, Ctrl-C).
EXIT_BROKEN_PIPE = 141
EXIT_INTERRUPTED = 130


def _lazy(module: str, function: str) -> Handler:
    """A command's handler, imported when it runs: `call` need not load what `run` serves with
    (the MCP SDK, FastStream), which would cost a client command about a second of start-up."""

    def handler(args: argparse.Namespace) -> int:
        command = getattr(importlib.import_module(module, __package__), function)
        return int(command(args))

    return handler


HANDLERS: dict[str, Handler] = {
    "run": _lazy(".serve", "run"),
    "schema": _lazy(".serve", "schema"),
    "check-config": _lazy(".serve", "check_config"),
    "call": _lazy(".requests", "call"),
    "tools": _lazy(".requests", "tools"),
    "mcp discover": _lazy(".requests", "mcp_discover"),
    "mcp invoke": _lazy(".requests", "mcp_invoke"),
    "mcp login": _lazy(".mcp_auth", "login"),
    "mcp logout": _lazy(".mcp_auth", "logout"),
    "mcp status": _lazy(".mcp_auth", "status"),
    "deliver": _lazy(".requests", "deliver"),
    "command": _lazy(".requests", "command"),
    "react": _lazy(".react", "react"),
    "record": _lazy(".record", "record"),
    "replay": _lazy(".replay", "replay"),
    "console": _lazy(".console", "console"),
    "mcp-serve": _lazy(".gateway", "mcp_serve"),
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`| head -1`): end quietly, as other Unix tools do. Python would
        # report the same error again when it flushes stdout at exit, so stdout goes nowhere now.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        # Ctrl-C: the person asked for it, so nothing to say (the commands that stop on a
        # signal, `run`, `record` and `console`, handle it themselves and end normally).
        return EXIT_INTERRUPTED


def _main(argv: Sequence[str] | None) -> int:
    from ..client import ConnectError, ConnectionLost, NoWorkerError
    from ..embedded import EmbeddedServerError
    from ..errors import ConfigurationError, RegistrationError, ServeError
    from .output import UsageError
    from .parser import EXIT_FAILED, EXIT_USAGE, build_parser

    parser = build_parser(HANDLERS)
    # argparse stops collecting `k=v` arguments at the first option (`call grep --timeout 5
    # pattern=x`): the ones after it come back unrecognised and join the others.
    args, extras = parser.parse_known_args(argv)
    if extras:
        if not hasattr(args, "arguments") or any(e.startswith("-") for e in extras):
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
        args.arguments = [*args.arguments, *extras]
    try:
        return int(args.handler(args))
    except (UsageError, ConfigurationError, RegistrationError) as error:
        _fail(args, error)
        return EXIT_USAGE
    except (
        ConnectError,
        ConnectionLost,
        NoWorkerError,
        EmbeddedServerError,
        ServeError,
    ) as error:
        _fail(args, error)
        return EXIT_FAILED
    except (
        TimeoutError
    ) as error:  # no reply in time: the client's message names the subject
        _fail(args, error)
        return EXIT_FAILED


def _fail(args: argparse.Namespace, error: Exception) -> None:
    if getattr(args, "debug", False):
        logging.getLogger("interaction_worker").exception("failed")
    lines = str(error).splitlines() or [type(error).__name__]
    for line in lines:
        print(f"interaction-worker: {line}", file=sys.stderr)
