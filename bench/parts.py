"""The parts of one no-op tool call, in instructions, in process (docs/benchmarks.md).

`python bench/parts.py` runs itself once under `valgrind --tool=callgrind`, which counts only inside
`functools.reduce` and writes a profile each time one returns: each part is run `--calls` times
inside one `reduce`, so each profile holds one part, and its total over the calls is what one call
of that part costs. No bus: the bodies, parsed bodies and results are built beforehand, and the
coroutines are run by hand (none of them waits). `empty` is what `reduce` costs per call of a part
that does nothing: subtract it from the others.

Parts:
  parse       the strict JSON parse of the body (`contracts/strict_json.py`)
  context     the tool's context, built by the tool family
  registry    the call through the registry, its context built beforehand: the call checked, the
              tool run, its result checked (`worker.py`, `nodes/tool_registry.py`,
              `contracts/validation.py`)
  shape       the observation built from the result (`nodes/observe.py`, `wire_observation`)
  to_json     the result and its observation serialised, `to_json` twice
  serialise   what the publishes write of both: `wire_json` when the tree has it, else `to_json`
              of the result and of its observation, built
  publishes   the result's publishes: both serialised, their subjects and headers
              (`subscribers/outgoing.py`)
  family      the tool family's run: deadline, context and the registry (`subscribers/requests/tool.py`)
  handle      `MessageHandler.handle` on the message: all of the above, the id and key
"""

import argparse
import asyncio
import functools
import importlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CallPart = Callable[[None, int], None]


def run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """The coroutine's value, run by hand: none of the parts waits."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("a part waited")


def parts(calls: int) -> list[CallPart]:
    sys.path.insert(0, str(HERE))
    from pydantic_core import to_json

    from interaction_worker import InteractionWorker, Sandbox
    from interaction_worker.contracts import parse_json_object
    from interaction_worker.contracts.wire import Subjects
    from interaction_worker.nodes import ToolContext, wire_observation
    from interaction_worker.subscribers.handler import MessageHandler
    from interaction_worker.subscribers.incoming import Incoming

    try:
        from interaction_worker.nodes import (  # type: ignore[attr-defined,unused-ignore]
            wire_json,
        )
    except ImportError:  # a tree before it

        def wire_json(result: dict[str, Any]) -> tuple[bytes, bytes]:
            return to_json(result), to_json(wire_observation(result))

    noop: Any = importlib.import_module("responders").Noop
    ids = [f"call-{n}" for n in range(calls)]
    bodies = [
        json.dumps({"call": {"id": i, "name": "noop", "arguments": {}}}).encode()
        for i in ids
    ]
    worker = InteractionWorker(tools=[noop(0)], sandbox=Sandbox(tools=["noop"]))
    sandbox = worker.sandbox
    handler = MessageHandler(worker, subjects=Subjects())
    family = handler.families["tool"]
    outgoing = handler.outgoing
    parsed = [parse_json_object(body) for body in bodies]
    contexts = [ToolContext(i, sandbox) for i in ids]
    results = [
        {"callId": i, "source": "noop", "status": "success", "content": "ok"}
        for i in ids
    ]
    observations = [wire_observation(result) for result in results]
    messages = [
        Incoming("interaction.tool.call", body, None, f"_INBOX.x.{n}")
        for n, body in enumerate(bodies)
    ]

    def empty(_: None, n: int) -> None:
        pass

    def parse(_: None, n: int) -> None:
        parse_json_object(bodies[n])

    def context(_: None, n: int) -> None:
        ToolContext(ids[n], sandbox)

    def registry(_: None, n: int) -> None:
        run(
            worker.call_tool_document(parsed[n], context=contexts[n], trusted_json=True)
        )

    def shape(_: None, n: int) -> None:
        wire_observation(results[n])

    def two_to_json(_: None, n: int) -> None:
        to_json(results[n])
        to_json(observations[n])

    def serialise(_: None, n: int) -> None:
        wire_json(results[n])

    def publishes(_: None, n: int) -> None:
        outgoing.result("tool", results[n], ids[n], f"_INBOX.x.{n}", {}, None)

    def family_run(_: None, n: int) -> None:
        run(family.run(parsed[n], ids[n], messages[n]))

    def handle(_: None, n: int) -> None:
        run(handler.handle("tool", messages[n]))

    two_to_json.__name__ = "to_json"
    family_run.__name__ = "family"
    return [
        empty,
        parse,
        context,
        registry,
        shape,
        two_to_json,
        serialise,
        publishes,
        family_run,
        handle,
    ]


async def measured(calls: int) -> None:
    """Each part `calls` times, each inside one `reduce` (under callgrind, one profile each)."""
    chosen = parts(calls)
    print(" ".join(part.__name__ for part in chosen), flush=True)
    for part in chosen:
        functools.reduce(part, range(calls), None)


def totals(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise SystemExit(f"no totals in {path}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(measured(args.calls))
        return
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "callgrind.out"
        child = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                "--collect-atstart=no",
                "--toggle-collect=functools_reduce",
                "--dump-after=functools_reduce",
                "--log-file=/dev/null",
                sys.executable,
                __file__,
                "--child",
                "--calls",
                str(args.calls),
            ],
            env={**os.environ, "PYTHONHASHSEED": "0"},
            stdout=subprocess.PIPE,
            text=True,
            check=True,
        )
        names = child.stdout.split()
        # One profile per `reduce` that returned, in order: the parts' are the last ones.
        dumps = sorted(
            Path(directory).glob("callgrind.out.*"),
            key=lambda path: int(path.name.rsplit(".", 1)[1]),
        )[-len(names) :]
        counts = [totals(path) // args.calls for path in dumps]
    base = counts[0]
    print(f"| part | instructions per call (less `empty`, {base:,}) |\n|---|---:|")
    for name, count in zip(names, counts, strict=True):
        print(f"| {name} | {count - base:,} |")


if __name__ == "__main__":
    main()
