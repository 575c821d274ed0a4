"""FanoutSink: the combination rules of both policies, per-sink outcomes, names, timeouts, lifecycle."""

import asyncio
import itertools
import logging
from typing import Any

import anyio
import pytest

from interaction_worker import DeliveryContext, InteractionWorker, OutputRequest
from interaction_worker.errors import ConfigurationError, RegistrationError
from interaction_worker.nodes import deliver_output
from interaction_worker.sinks import ConsoleSink, FanoutSink

STATUSES = ("accepted", "rejected", "unknown")


def _request(delivery_id: str = "d-1") -> OutputRequest:
    return OutputRequest.model_validate(
        {"deliveryId": delivery_id, "message": {"role": "assistant", "content": "hi"}}
    )


def _error(status: str) -> dict[str, Any]:
    return {"code": f"SAID_{status.upper()}", "message": f"the sink said {status}"}


class Fixed:
    """Answers one status (with an error unless accepted); records what it was given."""

    def __init__(self, status: str, name: str | None = None, **attributes: Any) -> None:
        self.status = status
        if name is not None:
            self.name = name
        self.__dict__.update(attributes)
        self.requests: list[OutputRequest] = []
        self.contexts: list[DeliveryContext] = []

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        self.requests.append(request)
        self.contexts.append(context)
        receipt: dict[str, Any] = {
            "deliveryId": request.delivery_id,
            "status": self.status,
        }
        if self.status != "accepted":
            receipt["error"] = _error(self.status)
        return receipt


class Raises:
    name = "raises"

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        raise RuntimeError("secret /srv/app/token sk-live1234")


class Hangs:
    """Never answers unless released; records whether it was cancelled."""

    def __init__(self, name: str = "hangs", timeout: float | None = None) -> None:
        self.name = name
        if timeout is not None:
            self.timeout = timeout
        self.started = asyncio.Event()
        self.cancelled = False

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


class Returns:
    def __init__(self, name: str, value: Any) -> None:
        self.name = name
        self.value = value

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        return self.value


async def _fanout(statuses: tuple[str, ...], policy: Any) -> Any:
    sinks = [Fixed(status, f"s{index}") for index, status in enumerate(statuses)]
    sink = FanoutSink(sinks, policy=policy)
    return await sink.deliver(_request(), DeliveryContext("d-1"))


# docs/configuration.md, `output.policy`:
# all: accepted iff every sink accepted; rejected iff every sink rejected; else unknown.
# any: accepted iff at least one sink accepted; rejected iff every sink rejected; else unknown.
TWO_SINKS = [
    ("all", "accepted", "accepted", "accepted"),
    ("all", "accepted", "rejected", "unknown"),
    ("all", "accepted", "unknown", "unknown"),
    ("all", "rejected", "accepted", "unknown"),
    ("all", "rejected", "rejected", "rejected"),
    ("all", "rejected", "unknown", "unknown"),
    ("all", "unknown", "accepted", "unknown"),
    ("all", "unknown", "rejected", "unknown"),
    ("all", "unknown", "unknown", "unknown"),
    ("any", "accepted", "accepted", "accepted"),
    ("any", "accepted", "rejected", "accepted"),
    ("any", "accepted", "unknown", "accepted"),
    ("any", "rejected", "accepted", "accepted"),
    ("any", "rejected", "rejected", "rejected"),
    ("any", "rejected", "unknown", "unknown"),
    ("any", "unknown", "accepted", "accepted"),
    ("any", "unknown", "rejected", "unknown"),
    ("any", "unknown", "unknown", "unknown"),
]


