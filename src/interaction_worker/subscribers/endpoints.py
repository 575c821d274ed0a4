"""What each request subject has done: the counters the NATS services protocol reports (wire.md 9)
and the metrics read at scrape time.

Counting is on the hot path, so it is plain attribute arithmetic on one small slotted object per
subject, found without a lookup: a binding's subscription callback holds its subject's `Endpoint`,
and the dispatcher's queue carries it beside the message. Per message that is two integer
additions (`requests` on receipt, `processing_ns` once answered) and one clock read (the dispatcher
reads the clock once as each message ends; that reading is also the start of the next message its
worker takes). No lock: every update runs on the event loop's thread, and a reader (a `$SRV.STATS`
request, a scrape) runs there too, between two messages.

Refusals are counted apart (`errors`, `last_error` and `refusals` by code): they are rare, so a
dictionary there costs nothing that matters. What only the metrics need (outcomes by status,
durations, calls in flight) is measured by `requests.Measured`, only when metrics are on.
"""

import time
from bisect import bisect_left
from collections.abc import Callable

from ..contracts.wire import Kind
from ..errors import InteractionWorkerError

# Nanoseconds, monotonic: the services protocol's unit, and an integer (adding it costs no float).
clock: Callable[[], int] = time.perf_counter_ns

# The upper bounds of the request duration histogram, in seconds: from a no-op call (about 0.1 ms)
# to past the default `tool_timeout` (60 s).
DURATION_BUCKETS: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
)


class Endpoint:
    """One request subject's counters (an ADR-32 endpoint: `$SRV.STATS` reads them as they are).

    Attributes:
        kind: the family, as the dead letters' subjects name it (`tool`, `mcp`, `observe`,
            `output`, `list`); also the endpoint's name in discovery and the metrics' `kind`.
        subject: the request subject.
        requests: messages received, refused ones included.
        errors: messages refused (answered by an error reply, when they had a reply subject, and a
            dead letter).
        last_error: the last refusal, as `CODE: message`; empty before the first.
        processing_ns: the time spent on the messages answered, from the moment a worker took each
            one to the end of its publishes.
        refusals: refusals by wire error code.
    """

    __slots__ = (
        "kind",
        "subject",
        "requests",
        "errors",
        "last_error",
        "processing_ns",
        "refusals",
    )

    def __init__(self, kind: Kind, subject: str) -> None:
        self.kind: Kind = kind
        self.subject = subject
        self.requests = 0
        self.errors = 0
        self.last_error = ""
        self.processing_ns = 0
        self.refusals: dict[str, int] = {}

    def refused(self, error: InteractionWorkerError) -> None:
        self.errors += 1
        self.last_error = f"{error.code}: {error.message}"
        self.refusals[error.code] = self.refusals.get(error.code, 0) + 1

    @property
    def average_processing_ns(self) -> int:
        """`processing_ns` over `requests`, as the services protocol averages (0 before any)."""
        return self.processing_ns // self.requests if self.requests else 0


class Durations:
    """A histogram of request durations in nanoseconds: a count per bucket of `DURATION_BUCKETS`
    (and one past the last), and their sum; cumulated only when read."""

    __slots__ = ("bounds", "counts", "total_ns")

    def __init__(self, buckets: tuple[float, ...] = DURATION_BUCKETS) -> None:
        self.bounds = [round(bound * 1e9) for bound in buckets]
        self.counts = [0] * (len(buckets) + 1)
        self.total_ns = 0

    def observe(self, elapsed_ns: int) -> None:
        # bisect_left: a duration equal to a bound belongs to that bucket (Prometheus's `le`).
        self.counts[bisect_left(self.bounds, elapsed_ns)] += 1
        self.total_ns += elapsed_ns

    def cumulative(self) -> list[int]:
        """Counts at or below each bound, then the total (the `+Inf` bucket)."""
        running, out = 0, []
        for count in self.counts:
            running += count
            out.append(running)
        return out


class Measures:
    """What the metrics add to an endpoint's counters, kept by `requests.Measured`.

    Attributes:
        outcomes: answered requests by outcome (`success`, `failed`, `cancelled`, `timeout`,
            `unknown`); refusals are the endpoint's `refusals`.
        in_flight: requests whose family is running.
        durations: how long each request's family ran.
    """

    __slots__ = ("outcomes", "in_flight", "durations")

    def __init__(self) -> None:
        self.outcomes: dict[str, int] = {}
        self.in_flight = 0
        self.durations = Durations()
