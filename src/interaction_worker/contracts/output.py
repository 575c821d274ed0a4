"""OUTPUT payloads: the delivery request, its artifacts and the receipt."""

from typing import Literal

from pydantic import ConfigDict, Field

from ._base import WireModel
from .common import InteractionError, JsonObject, Message, Reference

ReceiptStatus = Literal["accepted", "rejected", "unknown"]
RECEIPT_STATUSES: frozenset[str] = frozenset(("accepted", "rejected", "unknown"))


class Artifact(WireModel):
    """A named reference delivered with a message. Extra keys are kept, as the reference keeps them."""

    model_config = ConfigDict(extra="allow")

    name: str
    reference: Reference


class OutputRequest(WireModel):
    """One delivery. Unknown top-level keys are dropped; the message keeps its extra keys."""

    delivery_id: str = Field(min_length=1, max_length=256)
    message: Message
    artifacts: list[Artifact] | None = None


class OutputReceipt(WireModel):
    """What a sink says of a delivery: `accepted` only means the sink accepted it."""

    delivery_id: str = Field(min_length=1)
    status: ReceiptStatus
    artifacts: list[Artifact] | None = None
    error: InteractionError | None = None
    metadata: JsonObject | None = None
