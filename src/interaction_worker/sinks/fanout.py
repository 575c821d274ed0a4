"""A sink that hands each delivery to several sinks at once and combines their receipts."""

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from nats.aio.client import Client

from ..contracts import OutputRequest, is_safe_message
from ..errors import ConfigurationError, InvalidResult, RegistrationError
from ..nodes import (
    DeliveryContext,
    OutputSink,
    cancelled_receipt,
    check_sink,
    output_receipt,
)
from ._receipts import Receipt, check_name, timed_out
from ._sinks import (
    DeliveryCounts,
    close_sink,
    deliver_within,
    sink_name,
    sink_timeout,
    start_sink,
)

Policy = Literal["all", "any"]
POLICIES: tuple[Policy, ...] = ("all", "any")
_MARGIN = 1.0  # seconds


@dataclass(frozen=True)
class _Outcome:
    status: str
    error: dict[str, Any] | None = None


class FanoutSink:
    """Delivers to every sink concurrently and combines their statuses under `policy`
    (docs/configuration.md, `output.policy`):

    - `all`: `accepted` iff every sink accepted; `rejected` iff every sink rejected; else `unknown`;
    - `any`: `accepted` iff at least one sink accepted; `rejected` iff every sink rejected; else
      `unknown`.

    Each sink is held to its own `timeout` attribute (10 s without one). A sink that raises, times
    out, returns an invalid receipt or whose call is cancelled counts as that sink's `unknown`
    (SINK_FAILED, SINK_TIMEOUT, INVALID_RESULT, SINK_CANCELLED); the exception is logged, never put
    in the receipt. The receipt's metadata is
    `{"sinks": {"<name>": {"status": …, "error"?: {…}}}}`; a receipt that is not accepted carries
    SINKS_REJECTED (status `rejected`) or SINKS_INCOMPLETE (status `unknown`), whose message names
    the sinks that did not accept, by name only.

    Args:
        sinks: the sinks, each named by its `name` attribute, else `<ClassName>#<index>`; the
            names must be unique.
        policy: `all` or `any`.
        name: this sink's own name, when it is itself part of a fan-out.

    Raises:
        RegistrationError: two sinks have the same name.
        ConfigurationError: no sinks, an unknown policy, or a sink's invalid `timeout`.
    """

    def __init__(
        self,
        sinks: Sequence[OutputSink],
        *,
        policy: Policy = "all",
        name: str = "fanout",
    ) -> None:
        if policy not in POLICIES:
            raise ConfigurationError("policy must be one of all, any")
        if not sinks:
            raise ConfigurationError("a fan-out needs at least one sink")
        self.sinks = tuple(sinks)
        self.policy = policy
        self.name = check_name(name)
        self.names = tuple(sink_name(sink, index) for index, sink in enumerate(sinks))
        for index, sink_name_ in enumerate(self.names):
            if sink_name_ in self.names[:index]:
                raise RegistrationError(
                    f"Sink name {json.dumps(sink_name_, ensure_ascii=False)} is used twice"
                )
        for index, sink in enumerate(self.sinks):
            check_sink(sink, json.dumps(self.names[index], ensure_ascii=False))
        timeouts = []
        for index, sink in enumerate(self.sinks):
            try:
                timeouts.append(sink_timeout(sink))
            except ConfigurationError as error:
                raise ConfigurationError(
                    f"sink {json.dumps(self.names[index], ensure_ascii=False)}: {error}"
                ) from None
        self.timeouts = tuple(timeouts)
        # What a fan-out holding this one waits: a little past its slowest sink, so that sink's
        # own timeout (and this receipt's per-sink metadata) comes first.
        self.timeout = max(self.timeouts) + _MARGIN
        self.deliveries = DeliveryCounts()

    async def deliver(
        self, request: OutputRequest, context: DeliveryContext
    ) -> dict[str, Any]:
        tasks = [
            asyncio.create_task(self._one(index, request, context))
            for index in range(len(self.sinks))
        ]
        try:
            await asyncio.wait(tasks)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)
            for name in self.names:
                self.deliveries.count(name, "unknown")
            raise
        outcomes = []
        for name, task in zip(self.names, tasks, strict=True):
            if task.cancelled():  # from outside the fan-out: it ended without answering
                context.logger.warning(
                    "fan-out %s: sink %s's call was cancelled", self.name, name
                )
                outcome = _cancelled(request)
            else:
                outcome = task.result()
            self.deliveries.count(name, outcome.status)
            outcomes.append(outcome)
        return self._combine(request, outcomes)

    async def _one(
        self, index: int, request: OutputRequest, context: DeliveryContext
    ) -> _Outcome:
        sink, timeout = self.sinks[index], self.timeouts[index]
        try:
            value = await deliver_within(sink, timeout, request, context)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the fan-out cancels its sinks: it counts and answers them
            # The sink's own work was cancelled: it may have the delivery or not.
            context.logger.warning(
                "fan-out %s: sink %s's call was cancelled", self.name, self.names[index]
            )
            return _cancelled(request)
        except Exception:
            context.logger.exception(
                "fan-out %s: sink %s raised", self.name, self.names[index]
            )
            return _failed("SINK_FAILED")
        if value is None:
            return _Outcome("unknown", timed_out(request, timeout)["error"])
        try:
            receipt = output_receipt(value, request.delivery_id)
        except InvalidResult as invalid:
            return _failed("INVALID_RESULT", invalid.message)
        error = None if receipt.error is None else receipt.error.to_wire()
        return _Outcome(receipt.status, error)

    def _combine(self, request: OutputRequest, outcomes: list[_Outcome]) -> Receipt:
        statuses = [outcome.status for outcome in outcomes]
        if all(status == "rejected" for status in statuses):
            status = "rejected"
        elif (all if self.policy == "all" else any)(s == "accepted" for s in statuses):
            status = "accepted"
        else:
            status = "unknown"
        sinks: dict[str, Any] = {}
        for name, outcome in zip(self.names, outcomes, strict=True):
            entry: dict[str, Any] = {"status": outcome.status}
            if outcome.error is not None:
                entry["error"] = outcome.error
            sinks[name] = entry
        receipt: Receipt = {
            "deliveryId": request.delivery_id,
            "status": status,
            "metadata": {"sinks": sinks},
        }
        if status != "accepted":
            failed = [
                name
                for name, outcome in zip(self.names, outcomes, strict=True)
                if outcome.status != "accepted"
            ]
            receipt["error"] = _error(self.policy, status, failed)
        return receipt

    async def start(self, client: Client) -> None:
        """Hand the worker's connection to every sink that has `start(client)`."""
        for sink in self.sinks:
            await start_sink(sink, client)

    async def aclose(self) -> None:
        """Close every sink that has `aclose()` or `close()`; the first failure is raised after all."""
        failure: BaseException | None = None
        for sink in self.sinks:
            try:
                await close_sink(sink)
            except Exception as error:
                failure = failure or error
        if failure is not None:
            raise failure


def _cancelled(request: OutputRequest) -> _Outcome:
    receipt = cancelled_receipt(request.delivery_id)
    assert receipt.error is not None  # an unknown receipt carries its error
    return _Outcome("unknown", receipt.error.to_wire())


def _failed(code: str, message: str = "The sink raised an exception") -> _Outcome:
    return _Outcome("unknown", {"code": code, "message": message, "retryable": False})


def _error(policy: Policy, status: str, failed: list[str]) -> dict[str, Any]:
    if status == "rejected":
        code, lead = "SINKS_REJECTED", "Every sink rejected the delivery"
    elif policy == "all":
        code, lead = "SINKS_INCOMPLETE", "Not every sink accepted the delivery"
    else:
        code, lead = "SINKS_INCOMPLETE", "No sink accepted the delivery"
    message = f"{lead}: {', '.join(failed)}"
    # A name is the configuration's or the code's text: one that breaks the safety rule (a path,
    # a credential marker) or makes the message too long leaves the names to the metadata.
    if not is_safe_message(message):
        message = f"{lead} (see metadata.sinks)"
    return {"code": code, "message": message}
