"""A scripted agent loop over the bus: no model, no keys.

While a worker serves the repository (`make run` in the repository root), run from a second terminal:

    python examples/agent.py        # the virtualenv's python: .venv/bin/python examples/agent.py

It connects the way `interaction-worker call` does (`--nats-url`, else `INTERACTION_NATS_URL`, else the
file's `nats.url`, else the embedded server recorded in the data directory, the nearest `.interaction/`, else
nats://127.0.0.1:4222), from any directory of the project, then acts and observes as an agent would: it reads `README.md` and
`pyproject.toml` through `read_text` tool calls, printing each observation, and delivers a short
summary through `interaction.output.deliver`, printing the receipt. Every printed line is one JSON
object. Exit code 0 when every step succeeded, 1 otherwise, 2 for bad usage or configuration.
"""

import argparse
import asyncio
import json
import os
import sys
import tomllib
import uuid
from pathlib import Path
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from interaction_worker import ConfigurationError
from interaction_worker.client import (
    ConnectError,
    Target,
    connect,
    find_project,
    resolve_target,
)
from interaction_worker.subscribers import subject_key

FILES = ("README.md", "pyproject.toml")
EVENT_WAIT = 5.0  # seconds to wait for an observation once the result has come


class StepFailed(Exception):
    """One step of the loop did not succeed; the message is one line for stderr."""


def resolve(args: argparse.Namespace) -> Target:
    """Where the worker is, found as the command line finds it (config.md section 3)."""
    project = find_project(args.config, env=os.environ, data_dir=args.data_dir)
    return resolve_target(
        project, os.environ, nats_url=args.nats_url, prefix=args.prefix
    )


def emit(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False), flush=True)


def error_of(reply: Msg) -> str | None:
    """The error of an error reply (NATS services convention), or None for an answer."""
    if not reply.headers or "Nats-Service-Error" not in reply.headers:
        return None
    try:
        error = json.loads(reply.data)["error"]
        return f"{error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return reply.headers["Nats-Service-Error"]


async def ask(
    client: Client, subject: str, body: dict[str, Any], wait: float
) -> dict[str, Any]:
    try:
        reply = await client.request(subject, json.dumps(body).encode(), timeout=wait)
    except NoRespondersError:
        raise StepFailed(f"no worker is serving {subject}") from None
    except NatsTimeout:
        raise StepFailed(f"no reply on {subject} within {wait:g} s") from None
    error = error_of(reply)
    if error is not None:
        raise StepFailed(f"{subject}: {error}")
    answer: dict[str, Any] = json.loads(reply.data)
    return answer


async def read_file(
    client: Client, prefix: str, path: str, wait: float
) -> dict[str, Any]:
    """ACT then OBSERVE: one `read_text` call; prints its observation and returns its result."""
    call_id = f"agent-{uuid.uuid4()}"
    # Subscribe to the observation before sending the call, or it could be missed.
    observations = await client.subscribe(
        f"{prefix}.tool.observation.{subject_key(call_id)}"
    )
    try:
        result = await ask(
            client,
            f"{prefix}.tool.call",
            {"call": {"id": call_id, "name": "read_text", "arguments": {"path": path}}},
            wait,
        )
        try:
            observation: dict[str, Any] = json.loads(
                (await observations.next_msg(timeout=EVENT_WAIT)).data
            )
        except NatsTimeout:
            raise StepFailed(f"no observation of {path}") from None
    finally:
        await observations.unsubscribe()
    emit(observation)
    if result.get("status") != "success" or not isinstance(result.get("content"), str):
        error = result.get("error") or {}
        raise StepFailed(
            f"read_text {path}: {result.get('status')} {error.get('code', '')}".strip()
        )
    return result


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


async def agent(args: argparse.Namespace, target: Target) -> None:
    try:
        client = await connect(target, name="interaction-worker-agent-example")
    except ConnectError as error:
        raise StepFailed(str(error)) from None
    try:
        texts: dict[str, str] = {}
        for path in FILES:
            result = await read_file(client, target.prefix, path, args.timeout)
            texts[path] = result["content"]
        delivery_id = f"agent-{uuid.uuid4()}"
        receipt = await ask(
            client,
            f"{target.prefix}.output.deliver",
            {
                "deliveryId": delivery_id,
                "message": {"role": "assistant", "content": summarize(texts)},
            },
            args.timeout,
        )
        emit(receipt)
        if receipt.get("status") != "accepted":
            raise StepFailed(f"delivery {receipt.get('status')}")
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A scripted agent loop over the bus.")
    parser.add_argument("--config", type=Path, help="the YAML file (./worker.yaml)")
    parser.add_argument(
        "--nats-url", help="connect here instead of the configured server"
    )
    parser.add_argument("--data-dir", type=Path, help="the embedded server's directory")
    parser.add_argument("--prefix", help="the subject prefix (default: the file's)")
    parser.add_argument("--timeout", type=float, default=75.0, help="seconds per step")
    args = parser.parse_args(argv)
    try:
        target = resolve(args)
    except ConfigurationError as error:
        for line in str(error).splitlines():
            print(f"agent: {line}", file=sys.stderr)
        return 2
    try:
        asyncio.run(agent(args, target))
    except StepFailed as error:
        print(f"agent: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
