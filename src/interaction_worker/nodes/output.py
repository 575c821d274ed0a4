"""INTERACTION.OUTPUT: validate a delivery, hand it to one sink, validate its receipt (reference section 6)."""

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from ..contracts import ContractError, OutputReceipt, OutputRequest
from ..contracts import validation as check
from ..errors import InvalidInput, InvalidResult, RegistrationError
from ._callables import is_coroutine_function
from .context import DeliveryContext
from .side_effects import side_effect_starts


@runtime_checkable
class OutputSink(Protocol):
    """Any object with this `deliver` is a sink; an optional `name` is used in fan-out receipts.

    `accepted` means only that the sink accepted the delivery; `rejected` and `unknown` carry a safe
    error. A sink never retries by itself: a retry could deliver twice.
    """

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        """Return an OutputReceipt (a mapping in wire form, or the model)."""


def check_sink(sink: object, name: str | None = None) -> None:
    """RegistrationError for an object that is not a sink: checked when it is given, not at each delivery."""
    if not is_coroutine_function(getattr(sink, "deliver", None)):
        named = getattr(sink, "name", None) if name is None else name
        label = named if isinstance(named, str) and named else type(sink).__name__
        raise RegistrationError(
            f"Invalid sink {label}: deliver must be an async method"
        )


def output_request(value: object) -> OutputRequest:
    try:
        return check.output_request(value)
    except ContractError as error:
        raise InvalidInput(error.message) from None


def output_receipt(value: object, delivery_id: str) -> OutputReceipt:
    """Validate a sink's receipt: an invalid one, or one for another delivery, is INVALID_RESULT."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    elif isinstance(value, Mapping) and not isinstance(value, dict):
        value = dict(value)
    try:
        receipt = check.output_receipt(value)
    except ContractError as error:
        raise InvalidResult(error.message) from None
    if receipt.delivery_id != delivery_id:
        raise InvalidResult("Output receipt deliveryId mismatch")
    return receipt


async def deliver_output(
    value: object | OutputRequest,
    sink: OutputSink,
    context: DeliveryContext | None = None,
) -> OutputReceipt:
    """Exactly one `deliver` per request, never retried; sink exceptions propagate, except a
    CancelledError the sink raises while this delivery is not being cancelled: the sink's own work
    was cut, and the receipt is `unknown` SINK_CANCELLED (logged).

    The request is validated before the sink is called, a model too: pydantic accepts values the
    reference refuses (a blank deliveryId, a NaN in the content).
    """
    request = output_request(
        value.to_wire() if isinstance(value, OutputRequest) else value
    )
    await side_effect_starts()
    context = context or DeliveryContext(request.delivery_id)
    try:
        receipt = await sink.deliver(request, context)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # this delivery is being cancelled: its caller answers it
        # The sink's own work was cancelled (a future or task it awaited), not this delivery: it
        # may have sent it or not.
        context.logger.warning(
            "the sink's call for delivery %s was cancelled", request.delivery_id
        )
        return cancelled_receipt(request.delivery_id)
    return output_receipt(receipt, request.delivery_id)


SINK_CANCELLED = "SINK_CANCELLED"


def cancelled_receipt(delivery_id: str) -> OutputReceipt:
    """The receipt of a delivery whose sink call was cancelled before it answered: `unknown`, since
    the sink may have it (docs/guarantees.md)."""
    return check.output_receipt(
        {
            "deliveryId": delivery_id,
            "status": "unknown",
            "error": {
                "code": SINK_CANCELLED,
                "message": "The sink's call was cancelled before it answered",
                "retryable": False,
            },
        }
    )
