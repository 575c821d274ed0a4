"""The worker's Prometheus metrics (docs/configuration.md, "Metrics and health"), read from its own
counters at scrape time.

A custom collector rather than `prometheus_client`'s `Counter`s: each `Counter.inc()` takes a lock,
once per message and label set, while the request path already keeps plain counters (the
endpoints' for discovery, the `Measured` families' when metrics are on, the sinks' and the
ledger's); a scrape reads them as they are, on the event loop's thread, between two messages.
"""

from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from ..ledger import CountedStore
from ..sinks import delivery_counts
from ..subscribers import DURATION_BUCKETS
from .state import ServiceState

# Every outcome of every kind is exposed, zero included, so that a rate over any of them exists
# from the first scrape.
OUTCOMES = ("success", "failed", "cancelled", "timeout", "unknown", "refused")
_BOUNDS = tuple(str(bound) for bound in DURATION_BUCKETS)


class WorkerCollector(Collector):
    """The `interaction_*` metrics of one served worker."""

    def __init__(self, state: ServiceState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        yield from self._requests()
        yield from self._sinks()
        yield from self._mcp()
        yield from self._ledger()
        yield from self._waiting()

    def _requests(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "interaction_requests",
            "Requests answered, by kind and outcome (refused: an error reply and a dead letter)",
            labels=["kind", "outcome"],
        )
        refusals = CounterMetricFamily(
            "interaction_refusals",
            "Refused requests by kind and wire error code",
            labels=["kind", "code"],
        )
        durations = HistogramMetricFamily(
            "interaction_request_duration_seconds",
            "How long each request's family ran (the tool, MCP call or delivery), by kind",
            labels=["kind"],
        )
        in_flight = GaugeMetricFamily(
            "interaction_in_flight",
            "Requests whose family is running, by kind",
            labels=["kind"],
        )
        pending = GaugeMetricFamily(
            "interaction_pending",
            "Requests held by the worker: queued or running (max_pending bounds them)",
        )
        dead = CounterMetricFamily(
            "interaction_dead_letters",
            "Dead letters published, by kind (one per refused request)",
            labels=["kind"],
        )
        lost = CounterMetricFamily(
            "interaction_workers_lost",
            "Workers (dispatcher workers, durable message tasks and consumer loops) that ended "
            "other than by shutdown: each is replaced, or its message delivered again",
        )
        binding = self.state.binding
        if binding is not None:
            handler = binding.handler
            measures = handler.measures or {}
            for kind in handler.kinds:
                endpoint = handler.endpoints[kind]
                measured = measures.get(kind)
                counted = measured.outcomes if measured is not None else {}
                for outcome in OUTCOMES:
                    value = (
                        endpoint.errors
                        if outcome == "refused"
                        else counted.get(outcome, 0)
                    )
                    requests.add_metric([kind, outcome], value)
                for code, count in sorted(endpoint.refusals.items()):
                    refusals.add_metric([kind, code], count)
                dead.add_metric([kind], endpoint.errors)
                if measured is not None:
                    histogram = measured.durations
                    cumulative = histogram.cumulative()
                    durations.add_metric(
                        [kind],
                        [
                            *zip(_BOUNDS, cumulative, strict=False),
                            ("+Inf", cumulative[-1]),
                        ],
                        sum_value=histogram.total_ns / 1e9,
                    )
                    in_flight.add_metric([kind], measured.in_flight)
            pending.add_metric([], binding.pending)
            lost.add_metric([], binding.workers_lost)
        yield from (requests, refusals, durations, in_flight, pending, dead, lost)

    def _sinks(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "interaction_sink_deliveries",
            "Deliveries by sink and by the status that sink answered",
            labels=["sink", "status"],
        )
        counts = delivery_counts(self.state.worker.output)
        if counts is not None:
            for (sink, status), count in sorted(counts.counts.items()):
                family.add_metric([sink, status], count)
        yield family

    def _mcp(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "interaction_mcp_server_up",
            "Whether each MCP server's session is up (1) or not (0)",
            labels=["server"],
        )
        for server in self.state.mcp_servers():
            family.add_metric([server.name], 1 if server.up else 0)
        yield family

    def _ledger(self) -> Iterator[Metric]:
        binding = self.state.binding
        ledger = binding.handler.ledger if binding is not None else None
        if ledger is None:
            return
        invalid = CounterMetricFamily(
            "interaction_ledger_invalid_entries",
            "Ledger keys found holding something that is not a ledger record (each key once)",
        )
        invalid.add_metric([], ledger.invalid_entries)
        yield invalid
        if not isinstance(ledger.store, CountedStore):
            return
        family = CounterMetricFamily(
            "interaction_ledger_operations",
            "The idempotency ledger's key-value operations, by operation and result",
            labels=["op", "result"],
        )
        for (operation, result), count in sorted(ledger.store.counts.items()):
            family.add_metric([operation, result], count)
        yield family

    def _waiting(self) -> Iterator[Metric]:
        count = GaugeMetricFamily(
            "interaction_writes_waiting",
            "Writes (ledger records, events, dead letters) that the server did not take and that "
            "are waiting to be written again (docs/wire.md 7: none is given up)",
        )
        oldest = GaugeMetricFamily(
            "interaction_writes_waiting_oldest_seconds",
            "How long the oldest write waiting to be written again has waited",
        )
        binding = self.state.binding
        if binding is not None:
            count.add_metric([], binding.waiting.count)
            oldest.add_metric([], binding.waiting.oldest())
        yield from (count, oldest)
