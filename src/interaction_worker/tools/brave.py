"""BraveSearch: the Brave Web Search provider of `web_search` (reference section 8.5), on httpx."""

import asyncio
import math
from collections.abc import Mapping
from typing import Any

import httpx

from ..contracts import JsonRefused, js_trim, parse_json
from ..errors import ConfigurationError
from .web_search import WebSearchError, search_request

BRAVE_ORIGIN = "https://api.search.brave.com"
BRAVE_ENDPOINT = f"{BRAVE_ORIGIN}/res/v1/web/search"
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
_MAX_TIMEOUT = (2**31 - 1) / 1000  # the reference's timer limit, in seconds

_FAILED = "Brave web search request failed"
_INVALID_JSON = "Brave web search returned invalid JSON"
_INVALID_RESULTS = "Brave web search returned invalid results"
_TOO_LARGE = "Brave web search response is too large"
_TIMED_OUT = "Brave web search timed out"


class BraveSearch:
    """`GET /res/v1/web/search?q=…&count=…` with the key in `X-Subscription-Token`.

    Redirects are refused, the whole request (body included) is bounded by `timeout` seconds, and
    the body is read as a stream that is closed as soon as it passes `max_response_bytes`. Every
    failure is a `WebSearchError` with a fixed message: never the key, the body or httpx's text.
    The key is held privately and left out of `repr`.

    Args:
        api_key: the subscription token (`run` reads it from `INTERACTION_BRAVE_API_KEY` only).
        client: an `httpx.AsyncClient` to send with, which the caller closes (tests pass one on an
            `httpx.MockTransport`); without one, each search opens and closes its own.
    """

    origin = BRAVE_ORIGIN

    def __init__(
        self,
        api_key: str,
        *,
        timeout: float = 30.0,
        max_response_bytes: int = 1024 * 1024,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if (
            not isinstance(api_key, str)
            or not js_trim(api_key)
            or "\r" in api_key
            or "\n" in api_key
            or isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or not 0.001 <= timeout <= _MAX_TIMEOUT
        ):
            raise ConfigurationError("Invalid Brave web search configuration")
        if (
            isinstance(max_response_bytes, bool)
            or not isinstance(max_response_bytes, int)
            or not 1 <= max_response_bytes <= MAX_RESPONSE_BYTES
        ):
            raise ConfigurationError("Invalid Brave max_response_bytes")
        self._api_key = api_key
        self.timeout = float(timeout)
        self.max_response_bytes = max_response_bytes
        self._client = client

    def __repr__(self) -> str:
        return (
            f"BraveSearch(timeout={self.timeout:g}, "
            f"max_response_bytes={self.max_response_bytes})"
        )

    async def search(self, query: str, limit: int) -> list[dict[str, str]]:
        """Up to `limit` results as `{title, url, snippet}` (the description, or "")."""
        search_request({"query": query, "limit": limit})
        url = httpx.URL(BRAVE_ENDPOINT, params={"q": query, "count": str(limit)})
        try:
            async with asyncio.timeout(self.timeout):
                if self._client is not None:
                    body = await self._get(self._client, url)
                else:
                    async with httpx.AsyncClient() as client:
                        body = await self._get(client, url)
        except WebSearchError:
            raise
        except (TimeoutError, httpx.TimeoutException):
            raise WebSearchError(_TIMED_OUT) from None
        except Exception:
            raise WebSearchError(_FAILED) from None
        return _results(body, limit)

    async def _get(self, client: httpx.AsyncClient, url: httpx.URL) -> bytes:
        headers = {"Accept": "application/json", "X-Subscription-Token": self._api_key}
        async with client.stream(
            "GET", url, headers=headers, follow_redirects=False, timeout=self.timeout
        ) as response:
            # Leaving the block closes the stream: an error status or an oversized body is not
            # read any further.
            if not response.is_success:
                raise WebSearchError(_FAILED)
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > self.max_response_bytes:
                    raise WebSearchError(_TOO_LARGE)
            return bytes(body)


def _results(body: bytes, limit: int) -> list[dict[str, str]]:
    try:
        raw = parse_json(body)
    except JsonRefused:
        raise WebSearchError(_INVALID_JSON) from None
    web = raw.get("web") if isinstance(raw, dict) else None
    results = web.get("results") if isinstance(web, dict) else None
    if not isinstance(results, list):
        raise WebSearchError(_INVALID_RESULTS)
    return [_result(item) for item in results[:limit]]


def _result(item: object) -> dict[str, str]:
    if not isinstance(item, Mapping):
        raise WebSearchError(_INVALID_RESULTS)
    title: Any = item.get("title")
    url: Any = item.get("url")
    description: Any = item.get("description", "")
    if not all(isinstance(v, str) for v in (title, url, description)):
        raise WebSearchError(_INVALID_RESULTS)
    return {"title": title, "url": url, "snippet": description}
