"""The client commands: one request to the serving worker, its answer printed as JSON lines."""

import argparse
import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from ..client import InteractionClient, InteractionRequestError, ToolOutcome
from .output import UsageError, emit, is_terminal, table
from .parser import EXIT_FAILED, EXIT_OK

CLIENT_NAME = "interaction-worker-cli"
T = TypeVar("T")


def _ask(
    args: argparse.Namespace, work: Callable[[InteractionClient], Awaitable[T]]
) -> T:
    """Connect as the command line finds the worker, run `work`, and close."""

    async def session() -> T:
        async with await connect_client(args, CLIENT_NAME) as client:
            return await work(client)

    return asyncio.run(session())


async def connect_client(
    args: argparse.Namespace, name: str = CLIENT_NAME
) -> InteractionClient:
    """A client of the worker the command line finds (`--nats-url`, `--config`, `--data-dir`,
    `--prefix`, `--timeout`)."""
    return await InteractionClient.connect(
        args.nats_url,
        args.config,
        data_dir=args.data_dir,
        prefix=args.prefix,
        timeout=args.timeout,
        name=name,
    )


def refused(error: InteractionRequestError) -> int:
    """An error reply, printed as the worker sent it."""
    printed: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.reason is not None:
        printed["reason"] = error.reason
    if error.path is not None:
        printed["path"] = error.path
    emit({"error": printed})
    return EXIT_FAILED


def parse_arguments(items: Sequence[str]) -> dict[str, Any]:
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


def _id(args: argparse.Namespace) -> str:
    """`--id`, or a fresh UUID when it is not given; given empty, it is a mistake, not a default."""
    if args.id is None:
        return str(uuid.uuid4())
    if not args.id:
        raise UsageError("--id must not be empty (leave it out for a fresh UUID)")
    return str(args.id)


def _tool_call(args: argparse.Namespace) -> dict[str, Any]:
    """The `call` object of `call` and `mcp invoke`: `--id` (or a fresh UUID), the tool, its arguments."""
    return {
        "id": _id(args),
        "name": args.tool,
        "arguments": parse_arguments(args.arguments),
    }


def call(args: argparse.Namespace) -> int:
    if args.help:
        if args.tool is None:
            print(args.format_help(), end="", flush=True)
            return EXIT_OK
        return _describe(args, args.tool)
    if args.tool is None:
        raise UsageError("call needs a TOOL (`interaction-worker tools` lists them)")
    call = _tool_call(args)
    try:
        outcome = _ask(
            args,
            lambda c: c.call_tool(call["name"], call["arguments"], call_id=call["id"]),
        )
    except InteractionRequestError as error:
        return refused(error)
    return _print_outcome(outcome)


def _print_outcome(outcome: ToolOutcome) -> int:
    emit(outcome.result.to_wire())
    emit(outcome.observation.to_wire())
    return EXIT_OK if outcome.result.status == "success" else EXIT_FAILED


def tools(args: argparse.Namespace) -> int:
    """A table on a terminal, one JSON definition per line otherwise."""
    try:
        found = _ask(args, lambda c: c.list_tools(args.name))
    except InteractionRequestError as error:
        return refused(error)
    definitions = [definition.to_wire() for definition in found]
    if args.json or not is_terminal():
        for definition in definitions:
            emit(definition)
    elif args.name is not None:
        print(tool_help(definitions[0]), flush=True)
    else:
        rows = [
            (d["name"], ",".join(d.get("effects") or ()), d.get("description") or "")
            for d in definitions
        ]
        print(table(("TOOL", "EFFECTS", "DESCRIPTION"), rows), flush=True)
    return EXIT_OK


def _describe(args: argparse.Namespace, name: str) -> int:
    try:
        (definition,) = _ask(args, lambda c: c.list_tools(name))
    except InteractionRequestError as error:
        raise UsageError(f"{name}: {error}") from None
    print(tool_help(definition.to_wire()), flush=True)
    return EXIT_OK


