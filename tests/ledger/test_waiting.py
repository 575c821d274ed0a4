import logging

import pytest

from interaction_worker.ledger.waiting import WaitingWrites


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(("count", "noun"), [(1, "write"), (2, "writes")])
def test_the_waiting_writes_are_counted_and_logged_as_they_are(
    count: int, noun: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    book = WaitingWrites(every=10.0, clock=clock, logger=logging.getLogger("waiting"))
    entries = [book.begin("the stream has no leader") for _ in range(count)]
    clock.now += 12.0
    entries[0].failed("the stream has no leader")
    assert book.count == count and book.oldest() == 12.0
    clock.now += 1.0
    for entry in entries:
        entry.done()

    assert book.count == 0
    assert [r.getMessage() for r in caplog.records] == [
        f"{count} {noun} waiting to be retried, the oldest for 12.0 s "
        "(the stream has no leader)",
        f"{count} {noun} waited up to 13.0 s to be retried (the stream has no leader); "
        "all stored",
    ]
