"""The event loop a serving process runs on: uvloop where it is installed, else asyncio's own.

A call that waits (a tool's `asyncio.sleep`, an HTTP request, an MCP round trip) arms a timer and
has its task woken through the loop, and every wake-up is a callback handle. On asyncio's own loop,
timers and handles are Python objects: about 13 µs of CPU per `asyncio.sleep` with 256 calls in
flight on our machines, against 5 µs on uvloop, whose loop is C. Calls that never wait cost the same
on both; their cost is Python code (docs/benchmarks.md).
"""

import asyncio
from collections.abc import Coroutine
from typing import Any, Literal, TypeVar, get_args

T = TypeVar("T")
LoopName = Literal["auto", "asyncio", "uvloop"]
LOOP_NAMES: tuple[LoopName, ...] = get_args(LoopName)


class LoopUnavailable(Exception):
    """The event loop asked for cannot be used here."""


def run(main: Coroutine[Any, Any, T], loop: LoopName = "auto") -> T:
    """Run `main` to the end on a new event loop, as `asyncio.run` does.

    `auto` is uvloop when it can be imported (it is a dependency on Linux and macOS), else asyncio.

    Raises:
        LoopUnavailable: `uvloop` was asked for and is not installed.
    """
    if loop == "asyncio":
        return asyncio.run(main)
    try:
        import uvloop
    except ImportError:
        if loop == "uvloop":
            main.close()  # never awaited: without this, Python warns about it at exit
            raise LoopUnavailable("uvloop is not installed") from None
        return asyncio.run(main)
    return uvloop.run(main)
