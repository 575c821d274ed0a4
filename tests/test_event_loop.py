"""The event loop a serving process runs on (event_loop.run)."""

import asyncio
import inspect
import sys

import pytest

from interaction_worker import event_loop
from interaction_worker.event_loop import LoopUnavailable


async def loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_auto_is_uvloop_when_installed() -> None:
    assert event_loop.run(loop_module()) == "uvloop"
    assert event_loop.run(loop_module(), "uvloop") == "uvloop"


def test_asyncio_is_asyncio_s_own_loop() -> None:
    assert event_loop.run(loop_module(), "asyncio").startswith("asyncio.")


def test_without_uvloop_auto_falls_back_and_uvloop_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert event_loop.run(loop_module()).startswith("asyncio.")
    main = loop_module()
    with pytest.raises(LoopUnavailable, match="uvloop is not installed"):
        event_loop.run(main, "uvloop")
    # Closed, so no "never awaited" warning at exit.
    assert inspect.getcoroutinestate(main) == inspect.CORO_CLOSED


def test_the_result_and_the_exception_of_main_come_back() -> None:
    async def fails() -> None:
        raise ValueError("from main")

    for loop in event_loop.LOOP_NAMES:
        with pytest.raises(ValueError, match="from main"):
            event_loop.run(fails(), loop)
