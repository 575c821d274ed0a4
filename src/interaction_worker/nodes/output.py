"""INTERACTION.OUTPUT: validate a delivery, hand it to one sink, validate its receipt (reference section 6)."""

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from ..contracts import ContractError, OutputReceipt, OutputRequest
from ..contracts import validation as check
from ..errors import InvalidInput, InvalidResult
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
    """Exactly one `deliver` per request, never retried; sink exceptions propagate.

    The request is validated before the sink is called, a model too: pydantic accepts values the
    reference refuses (a blank deliveryId, a NaN in the content).
    """
    request = output_request(
        value.to_wire() if isinstance(value, OutputRequest) else value
    )
    await side_effect_starts()
    receipt = await sink.deliver(
        request, context or DeliveryContext(request.delivery_id)
    )
    return output_receipt(receipt, request.delivery_id)