@pytest.mark.parametrize(
    ("policy", "first", "second", "expected"),
    [pytest.param(*row, id="-".join(row)) for row in TWO_SINKS],
)
async def test_every_row_of_the_two_sink_table(
    policy: str, first: str, second: str, expected: str
) -> None:
    receipt = await _fanout((first, second), policy)
    assert receipt["status"] == expected
    entries = {
        "s0": {"status": first}
        | ({} if first == "accepted" else {"error": _error(first)}),
        "s1": {"status": second}
        | ({} if second == "accepted" else {"error": _error(second)}),
    }
    assert receipt["metadata"] == {"sinks": entries}
    failed = ", ".join(n for n, s in (("s0", first), ("s1", second)) if s != "accepted")
    if expected == "accepted":
        assert "error" not in receipt
    elif expected == "rejected":
        assert receipt["error"] == {
            "code": "SINKS_REJECTED",
            "message": f"Every sink rejected the delivery: {failed}",
        }
    else:
        lead = "Not every sink" if policy == "all" else "No sink"
        assert receipt["error"] == {
            "code": "SINKS_INCOMPLETE",
            "message": f"{lead} accepted the delivery: {failed}",
        }


def _rule(policy: str, statuses: tuple[str, ...]) -> str:
    if all(s == "rejected" for s in statuses):
        return "rejected"
    accepted = [s == "accepted" for s in statuses]
    if all(accepted) if policy == "all" else any(accepted):
        return "accepted"
    return "unknown"


@pytest.mark.parametrize("policy", ["all", "any"])
async def test_every_combination_of_one_to_four_sinks_follows_the_rule(
    policy: Any,
) -> None:
    for count in range(1, 5):
        for statuses in itertools.product(STATUSES, repeat=count):
            receipt = await _fanout(statuses, policy)
            assert receipt["status"] == _rule(policy, statuses), statuses
            # Always a valid receipt for deliver_output.
            sinks = [Fixed(status, f"s{i}") for i, status in enumerate(statuses)]
            checked = await deliver_output(_request(), FanoutSink(sinks, policy=policy))
            assert checked.status == receipt["status"]


async def test_every_sink_gets_the_same_request_and_context_once() -> None:
    sinks = [Fixed("accepted", "a"), Fixed("accepted", "b")]
    request, context = _request(), DeliveryContext("d-1")
    await FanoutSink(sinks).deliver(request, context)
    assert [(s.requests, s.contexts) for s in sinks] == [([request], [context])] * 2


async def test_sinks_run_concurrently() -> None:
    first, second = Hangs("first"), Hangs("second")
    sink = FanoutSink([first, second])
    task = asyncio.create_task(sink.deliver(_request(), DeliveryContext("d-1")))
    with anyio.fail_after(5):
        await first.started.wait()
        await second.started.wait()  # both started before either answered
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert first.cancelled and second.cancelled  # a cancelled fan-out cancels its sinks


async def test_a_sink_that_raises_counts_as_unknown_without_its_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = FanoutSink([Fixed("accepted", "ok"), Raises()], policy="any")
    with caplog.at_level(logging.ERROR, logger="interaction_worker"):
        receipt = await deliver_output(_request(), sink)
    assert receipt.status == "accepted"
    assert receipt.metadata == {
        "sinks": {
            "ok": {"status": "accepted"},
            "raises": {
                "status": "unknown",
                "error": {
                    "code": "SINK_FAILED",
                    "message": "The sink raised an exception",
                    "retryable": False,
                },
            },
        }
    }
    assert "sk-live" not in receipt.to_json().decode()
    assert any("raises" in r.getMessage() and r.exc_info for r in caplog.records)


async def test_a_sink_whose_own_work_is_cancelled_counts_as_unknown_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Cut:
        name = "cut"

        async def deliver(
            self, request: OutputRequest, context: DeliveryContext
        ) -> Any:
            work: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            work.cancel()  # by something else than this delivery
            await work

    sink = FanoutSink([Fixed("accepted", "ok"), Cut()], policy="any")
    with caplog.at_level(logging.WARNING, logger="interaction_worker"):
        receipt = await deliver_output(_request(), sink)
    assert receipt.status == "accepted"
    assert receipt.metadata == {
        "sinks": {
            "ok": {"status": "accepted"},
            "cut": {
                "status": "unknown",
                "error": {
                    "code": "SINK_CANCELLED",
                    "message": "The sink's call was cancelled before it answered",
                    "retryable": False,
                },
            },
        }
    }
    assert "fan-out fanout: sink cut's call was cancelled" in caplog.text
    assert sink.deliveries.counts == {("ok", "accepted"): 1, ("cut", "unknown"): 1}


