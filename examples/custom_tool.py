"""A worker built in code: two tools of its own, served by the command line.

From the repository root (`run` puts the current directory on `sys.path`, like uvicorn):

    interaction-worker run examples.custom_tool:worker

then, from a second terminal:

    interaction-worker call echo name=Ada age:=36 tags:='["a","b"]'
    interaction-worker call sleep seconds:=2

The YAML file (`./worker.yaml`, if any) still supplies the connection, subjects and limits. The
worker's own sandbox wins over the file's: it grants exactly these two tools, and since the code
gives tools, the default `read_text` tool is not added.
"""

import asyncio
import math
from collections.abc import Mapping
from typing import Any

from interaction_worker import InteractionWorker, Sandbox, ToolContext

MAX_SLEEP = 60.0


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value, as a client would see it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


class Echo:
    """Answer the arguments as they arrived, with the JSON type of each."""

    name = "echo"
    description = "Return the arguments and their JSON types as structured content"
    input_schema: Mapping[str, Any] = {"type": "object"}
    effects: tuple[str, ...] = ()  # no side effect: not even a file read
    requires_approval = False
    idempotent = True

    def validate(self, arguments: dict[str, Any]) -> None:
        return None  # any JSON object will do

    async def execute(
        self, arguments: dict[str, Any], context: ToolContext
    ) -> dict[str, Any]:
        return {
            "status": "success",
            "structuredContent": {
                "arguments": arguments,
                "types": {key: json_type(value) for key, value in arguments.items()},
            },
        }


class Sleep:
    """Wait `seconds`, then answer: a stand-in for any slow tool (cancellation, shutdown)."""

    name = "sleep"
    description = f"Wait the given number of seconds (at most {MAX_SLEEP:g})"
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "seconds": {"type": "number", "minimum": 0, "maximum": MAX_SLEEP}
        },
        "required": ["seconds"],
    }
    effects: tuple[str, ...] = ()
    requires_approval = False
    idempotent = True

    def validate(self, arguments: dict[str, Any]) -> None:
        # The message of a raised exception becomes the INVALID_INPUT error's message.
        if set(arguments) != {"seconds"}:
            raise ValueError("sleep takes exactly one argument, seconds")
        seconds = arguments["seconds"]
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not math.isfinite(seconds)
            or not 0 <= seconds <= MAX_SLEEP
        ):
            raise ValueError(f"seconds must be a number from 0 to {MAX_SLEEP:g}")

    async def execute(
        self, arguments: dict[str, Any], context: ToolContext
    ) -> dict[str, Any]:
        seconds = float(arguments["seconds"])
        context.logger.info("sleep %r: %g s", context.call_id, seconds)
        # A shutdown past its grace, or the tool timeout, cancels this await: the worker then
        # publishes a `cancelled` (WORKER_SHUTDOWN) or `timeout` (TOOL_TIMEOUT) result itself.
        await asyncio.sleep(seconds)
        return {
            "status": "success",
            "content": f"slept {seconds:g} s",
            "structuredContent": {"seconds": seconds},
        }


worker = InteractionWorker(
    tools=[Echo(), Sleep()],
    sandbox=Sandbox(tools=["echo", "sleep"]),
)
