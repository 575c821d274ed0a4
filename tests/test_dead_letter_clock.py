"""The clock of dead letters' `receivedAt` (wire.md section 5): ISO 8601 UTC with milliseconds."""

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from interaction_worker.subscribers.dead_letters import UtcTimestamps

NOV_29_21H = 1795986000.0  # 2026-11-29T21:00:00Z


def test_the_date_is_formatted_once_per_second_and_the_milliseconds_every_time() -> (
    None
):
    times = iter([NOV_29_21H + 0.004, NOV_29_21H + 0.5, NOV_29_21H + 61.25])
    clock = UtcTimestamps(lambda: next(times))

    assert clock() == "2026-11-29T21:00:00.004Z"
    assert clock() == "2026-11-29T21:00:00.500Z"
    assert clock() == "2026-11-29T21:01:01.250Z"


@given(st.floats(min_value=0, max_value=4102444800, allow_nan=False))
def test_any_time_reads_as_datetime_reads_it(now: float) -> None:
    expected = datetime.fromtimestamp(now, UTC)

    assert UtcTimestamps(lambda: now)() == (
        expected.strftime("%Y-%m-%dT%H:%M:%S.") + f"{expected.microsecond // 1000:03d}Z"
    )


def test_the_default_clock_is_now() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    stamp = UtcTimestamps()()
    parsed = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert before <= parsed <= datetime.now(UTC)
