"""The durable binding's slots: handed out in the order asked, several at once, never more than
there are, and given back by a consumer cancelled while it waits or right after its turn came; and its
in-progress reports, which end with their message."""

import asyncio
import logging

from interaction_worker.subscribers.in_progress import ProgressReports
from interaction_worker.subscribers.slots import Slots


async def test_slots_are_handed_out_in_turn_and_never_beyond_the_total() -> None:
    slots = Slots(3)
    assert await slots.take(2) == 2
    assert await slots.take(5) == 1
    second = asyncio.create_task(slots.take(2))
    third = asyncio.create_task(slots.take(2))
    await asyncio.sleep(0)
    assert slots.waiting

    slots.give(1)
    await asyncio.sleep(0)
    assert second.done() and await second == 1 and not third.done()
    # A newcomer does not pass the queue.
    newcomer = asyncio.create_task(slots.take(1))
    slots.give(3)
    await asyncio.sleep(0)
    assert await third == 2
    assert await newcomer == 1
    assert slots.free == 0 and not slots.waiting


async def test_a_consumer_cancelled_while_waiting_or_just_served_gives_nothing_away() -> (
    None
):
    slots = Slots(1)
    assert await slots.take(1) == 1
    waiting = asyncio.create_task(slots.take(1))
    served = asyncio.create_task(slots.take(1))
    await asyncio.sleep(0)

    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    slots.give(1)  # goes to `served`, which is cancelled before it runs
    served.cancel()
    await asyncio.gather(served, return_exceptions=True)

    assert slots.free == 1 and not slots.waiting


class Reported:
    """A message that counts the in-progress reports the server got."""

    subject = "interaction.tool.call"

    def __init__(self) -> None:
        self.reports = 0

    async def in_progress(self) -> None:
        self.reports += 1


async def test_no_in_progress_report_is_sent_once_its_message_has_ended() -> None:
    msg = Reported()
    alive = ProgressReports(msg, 60.0, logging.getLogger("test"))  # type: ignore[arg-type]
    alive._due()  # a report falls due: its task is made, and runs at the next turn of the loop
    alive.stop()  # the message is acknowledged first
    await asyncio.gather(*alive.reports)

    assert msg.reports == 0 and alive.timer is None
