"""`web_search` over a provider protocol (reference section 8): bounded titles, URLs and snippets."""

import asyncio
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from ..contracts import js_trim
from ..contracts._text import JS_WS_CLASS, utf16_length
from ..errors import ConfigurationError, InvalidInput
from ..nodes import ToolContext
from ._arguments import MISSING, exact_keys
from ._urls import parse_web_url

MAX_QUERY_LENGTH = 600
MAX_QUERY_WORDS = 75
MAX_RESULTS = 20
DEFAULT_RESULTS = 5
MAX_TITLE_LENGTH = 256
MAX_SNIPPET_LENGTH = 2_048
_WHITESPACE = re.compile(JS_WS_CLASS + "+")
_QUERY_RULE = (
    f"query must be a nonempty single-line string of at most {MAX_QUERY_LENGTH} "
    f"characters and {MAX_QUERY_WORDS} words"
)


class WebSearchError(Exception):
    """A provider failure with a fixed message (never the provider's text, a key or a body)."""


class WebSearchProvider(Protocol):
    """A search backend: `origin` is what the sandbox's `network` list must grant."""

    @property
    def origin(self) -> str: ...

    async def search(self, query: str, limit: int) -> Sequence[Mapping[str, Any]]:
        """Up to `limit` results, each with `title`, `url` and `snippet` strings."""


class SearchRequest(NamedTuple):
    query: str  # trimmed
    limit: int


def search_request(arguments: Mapping[str, Any]) -> SearchRequest:
    """The reference's `request(input)`: the arguments of the tool and of a provider."""
    exact_keys(arguments, ("query", "limit"), "Unexpected web_search argument")
    query = arguments.get("query", MISSING)
    if (
        not isinstance(query, str)
        or not js_trim(query)
        or utf16_length(query) > MAX_QUERY_LENGTH
        or len(_WHITESPACE.split(js_trim(query))) > MAX_QUERY_WORDS
        or any(ch in query for ch in "\0\r\n")
    ):
        raise InvalidInput(_QUERY_RULE)
    limit = arguments.get("limit")  # absent or null: the default
    if limit is None:
        limit = DEFAULT_RESULTS
    if isinstance(limit, float) and limit.is_integer():
        limit = int(limit)
    if (
        isinstance(limit, bool)
        or not isinstance(limit, int)
        or not 1 <= limit <= MAX_RESULTS
    ):
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_RESULTS}")
    return SearchRequest(js_trim(query), limit)


def provider_origin(value: object) -> str:
    """The provider's origin as the sandbox compares it: scheme://host[:port], nothing else."""
    url = parse_web_url(value) if isinstance(value, str) else None
    if (
        url is None
        or url.path != "/"
        or url.query is not None
        or url.fragment is not None
    ):
        raise ConfigurationError("Invalid web search provider origin")
    return url.origin


def _text(
    value: object, name: str, maximum: int, *, empty_ok: bool
) -> tuple[str, bool]:
    if (
        not isinstance(value, str)
        or (not empty_ok and not js_trim(value))
        or "\0" in value
    ):
        raise WebSearchError(f"Invalid web search {name}")
    folded = js_trim(_WHITESPACE.sub(" ", value))
    if len(folded) <= maximum:  # code points
        return folded, False
    return folded[:maximum], True


def normalize_results(value: object, limit: int) -> tuple[list[dict[str, str]], bool]:
    """The first `limit` results, checked and bounded; any invalid one fails the whole search."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise WebSearchError("Invalid web search results")
    truncated = len(value) > limit
    results = []
    for item in value[:limit]:
        if not isinstance(item, Mapping):
            raise WebSearchError("Invalid web search result")
        title, cut_title = _text(
            item.get("title"), "title", MAX_TITLE_LENGTH, empty_ok=False
        )
        snippet, cut_snippet = _text(
            item.get("snippet"), "snippet", MAX_SNIPPET_LENGTH, empty_ok=True
        )
        raw_url = item.get("url")
        url = parse_web_url(raw_url) if isinstance(raw_url, str) else None
        if url is None:
            raise WebSearchError("Invalid web search URL")
        truncated = truncated or cut_title or cut_snippet
        results.append({"title": title, "url": url.href, "snippet": snippet})
    return results, truncated


class WebSearchTool:
    """`web_search`: checks the query, asks the sandbox for `network:<origin>`, calls the provider
    once. A provider failure is a `failed` result WEB_SEARCH_FAILED, whatever it raised."""

    name = "web_search"
    description = "Search the public web and return bounded titles, URLs, and snippets"
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY_LENGTH,
                "description": f"What to search for: one line of at most {MAX_QUERY_LENGTH} "
                f"characters and {MAX_QUERY_WORDS} words",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RESULTS,
                "default": DEFAULT_RESULTS,
                "description": f"How many results at most, 1 to {MAX_RESULTS}",
            },
        },
        "required": ["query"],
    }
    effects = ("network",)
    requires_approval = False
    idempotent = True

    def __init__(self, provider: WebSearchProvider) -> None:
        self.origin = provider_origin(provider.origin)
        self.provider = provider

    def validate(self, arguments: dict[str, Any]) -> None:
        search_request(arguments)

    async def execute(
        self, arguments: dict[str, Any], context: ToolContext
    ) -> dict[str, Any]:
        request = search_request(arguments)
        context.sandbox.check("network", self.origin)
        try:
            raw = await self.provider.search(request.query, request.limit)
            results, truncated = normalize_results(raw, request.limit)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # this call is cancelled: the caller reports it
            # The provider's own work was cancelled, not this call.
            return _failure("cancelled", "WEB_SEARCH_CANCELLED", "Web search cancelled")
        except Exception as error:
            reason = (
                str(error)
                if isinstance(error, WebSearchError)
                else type(error).__name__
            )
            context.logger.warning("web_search failed: %s", reason)
            return _failure("failed", "WEB_SEARCH_FAILED", "Web search provider failed")
        references = list(dict.fromkeys(result["url"] for result in results))
        return {
            "status": "success",
            "structuredContent": {
                "query": request.query,
                "results": results,
                "truncated": truncated,
            },
            "references": [{"uri": uri} for uri in references],
        }


def _failure(status: str, code: str, message: str) -> dict[str, Any]:
    return {
        "status": status,
        "error": {"code": code, "message": message, "retryable": False},
    }