async def test_a_sink_past_its_timeout_is_unknown_and_the_others_keep_theirs() -> None:
    slow = Hangs("slow", timeout=0.2)
    sink = FanoutSink([Fixed("accepted", "fast"), slow])
    with anyio.fail_after(5):
        receipt = await sink.deliver(_request(), DeliveryContext("d-1"))
    assert slow.cancelled
    assert receipt == {
        "deliveryId": "d-1",
        "status": "unknown",
        "metadata": {
            "sinks": {
                "fast": {"status": "accepted"},
                "slow": {
                    "status": "unknown",
                    "error": {
                        "code": "SINK_TIMEOUT",
                        "message": "The sink did not answer within 0.2 s",
                        "retryable": False,
                    },
                },
            }
        },
        "error": {
            "code": "SINKS_INCOMPLETE",
            "message": "Not every sink accepted the delivery: slow",
        },
    }


async def test_a_timeout_error_raised_by_the_sink_itself_is_a_failure() -> None:
    class OwnTimeout:
        name = "own"

        async def deliver(
            self, request: OutputRequest, context: DeliveryContext
        ) -> Any:
            raise TimeoutError

    receipt = await FanoutSink([OwnTimeout()]).deliver(
        _request(), DeliveryContext("d-1")
    )
    assert receipt["metadata"]["sinks"]["own"]["error"]["code"] == "SINK_FAILED"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param({"deliveryId": "other", "status": "accepted"}, "Output receipt deliveryId mismatch", id="other-id"),
        pytest.param({"deliveryId": "d-1", "status": "done"}, "Invalid output status", id="bad-status"),
        pytest.param({"deliveryId": "d-1", "status": "unknown"}, "Interaction error is required", id="no-error"),
        pytest.param("accepted", "Output receipt must be an object", id="not-an-object"),
    ],
)  # fmt: skip
async def test_an_invalid_receipt_counts_as_unknown(value: Any, message: str) -> None:
    sink = FanoutSink([Returns("bad", value), Fixed("accepted", "good")], policy="any")
    receipt = await deliver_output(_request(), sink)
    assert receipt.status == "accepted"
    metadata: Any = receipt.metadata
    assert metadata["sinks"]["bad"] == {
        "status": "unknown",
        "error": {"code": "INVALID_RESULT", "message": message, "retryable": False},
    }


async def test_a_sinks_own_metadata_and_accepted_error_are_kept_safe() -> None:
    value = {
        "deliveryId": "d-1",
        "status": "accepted",
        "error": {"code": "SLOW", "message": "accepted late", "extra": 1},
        "metadata": {"seq": 1},
    }
    receipt = await FanoutSink([Returns("a", value)]).deliver(
        _request(), DeliveryContext("d-1")
    )
    # The entry is {status, error?}, as docs/configuration.md writes it; the error is projected.
    assert receipt["metadata"] == {
        "sinks": {
            "a": {
                "status": "accepted",
                "error": {"code": "SLOW", "message": "accepted late"},
            }
        }
    }


async def test_names_default_to_the_class_name_and_index() -> None:
    sink = FanoutSink(
        [Fixed("accepted"), Fixed("rejected", "named"), Fixed("rejected")]
    )
    assert sink.names == ("Fixed#0", "named", "Fixed#2")
    receipt = await sink.deliver(_request(), DeliveryContext("d-1"))
    assert list(receipt["metadata"]["sinks"]) == ["Fixed#0", "named", "Fixed#2"]
    assert receipt["error"]["message"] == (
        "Not every sink accepted the delivery: named, Fixed#2"
    )


