"""Awaiting one step of a flow within its deadline and its cancel event."""

import asyncio
from collections.abc import Awaitable
from typing import Any, Literal, TypeVar

T = TypeVar("T")


class Interrupted(Exception):
    """The deadline passed (`timeout`) or the cancel event was set (`cancelled`) first."""

    def __init__(self, reason: Literal["timeout", "cancelled"]) -> None:
        super().__init__(reason)
        self.reason: Literal["timeout", "cancelled"] = reason


async def bounded(
    awaitable: Awaitable[T], deadline: float, cancel: asyncio.Event | None
) -> T:
    """`awaitable`'s outcome, or `Interrupted` once the loop's clock reaches `deadline` or `cancel`
    is set; what was in flight is then cancelled and waited for. Cancelling the caller cancels it
    too."""
    if cancel is not None and cancel.is_set():
        _close(awaitable)
        raise Interrupted("cancelled")
    remaining = deadline - asyncio.get_running_loop().time()
    if remaining <= 0:
        _close(awaitable)
        raise Interrupted("timeout")
    task = asyncio.ensure_future(awaitable)
    waiters: set[asyncio.Future[Any]] = {task}
    cancelled = None
    if cancel is not None:
        cancelled = asyncio.ensure_future(cancel.wait())
        waiters.add(cancelled)
    try:
        done, _ = await asyncio.wait(
            waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        if cancelled is not None:
            cancelled.cancel()
        if not task.done():
            task.cancel()
            await _reap(task)
    if task in done:
        return task.result()
    raise Interrupted(
        "cancelled" if cancelled is not None and cancelled in done else "timeout"
    )


def _close(awaitable: Awaitable[object]) -> None:
    """A coroutine that will not run: closed, so that it is not reported as never awaited."""
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()


async def _reap(task: asyncio.Future[Any]) -> None:
    """Wait for an abandoned task to end (a cancellation of the caller still propagates); its
    outcome no longer matters, and is marked as retrieved so that asyncio does not log it."""
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()
