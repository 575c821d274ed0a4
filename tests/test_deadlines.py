"""The tool_timeout deadline is a `with` block around the call (subscribers/requests/deadlines.py):
armed on entry, disarmed on exit whichever way the block ends, and a cancellation it made withdrawn
there, so nothing of it reaches what the task runs next."""

import asyncio
import contextvars
import weakref

import pytest

from interaction_worker.subscribers.requests.deadlines import Deadlines

RESOLUTION = 0.01


def soon(seconds: float = 0.03) -> float:
    return asyncio.get_running_loop().time() + seconds


def this_task() -> asyncio.Task[object]:
    task = asyncio.current_task()
    assert task is not None
    return task


async def test_a_block_that_ends_before_its_deadline_leaves_nothing_armed() -> None:
    deadlines = Deadlines(RESOLUTION)
    with pytest.raises(ValueError):
        with deadlines.scope(this_task(), soon()):
            raise ValueError("refused before the deadline")
    assert deadlines.armed == 0

    await asyncio.sleep(0.1)  # past that deadline: this task is not cancelled
    assert this_task().cancelling() == 0


async def test_a_block_cut_by_its_deadline_is_expired_and_the_cancellation_withdrawn() -> (
    None
):
    deadlines = Deadlines(RESOLUTION)
    with deadlines.scope(this_task(), soon()) as deadline:
        await asyncio.sleep(5)
    assert deadline.expired
    assert this_task().cancelling() == 0 and deadlines.armed == 0


async def test_a_block_that_swallows_the_cancellation_keeps_its_outcome() -> None:
    deadlines = Deadlines(RESOLUTION)
    with deadlines.scope(this_task(), soon()) as deadline:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            pass
        outcome = "finished anyway"
    assert outcome == "finished anyway" and not deadline.expired
    assert this_task().cancelling() == 0


async def test_a_block_that_raises_after_its_deadline_fired_leaves_no_cancellation() -> (
    None
):
    deadlines = Deadlines(RESOLUTION)
    with pytest.raises(RuntimeError):
        with deadlines.scope(this_task(), soon()) as deadline:
            try:
                await asyncio.sleep(5)
            except asyncio.CancelledError:
                raise RuntimeError("the tool turned it into an error") from None
    assert deadline.fired and not deadline.expired
    assert this_task().cancelling() == 0
    await asyncio.sleep(0.05)  # and nothing left to deliver


async def test_someone_elses_cancellation_during_the_block_is_not_swallowed() -> None:
    deadlines = Deadlines(RESOLUTION)
    entered = asyncio.Event()

    async def call() -> bool:
        with deadlines.scope(this_task(), soon(0.02)) as deadline:
            entered.set()
            try:
                await asyncio.sleep(5)
            except asyncio.CancelledError:
                await asyncio.sleep(5)  # cleaning up, when shutdown cancels it too
        return deadline.expired

    task = asyncio.create_task(call())
    await entered.wait()
    await asyncio.sleep(0.06)  # the deadline fired
    task.cancel()  # shutdown
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelling() == 1  # shutdown's, left for its owner


async def test_the_sweeper_keeps_nothing_of_the_call_that_started_it() -> None:
    deadlines = Deadlines(RESOLUTION)
    held = Held()
    alive = weakref.ref(held)
    other = asyncio.create_task(asyncio.sleep(5))
    later = deadlines.scope(
        other, soon(5)
    )  # another call's, armed while the first runs
    token = REQUEST.set(
        held
    )  # what a call sets in its context (a ledger claim, a trace)
    with deadlines.scope(this_task(), soon(5)):  # the first call: it starts the sweeper
        later.__enter__()
    REQUEST.reset(token)
    del held  # its last reference, unless the sweeper's context kept one

    try:
        assert deadlines.armed == 1  # the sweeper runs on, for the other call
        assert alive() is None
    finally:
        later.__exit__(None, None, None)
        other.cancel()


class Held:
    pass


REQUEST: contextvars.ContextVar[Held] = contextvars.ContextVar("request")