def tool_help(definition: Mapping[str, Any]) -> str:
    """One tool as `call TOOL --help` shows it: what it does and each argument."""
    name = definition["name"]
    lines = [f"usage: interaction-worker call {name} [k=v | k:=JSON]..."]
    if definition.get("description"):
        lines += ["", str(definition["description"])]
    if definition.get("effects"):
        lines.append(f"effects: {', '.join(definition['effects'])}")
    schema = definition.get("inputSchema") or {}
    properties: Mapping[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    if not properties:
        lines += ["", "arguments: none declared"]
        return "\n".join(lines)
    rows = []
    for argument, spec in properties.items():
        kind = _type_text(spec if isinstance(spec, Mapping) else {})
        if argument in required:
            kind += ", required"
        elif isinstance(spec, Mapping) and "default" in spec:
            kind += f", default {json.dumps(spec['default'])}"
        about = spec.get("description", "") if isinstance(spec, Mapping) else ""
        rows.append((f"  {argument}", kind, str(about)))
    lines += ["", table(("arguments:", "", ""), rows)]
    lines += [
        "",
        "k=v passes a string; k:=JSON any JSON value (k:=5, k:=true, k:='[\"a\"]').",
    ]
    return "\n".join(lines)


def _type_text(spec: Mapping[str, Any]) -> str:
    if "enum" in spec:
        return "one of " + "|".join(str(v) for v in spec["enum"])
    kind = spec.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(str(k) for k in kind)
    if kind == "array" and isinstance(spec.get("items"), Mapping):
        return f"array of {_type_text(spec['items'])}"
    return str(kind)


def mcp_discover(args: argparse.Namespace) -> int:
    try:
        found = _ask(args, lambda c: c.mcp_discover(args.server))
    except InteractionRequestError as error:
        return refused(error)
    emit(found.to_wire())
    return EXIT_OK


def mcp_invoke(args: argparse.Namespace) -> int:
    call = _tool_call(args)
    try:
        outcome = _ask(
            args,
            lambda c: c.mcp_invoke(
                args.server, call["name"], call["arguments"], call_id=call["id"]
            ),
        )
    except InteractionRequestError as error:
        return refused(error)
    emit({"operation": "invoke", "result": outcome.result.to_wire()})
    emit(outcome.observation.to_wire())
    return EXIT_OK if outcome.result.status == "success" else EXIT_FAILED


def deliver(args: argparse.Namespace) -> int:
    if args.text is not None:
        content: Any = args.text
    else:
        try:
            content = json.loads(args.content)
        except json.JSONDecodeError:
            raise UsageError("--content needs a JSON value") from None
    body: dict[str, Any] = {
        "deliveryId": _id(args),
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
    try:
        receipt = _ask(args, lambda c: c.deliver(body))
    except InteractionRequestError as error:
        return refused(error)
    emit(receipt.to_wire())
    return EXIT_OK if receipt.status == "accepted" else EXIT_FAILED


def command(args: argparse.Namespace) -> int:
    if args.catalog:
        if args.value is not None or args.id is not None:
            raise UsageError("command --catalog takes no JSON and no --id")
        try:
            catalog = _ask(args, lambda c: c.command_catalog())
        except InteractionRequestError as error:
            return refused(error)
        emit(catalog)
        return EXIT_OK
    if args.value is None:
        raise UsageError("command needs a JSON object (or --catalog)")
    try:
        value = json.loads(args.value)
    except json.JSONDecodeError:
        raise UsageError("command needs a JSON object, as one argument") from None
    if not isinstance(value, dict):
        raise UsageError("command needs a JSON object, as one argument")
    if args.id is not None and not args.id:
        raise UsageError(
            "--id must not be empty (leave it out and the worker makes one up)"
        )
    try:
        reply = _ask(args, lambda c: c.command(value, command_id=args.id))
    except InteractionRequestError as error:
        return refused(error)
    emit(reply)
    return EXIT_OK
