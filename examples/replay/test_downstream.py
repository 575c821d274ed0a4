"""A downstream test: the call board fed with the events the worker published in the recorded
session, without a worker. `recorded_events` comes from interaction-worker's pytest plugin."""

import uuid
from pathlib import Path

import anyio
import nats
import pytest
from call_board import CallBoard

from interaction_worker.testing import NatsServer
from interaction_worker.testing.recorded import RecordedEvents

SESSION = Path(__file__).parent / "session.jsonl"


@pytest.mark.anyio
async def test_the_board_shows_each_call_of_the_session(
    nats_server: NatsServer, recorded_events: RecordedEvents
) -> None:
    prefix = f"board-{uuid.uuid4().hex[:8]}"  # the events are published under it
    nc = await nats.connect(nats_server.url)
    board = CallBoard(prefix)
    await board.follow(nc)

    published = await recorded_events(SESSION, prefix=prefix)
    with anyio.fail_after(10):
        await board.wait_for(6)
    await nc.close()

    assert published == 10  # 4 results, 4 observations, 1 dead letter, 1 receipt
    assert board.rows == {
        "read-notes": "success",
        "find-todo": "success",
        "count-orders": "success",
        "read-returns": "failed",
        "delete-orders": "refused: PERMISSION_DENIED",
        "summary-1": "accepted",
    }
