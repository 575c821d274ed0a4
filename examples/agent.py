"""A scripted agent loop over the bus: no model, no keys.

While a worker serves the repository (`make run` in the repository root), run from a second terminal:

    python examples/agent.py        # the virtualenv's python: .venv/bin/python examples/agent.py

It uses the package's `InteractionClient`, which connects the way `interaction-worker call` does
(`--nats-url`, else `INTERACTION_NATS_URL`, else the file's `nats.url`, else the embedded server recorded
in the data directory, the nearest `.interaction/`, else nats://127.0.0.1:4222), from any directory of
the project. Then it acts and observes as an agent would: it reads `README.md` and `pyproject.toml`
through `read_text` tool calls, printing each observation, and delivers a short
summary through `interaction.output.deliver`, printing the receipt. Every printed line is one JSON
object. Exit code 0 when every step succeeded, 1 otherwise, 2 for bad usage or configuration.
"""

import argparse
import asyncio
import json
import sys
import tomllib
import uuid
from pathlib import Path
from typing import Any

from interaction_worker import ConfigurationError
from interaction_worker.client import (
    ConnectError,
    ConnectionLost,
    InteractionClient,
    InteractionRequestError,
    NoWorkerError,
)

FILES = ("README.md", "pyproject.toml")


class StepFailed(Exception):
    """One step of the loop did not succeed; the message is one line for stderr."""


def emit(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False), flush=True)


async def read_file(client: InteractionClient, path: str) -> str:
    """ACT then OBSERVE: one `read_text` call; prints its observation and returns the text."""
    result, observation = await client.call_tool(
        "read_text", path=path, call_id=f"agent-{uuid.uuid4()}"
    )
    emit(observation.to_wire())
    if result.status != "success" or not isinstance(result.content, str):
        code = result.error.code if result.error is not None else ""
        raise StepFailed(f"read_text {path}: {result.status} {code}".strip())
    return result.content


def lines(count: int) -> str:
    return "1 line" if count == 1 else f"{count} lines"


def summarize(texts: dict[str, str]) -> str:
    """What a model would write; here, counted and parsed."""
    try:
        name = tomllib.loads(texts["pyproject.toml"])["project"]["name"]
    except (tomllib.TOMLDecodeError, KeyError, TypeError):
        name = "an unnamed project"
    counts = ", ".join(
        f"{path} has {lines(len(text.splitlines()))}" for path, text in texts.items()
    )
    return f"This is {name}: {counts}."


async def agent(args: argparse.Namespace) -> None:
    client = await InteractionClient.connect(
        args.nats_url,
        args.config,
        data_dir=args.data_dir,
        prefix=args.prefix,
        timeout=args.timeout,
        name="interaction-worker-agent-example",
    )
    async with client:
        texts = {path: await read_file(client, path) for path in FILES}
        receipt = await client.deliver(
            {
                "deliveryId": f"agent-{uuid.uuid4()}",
                "message": {"role": "assistant", "content": summarize(texts)},
            }
        )
        emit(receipt.to_wire())
        if receipt.status != "accepted":
            raise StepFailed(f"delivery {receipt.status}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A scripted agent loop over the bus.")
    parser.add_argument(
        "--config", type=Path, help="the YAML file (the nearest worker.yaml)"
    )
    parser.add_argument(
        "--nats-url", help="connect here instead of the configured server"
    )
    parser.add_argument("--data-dir", type=Path, help="the embedded server's directory")
    parser.add_argument("--prefix", help="the subject prefix (default: the file's)")
    parser.add_argument("--timeout", type=float, default=75.0, help="seconds per step")
    args = parser.parse_args(argv)
    try:
        asyncio.run(agent(args))
    except ConfigurationError as error:
        for line in str(error).splitlines():
            print(f"agent: {line}", file=sys.stderr)
        return 2
    except (
        StepFailed,
        ConnectError,
        ConnectionLost,
        NoWorkerError,
        InteractionRequestError,
        TimeoutError,
    ) as error:
        print(f"agent: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
