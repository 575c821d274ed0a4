"""A ReAct run over the bus with a scripted model: no model server, no keys.

While a worker serves the repository (`make run` in the repository root), run from a second terminal:

    .venv/bin/python examples/react_agent.py

The model is a `ScriptedModel`: its first SAMPLE asks for two `read_text` actions (README.md and
pyproject.toml), which `run_react_flow` sends to the worker one after the other; its second SAMPLE
reads the two observations fed back to it and answers. Each step is printed as one JSON line
(`{"sample": …}`, `{"action": …, "observation": …}`), then the flow's result. Replace the
`ScriptedModel` by `OpenAICompatibleModel(base_url, model)` and the same flow runs with a real
model. Exit code 0 when the flow completed, 1 otherwise, 2 for bad usage or configuration.
"""

import argparse
import asyncio
import contextlib
import json
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from interaction_worker import ConfigurationError
from interaction_worker.client import (
    ConnectError,
    ConnectionLost,
    InteractionClient,
    NoWorkerError,
)
from interaction_worker.contracts import Message
from interaction_worker.flows import (
    ActionDescriptor,
    ActionRequest,
    ActionStep,
    ReactConstraints,
    ReactFlowInput,
    SampleOutput,
    ScriptedModel,
    Usage,
    run_react_flow,
)

FILES = ("README.md", "pyproject.toml")
READ_TEXT = ActionDescriptor(
    name="read_text",
    description="Read a workspace text file",
    input_schema={
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
)


def emit(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False), flush=True)


def read_both() -> SampleOutput:
    """SAMPLE 1: what a model would ask for, given the question and the `read_text` action."""
    return SampleOutput(
        Message(role="assistant", content="I will read both files."),
        tuple(
            ActionRequest(f"read-{n}", "read_text", {"path": path})
            for n, path in enumerate(FILES, start=1)
        ),
        Usage(40, 12, 52),
        "tool_calls",
    )


def answer(messages: Sequence[Message]) -> SampleOutput:
    """SAMPLE 2: an answer written from the two tool messages the flow fed back."""
    texts = {
        str((m.model_extra or {}).get("toolCallId")): m.content
        for m in messages
        if m.role == "tool"
    }
    readme, pyproject = (texts.get(f"read-{n}") for n in (1, 2))
    name = "an unnamed project"
    if isinstance(pyproject, str):
        with contextlib.suppress(tomllib.TOMLDecodeError, KeyError, TypeError):
            name = str(tomllib.loads(pyproject)["project"]["name"])
    title = readme.splitlines()[0] if isinstance(readme, str) and readme else "nothing"
    text = f"This is {name}; its README begins with {title!r}."
    return SampleOutput(
        Message(role="assistant", content=text), (), Usage(90, 20, 110), "stop"
    )


def print_step(step: SampleOutput | ActionStep) -> None:
    emit(
        {"sample": step.to_dict()} if isinstance(step, SampleOutput) else step.to_dict()
    )


async def agent(args: argparse.Namespace) -> bool:
    client = await InteractionClient.connect(
        args.nats_url,
        args.config,
        data_dir=args.data_dir,
        prefix=args.prefix,
        timeout=args.timeout,
        name="interaction-worker-react-example",
    )
    async with client:
        result = await run_react_flow(
            client,
            ScriptedModel([read_both(), answer]),
            ReactFlowInput(
                messages=[Message(role="user", content="What is this project?")],
                actions=[READ_TEXT],
                constraints=ReactConstraints(max_steps=3, timeout=args.timeout),
            ),
            on_step=print_step,
        )
    emit(result.to_dict())
    return result.status == "completed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A scripted ReAct run over the bus.")
    parser.add_argument(
        "--config", type=Path, help="the YAML file (the nearest worker.yaml)"
    )
    parser.add_argument(
        "--nats-url", help="connect here instead of the configured server"
    )
    parser.add_argument("--data-dir", type=Path, help="the embedded server's directory")
    parser.add_argument("--prefix", help="the subject prefix (default: the file's)")
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds for the flow"
    )
    args = parser.parse_args(argv)
    try:
        completed = asyncio.run(agent(args))
    except ConfigurationError as error:
        for line in str(error).splitlines():
            print(f"react_agent: {line}", file=sys.stderr)
        return 2
    except (ConnectError, ConnectionLost, NoWorkerError) as error:
        print(f"react_agent: {error}", file=sys.stderr)
        return 1
    return 0 if completed else 1


if __name__ == "__main__":
    raise SystemExit(main())
