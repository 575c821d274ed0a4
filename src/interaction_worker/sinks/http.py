"""A sink that POSTs each delivery to a webhook."""

import asyncio
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..contracts import OutputRequest
from ..contracts.keys import subject_key
from ..errors import ConfigurationError
from ..nodes import DeliveryContext
from ._receipts import (
    DEFAULT_TIMEOUT,
    accepted,
    check_name,
    check_timeout,
    rejected,
    timed_out,
    unknown,
)

_RETRYABLE = frozenset((408, 429))  # Request Timeout, Too Many Requests


class HttpSink:
    """POSTs each delivery's wire JSON with `Idempotency-Key: <K>` (the deliveryId's subject key: a
    raw id may not be a valid header value), so the endpoint can drop a delivery sent twice.

    Receipts: 2xx → `accepted`; 3xx and 4xx → `rejected` `HTTP_<status>` (redirects are not
    followed), `retryable` for 408 and 429; 5xx → `unknown` `HTTP_<status>` (the endpoint may have
    acted before failing); a timeout → `unknown` SINK_TIMEOUT; a connection dropped after the
    request went out → `unknown` SINK_CONNECTION_LOST; no connection at all (refused, or not
    established in time: nothing was sent) → `rejected` SINK_UNAVAILABLE, retryable. No error
    carries the URL or a response body; the response body is not read.

    Args:
        url: the endpoint, http or https.
        client: the `httpx.AsyncClient` to send with (for a transport, headers, TLS or proxy of
            your own); the sink never closes a client it was given. By default it makes one,
            closed by `aclose()`.
        name: the sink's name in fan-out receipts.
        timeout: seconds for the whole exchange.
    """

    def __init__(
        self,
        url: str,
        *,
        client: httpx.AsyncClient | None = None,
        name: str = "http",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if not _is_http_url(url):
            raise ConfigurationError("url must be an http or https URL with a host")
        self.url = url
        self.name = check_name(name)
        self.timeout = check_timeout(timeout)
        self._owns_client = client is None
        self._client = client if client is not None else httpx.AsyncClient()

    async def deliver(
        self, request: OutputRequest, context: DeliveryContext
    ) -> dict[str, Any]:
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": subject_key(request.delivery_id),
        }
        try:
            async with asyncio.timeout(self.timeout):
                async with self._client.stream(
                    "POST",
                    self.url,
                    content=request.to_json(),
                    headers=headers,
                    timeout=self.timeout,
                    follow_redirects=False,
                ) as response:
                    status = response.status_code
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout):
            return rejected(
                request,
                "SINK_UNAVAILABLE",
                "The endpoint could not be reached; nothing was sent",
                retryable=True,
            )
        except (TimeoutError, httpx.TimeoutException):
            return timed_out(request, self.timeout)
        except httpx.TransportError:
            return unknown(
                request,
                "SINK_CONNECTION_LOST",
                "The connection to the endpoint was lost before its answer",
            )
        if 200 <= status < 300:
            return accepted(request)
        message = f"The endpoint answered HTTP {status}"
        if status >= 500:
            return unknown(request, f"HTTP_{status}", message)
        return rejected(
            request, f"HTTP_{status}", message, retryable=status in _RETRYABLE
        )

    async def aclose(self) -> None:
        """Close the client the sink made (a client it was given stays open)."""
        if self._owns_client:
            await self._client.aclose()


def _is_http_url(url: object) -> bool:
    if not isinstance(url, str) or any(c.isspace() or ord(c) < 0x20 for c in url):
        return False
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)
