"""The command line: `interaction-worker run | call | mcp | deliver | schema | check-config`.

Output is JSON, one object per line. Exit codes: 0 success; 1 a failed call (an error reply, or a
result or receipt whose status is not success/accepted); 2 bad usage or configuration. Errors are
one line on stderr, without a traceback unless `--debug`.
"""

import argparse
import asyncio
import importlib
import json
import logging
import os
import sys
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

import yaml

from . import _cli_client as client
from . import service
from .app import build_worker, serve_options
from .asyncapi import ASYNCAPI_FILE, asyncapi_text
from .config import Settings, load_settings
from .embedded import EmbeddedServerError
from .errors import ConfigurationError, RegistrationError
from .event_loop import LOOP_NAMES, LoopUnavailable
from .schema import write_schemas
from .service import ServeError
from .subscribers import subject_key
from .worker import InteractionWorker

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad usage or configuration (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors as one line (the usage itself is `--help`)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see --help)\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
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
    except (client.ClientError, EmbeddedServerError, ServeError) as error:
        _fail(args, error)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_FAILED


def _fail(args: argparse.Namespace, error: Exception) -> None:
    if getattr(args, "debug", False):
        logging.getLogger("interaction_worker").exception("failed")
    lines = str(error).splitlines() or [type(error).__name__]
    for line in lines:
        print(f"interaction-worker: {line}", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="interaction-worker",
        description="Run an agent's tool calls, MCP requests and deliveries over NATS.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def common(sub: argparse.ArgumentParser, *, client_side: bool) -> None:
        sub.add_argument(
            "--config", type=Path, help="the YAML file (default: ./worker.yaml)"
        )
        sub.add_argument(
            "--nats-url", help="connect here instead of the configured server"
        )
        sub.add_argument(
            "--data-dir", type=Path, help="the embedded server's directory"
        )
        sub.add_argument("--debug", action="store_true", help="tracebacks on errors")
        if client_side:
            sub.add_argument(
                "--prefix", help="the subject prefix (default: the file's)"
            )
            sub.add_argument("--timeout", type=float, default=75.0, help="seconds (75)")

    run = commands.add_parser(
        "run", help="serve (starts an embedded nats-server without a URL)"
    )
    run.add_argument(
        "app", nargs="?", help="a worker built in code, as module:attribute"
    )
    run.add_argument(
        "--port", type=int, help="the embedded server's port (0: any free one)"
    )
    run.add_argument(
        "--loop",
        choices=LOOP_NAMES,
        default="auto",
        help="the event loop (auto: uvloop when installed, else asyncio)",
    )
    common(run, client_side=False)
    run.set_defaults(handler=_run)

    call = commands.add_parser(
        "call", help="send one tool call; print the result, then the observation"
    )
    call.add_argument("tool")
    call.add_argument("arguments", nargs="*", help="k=v (a string) or k:=JSON")
    call.add_argument("--id", help="the call id (default: a fresh UUID)")
    common(call, client_side=True)
    call.set_defaults(handler=_call)

    mcp = commands.add_parser("mcp", help="MCP over the bus")
    mcp_commands = mcp.add_subparsers(dest="mcp_command", required=True)
    discover = mcp_commands.add_parser(
        "discover", help="list the tools of one server or all"
    )
    discover.add_argument("--server")
    common(discover, client_side=True)
    discover.set_defaults(handler=_mcp_discover)
    invoke = mcp_commands.add_parser("invoke", help="call one MCP tool")
    invoke.add_argument("server")
    invoke.add_argument("tool")
    invoke.add_argument("arguments", nargs="*", help="k=v (a string) or k:=JSON")
    invoke.add_argument("--id", help="the call id (default: a fresh UUID)")
    common(invoke, client_side=True)
    invoke.set_defaults(handler=_mcp_invoke)

    deliver = commands.add_parser(
        "deliver", help="send one delivery; print the receipt"
    )
    deliver.add_argument("--id", help="the delivery id (default: a fresh UUID)")
    deliver.add_argument("--role", default="assistant")
    content = deliver.add_mutually_exclusive_group(required=True)
    content.add_argument("--text", help="the message text")
    content.add_argument("--content", help="the message content as JSON")
    deliver.add_argument(
        "--artifact", action="append", default=[], metavar="NAME=URI", help="repeatable"
    )
    common(deliver, client_side=True)
    deliver.set_defaults(handler=_deliver)

    schema = commands.add_parser(
        "schema", help="write the JSON Schemas of every payload"
    )
    schema.add_argument("--out", type=Path, default=Path("docs/schemas"))
    schema.add_argument("--debug", action="store_true")
    schema.set_defaults(handler=_schema)

    check = commands.add_parser(
        "check-config", help="validate a file; print the effective configuration"
    )
    check.add_argument("file", type=Path)
    check.add_argument("--debug", action="store_true")
    check.set_defaults(handler=_check_config)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(args.config, env=os.environ)


def _run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # the MCP SDK's HTTP client
    settings = _settings(args)
    if args.nats_url:
        settings = _replace_nats_url(settings, args.nats_url)
    if args.data_dir:
        settings = _replace_data_dir(settings, args.data_dir)
    if settings.durable.enabled:
        raise UsageError(
            "durable.enabled: durable mode is not available in this version"
        )
    code = _import_app(args.app) if args.app else None
    worker = build_worker(settings, code)
    options = serve_options(settings, os.environ, port=args.port)

    def ready(url: str) -> None:
        print(f"ready {url}", flush=True)

    try:
        service.run(worker, options, loop=args.loop, ready=ready)
    except LoopUnavailable as error:
        raise UsageError(f"--loop {args.loop}: {error}") from None
    return EXIT_OK


def _replace_nats_url(settings: Settings, url: str) -> Settings:
    return replace(settings, nats=replace(settings.nats, url=url))


def _replace_data_dir(settings: Settings, data_dir: Path) -> Settings:
    return replace(settings, data_dir=data_dir.resolve())


def _import_app(spec: str) -> InteractionWorker:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise UsageError(f"APP must be module:attribute, not {spec!r}")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise UsageError(f"cannot import {module_name}: {error}") from None
    value = getattr(module, attribute, None)
    if callable(value) and not isinstance(value, InteractionWorker):
        value = value()
    if not isinstance(value, InteractionWorker):
        raise UsageError(f"{spec} is not an InteractionWorker")
    return value


def _arguments(items: Sequence[str]) -> dict[str, Any]:
    """httpie style: `k=v` is a string, `k:=JSON` a JSON value."""
    arguments: dict[str, Any] = {}
    for item in items:
        name, json_sep, raw = item.partition(":=")
        if json_sep and "=" not in name:
            try:
                arguments[name] = json.loads(raw)
            except json.JSONDecodeError:
                raise UsageError(f"{name}:= needs a JSON value") from None
            continue
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"arguments are k=v or k:=JSON, not {item!r}")
        arguments[name] = value
    return arguments