async def test_a_name_unsafe_in_a_message_stays_in_the_metadata_only() -> None:
    names = ["/srv/hooks", "Bearer x"]
    sink = FanoutSink([Fixed("rejected", name) for name in names])
    receipt = await deliver_output(_request(), sink)
    assert receipt.error is not None
    assert (
        receipt.error.message == "Every sink rejected the delivery (see metadata.sinks)"
    )
    metadata: Any = receipt.metadata
    assert list(metadata["sinks"]) == names


async def test_many_long_names_stay_within_the_message_limit() -> None:
    sinks = [Fixed("unknown", f"{n}-" + "x" * 250) for n in range(5)]
    receipt = await deliver_output(_request(), FanoutSink(sinks))
    assert receipt.error is not None
    assert (
        receipt.error.message
        == "Not every sink accepted the delivery (see metadata.sinks)"
    )


def test_a_name_used_twice_is_refused() -> None:
    with pytest.raises(RegistrationError, match='Sink name "a" is used twice'):
        FanoutSink([Fixed("accepted", "a"), Fixed("accepted", "a")])
    with pytest.raises(RegistrationError, match='"Fixed#2"'):
        FanoutSink([Fixed("accepted"), Fixed("accepted", "Fixed#2"), Fixed("accepted")])


@pytest.mark.parametrize(
    ("sinks", "options", "message"),
    [
        pytest.param([], {}, "at least one sink", id="no-sinks"),
        pytest.param([Fixed("accepted")], {"policy": "most"}, "policy must be", id="policy"),
        pytest.param([Fixed("accepted", timeout=0)], {}, 'sink "Fixed#0": timeout must be', id="timeout-zero"),
        pytest.param([Fixed("accepted", timeout="5s")], {}, "timeout must be", id="timeout-string"),
    ],
)  # fmt: skip
def test_invalid_fanouts_are_refused(
    sinks: list[Any], options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        FanoutSink(sinks, **options)


def test_timeouts_default_to_ten_seconds() -> None:
    sink = FanoutSink(
        [Fixed("accepted"), Fixed("accepted", timeout=30), ConsoleSink(timeout=2)]
    )
    assert sink.timeouts == (10.0, 30.0, 2.0)
    assert (
        sink.timeout == 31.0
    )  # a fan-out holding this one lets the slowest sink time out first


class Lifecycle:
    def __init__(self, name: str, fail_close: bool = False) -> None:
        self.name = name
        self.fail_close = fail_close
        self.started_with: list[object] = []
        self.closed = 0

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        return {"deliveryId": request.delivery_id, "status": "accepted"}

    async def start(self, client: Any) -> None:
        self.started_with.append(client)

    def close(self) -> None:  # a plain close() is called too
        self.closed += 1
        if self.fail_close:
            raise OSError("disk gone")


async def test_start_and_close_reach_every_sink_even_when_one_close_fails() -> None:
    first, second = Lifecycle("first", fail_close=True), Lifecycle("second")
    worker = InteractionWorker(
        output=FanoutSink([first, second, Fixed("accepted", "plain")])
    )
    client: Any = object()
    await worker.astart(client)
    assert first.started_with == second.started_with == [client]
    with pytest.raises(OSError, match="disk gone"):
        await worker.aclose()
    assert first.closed == second.closed == 1


async def test_a_fanout_inside_a_fanout_reports_its_own_outcome() -> None:
    inner = FanoutSink(
        [Hangs("slow", timeout=0.2), Fixed("accepted", "fast")], name="ui"
    )
    outer = FanoutSink([inner, Fixed("accepted", "file")], policy="any")
    with anyio.fail_after(5):
        receipt = await deliver_output(_request(), outer)
    assert receipt.status == "accepted"
    metadata: Any = receipt.metadata
    assert metadata["sinks"]["ui"] == {
        "status": "unknown",
        "error": {
            "code": "SINKS_INCOMPLETE",
            "message": "Not every sink accepted the delivery: slow",
        },
    }
