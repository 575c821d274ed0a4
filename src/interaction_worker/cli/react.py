"""`interaction-worker react`: a ReAct flow against the serving worker, with a model behind an
OpenAI-compatible API (docs/flows.md 4)."""

import argparse
import asyncio
import os
import re
from collections.abc import Mapping

from ..client import InteractionClient, InteractionRequestError
from ..contracts import Message
from ..flows import (
    ActionDescriptor,
    ActionStep,
    McpTarget,
    OpenAICompatibleModel,
    ReactConstraints,
    ReactFlowInput,
    SampleOutput,
    run_react_flow,
)
from .output import UsageError, emit
from .parser import EXIT_FAILED, EXIT_OK
from .requests import connect_client, refused

CLIENT_NAME = "interaction-worker-react"
MODEL_URL_VARIABLE = "INTERACTION_MODEL_URL"


def react(args: argparse.Namespace) -> int:
    url = args.model_url or os.environ.get(MODEL_URL_VARIABLE)
    if not url:
        raise UsageError(
            f"react needs a model server: set {MODEL_URL_VARIABLE} or give --model-url URL"
        )
    targets = [_mcp_target(item) for item in args.mcp_action]
    try:
        model = OpenAICompatibleModel(url, args.model)
    except ValueError as error:
        raise UsageError(f"--model-url: {error}") from None
    return asyncio.run(_react(args, model, targets))


def _mcp_target(item: str) -> McpTarget:
    server, sep, tool = item.partition(":")
    if not sep or not server or not tool:
        raise UsageError(f"--mcp-action is SERVER:TOOL, not {item!r}")
    return McpTarget(server, tool)


async def _react(
    args: argparse.Namespace, model: OpenAICompatibleModel, targets: list[McpTarget]
) -> int:
    client = await connect_client(args, CLIENT_NAME)
    async with client, model:
        try:
            actions = await _actions(client, args.action, targets)
        except InteractionRequestError as error:
            return refused(error)
        try:
            flow_input = ReactFlowInput(
                messages=[Message(role="user", content=args.question)],
                actions=actions,
                constraints=ReactConstraints(
                    max_steps=args.max_steps, timeout=args.timeout
                ),
            )
        except ValueError as error:
            raise UsageError(str(error)) from None
        result = await run_react_flow(client, model, flow_input, on_step=_print_step)
    emit(result.to_dict())
    return EXIT_OK if result.status == "completed" else EXIT_FAILED


async def _actions(
    client: InteractionClient, tools: list[str], targets: list[McpTarget]
) -> list[ActionDescriptor]:
    """The named tools and MCP tools, described as the worker describes them; with none named,
    every tool the worker lists."""
    if not tools and not targets:
        return [
            _tool_action(d.name, d.description, d.input_schema)
            for d in await client.list_tools()
        ]
    actions = []
    for name in tools:
        (definition,) = await client.list_tools(name)
        actions.append(
            _tool_action(
                definition.name, definition.description, definition.input_schema
            )
        )
    for target in targets:
        found = await client.mcp_discover(target.server)
        capability = next(
            (c for c in found.capabilities if c.name == target.tool), None
        )
        if capability is None:
            raise UsageError(
                f"--mcp-action {target.server}:{target.tool}: the server offers no such tool"
            )
        actions.append(
            ActionDescriptor(
                name=_action_name(f"{target.server}_{target.tool}"),
                description=capability.description,
                input_schema=capability.input_schema,
                target=target,
            )
        )
    return actions


def _tool_action(
    name: str, description: str | None, schema: Mapping[str, object]
) -> ActionDescriptor:
    return ActionDescriptor(name=name, description=description, input_schema=schema)


def _action_name(text: str) -> str:
    """A name a chat-completions API accepts: `docs_search` for `docs:search`."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)[:64]


def _print_step(step: SampleOutput | ActionStep) -> None:
    if isinstance(step, SampleOutput):
        emit({"sample": step.to_dict()})
    else:
        emit(step.to_dict())
