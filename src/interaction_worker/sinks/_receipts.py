"""What every sink shares: its receipts in wire form, and the checks of its `name` and `timeout`."""

import math
from typing import Any

from ..contracts import OutputRequest
from ..errors import ConfigurationError

DEFAULT_TIMEOUT = 10.0  # seconds (docs/configuration.md: every sink's `timeout`)

Receipt = dict[str, Any]


def accepted(request: OutputRequest, metadata: dict[str, Any] | None = None) -> Receipt:
    receipt: Receipt = {"deliveryId": request.delivery_id, "status": "accepted"}
    if metadata is not None:
        receipt["metadata"] = metadata
    return receipt


def rejected(
    request: OutputRequest, code: str, message: str, *, retryable: bool = False
) -> Receipt:
    """The sink certainly did not take the delivery; `retryable` when sending it again may work."""
    return {
        "deliveryId": request.delivery_id,
        "status": "rejected",
        "error": {"code": code, "message": message, "retryable": retryable},
    }


def unknown(request: OutputRequest, code: str, message: str) -> Receipt:
    """The delivery may or may not have arrived: never retried automatically, it could arrive twice."""
    return {
        "deliveryId": request.delivery_id,
        "status": "unknown",
        "error": {"code": code, "message": message, "retryable": False},
    }


def timed_out(request: OutputRequest, timeout: float) -> Receipt:
    return unknown(
        request, "SINK_TIMEOUT", f"The sink did not answer within {timeout:g} s"
    )


def unavailable(request: OutputRequest) -> Receipt:
    """Nothing was sent (no connection): a retry cannot deliver twice."""
    return rejected(
        request,
        "SINK_UNAVAILABLE",
        "The sink is not connected; nothing was sent",
        retryable=True,
    )


def check_name(name: object) -> str:
    """A sink's name: nonblank, without control characters (it goes into headers and receipts)."""
    if (
        not isinstance(name, str)
        or not name.strip()
        or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name)
    ):
        raise ConfigurationError(
            "name must be a nonblank string without control characters"
        )
    return name


def check_timeout(timeout: object) -> float:
    """A positive, finite number of seconds."""
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise ConfigurationError("timeout must be a positive number of seconds")
    return float(timeout)