def _emit(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False), flush=True)


async def _round_trip(
    args: argparse.Namespace, subject: str, body: dict[str, Any], events: list[str]
) -> client.Answer:
    target = client.resolve_target(
        _settings(args),
        os.environ,
        nats_url=args.nats_url,
        data_dir=args.data_dir,
        prefix=args.prefix,
    )
    connection = await client.connect(target)
    try:
        return await client.request(
            connection,
            subject.format(p=target.prefix),
            body,
            wait=args.timeout,
            events=[event.format(p=target.prefix) for event in events],
        )
    finally:
        await connection.close()


def _tool_call(args: argparse.Namespace) -> dict[str, Any]:
    """The `call` object of `call` and `mcp invoke`: `--id` (or a fresh UUID), the tool, its arguments."""
    return {
        "id": args.id or str(uuid.uuid4()),
        "name": args.tool,
        "arguments": _arguments(args.arguments),
    }


def _call(args: argparse.Namespace) -> int:
    call = _tool_call(args)
    observation = f"{{p}}.tool.observation.{subject_key(call['id'])}"
    answer = asyncio.run(
        _round_trip(args, "{p}.tool.call", {"call": call}, [observation])
    )
    return _print_result(answer, answer.reply)


def _print_result(answer: client.Answer, result: dict[str, Any]) -> int:
    _emit(answer.reply)
    if answer.is_error:
        return EXIT_FAILED
    for event in answer.events:
        _emit(event)
    return EXIT_OK if result.get("status") == "success" else EXIT_FAILED


def _mcp_discover(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"operation": "discover"}
    if args.server is not None:
        body["server"] = args.server
    answer = asyncio.run(_round_trip(args, "{p}.mcp.call", body, []))
    _emit(answer.reply)
    return EXIT_FAILED if answer.is_error else EXIT_OK


def _mcp_invoke(args: argparse.Namespace) -> int:
    call = _tool_call(args)
    body = {"operation": "invoke", "server": args.server, "call": call}
    observation = f"{{p}}.mcp.observation.{subject_key(call['id'])}"
    answer = asyncio.run(_round_trip(args, "{p}.mcp.call", body, [observation]))
    result = answer.reply.get("result", {}) if not answer.is_error else {}
    return _print_result(answer, result if isinstance(result, dict) else {})


def _deliver(args: argparse.Namespace) -> int:
    if args.text is not None:
        content: Any = args.text
    else:
        try:
            content = json.loads(args.content)
        except json.JSONDecodeError:
            raise UsageError("--content needs a JSON value") from None
    body: dict[str, Any] = {
        "deliveryId": args.id or str(uuid.uuid4()),
        "message": {"role": args.role, "content": content},
    }
    artifacts = []
    for item in args.artifact:
        name, sep, uri = item.partition("=")
        if not sep or not name or not uri:
            raise UsageError(f"--artifact is NAME=URI, not {item!r}")
        artifacts.append({"name": name, "reference": {"uri": uri}})
    if artifacts:
        body["artifacts"] = artifacts
    answer = asyncio.run(_round_trip(args, "{p}.output.deliver", body, []))
    _emit(answer.reply)
    if answer.is_error:
        return EXIT_FAILED
    return EXIT_OK if answer.reply.get("status") == "accepted" else EXIT_FAILED


def _schema(args: argparse.Namespace) -> int:
    for path in write_schemas(args.out):
        _emit({"wrote": str(path)})
    document = args.out / ASYNCAPI_FILE
    document.write_text(asyncapi_text(), encoding="utf-8")
    _emit({"wrote": str(document)})
    return EXIT_OK


def _check_config(args: argparse.Namespace) -> int:
    settings = load_settings(args.file, env=os.environ)
    sys.stdout.write(yaml.safe_dump(settings.effective(), sort_keys=False))
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
