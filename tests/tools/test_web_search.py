"""web_search over a provider double (reference section 8): request rules and messages, result
normalisation, the network permission, and provider failures that never expose the provider's text."""

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from interaction_worker import ExternalResult, Sandbox, ToolRegistry
from interaction_worker.errors import ConfigurationError, InvalidInput, PermissionDenied
from interaction_worker.nodes import (
    is_rerunnable,
    observe_external_result,
    tool_definition,
)
from interaction_worker.tools import WebSearchTool

ORIGIN = "https://api.search.brave.com"
QUERY_RULE = (
    "query must be a nonempty single-line string of at most 600 characters and 75 words"
)
LIMIT_RULE = "limit must be an integer from 1 to 20"


def structured_of(result: ExternalResult) -> dict[str, Any]:
    content = result.structured_content
    assert isinstance(content, dict)
    return content


def hit(n: int = 1, **fields: Any) -> dict[str, Any]:
    return {
        "title": f"Title {n}",
        "url": f"https://example.com/{n}",
        "snippet": f"Snippet {n}",
        **fields,
    }


class Provider:
    """Records each search and answers with `results`, or raises `error`."""

    def __init__(
        self,
        results: object = (),
        *,
        error: BaseException | None = None,
        origin: str = ORIGIN,
    ) -> None:
        self.origin = origin
        self.results = results
        self.error = error
        self.calls: list[tuple[str, int]] = []

    async def search(self, query: str, limit: int) -> Sequence[Mapping[str, Any]]:
        self.calls.append((query, limit))
        if self.error is not None:
            raise self.error
        return self.results  # type: ignore[return-value]


def sandbox(network: Sequence[str] = (ORIGIN,)) -> Sandbox:
    return Sandbox(tools=["web_search"], network=network)


async def search(
    provider: Provider, arguments: dict[str, Any], network: Sequence[str] = (ORIGIN,)
) -> ExternalResult:
    registry = ToolRegistry([WebSearchTool(provider)])
    call = {"id": "w-1", "name": "web_search", "arguments": arguments}
    return await registry.call(call, sandbox(network))


def test_definition_matches_the_reference() -> None:
    tool = WebSearchTool(Provider())
    assert tool_definition(tool).to_wire() == {
        "name": "web_search",
        "inputSchema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 600,
                    "description": "What to search for: one line of at most 600 "
                    "characters and 75 words",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 20,
                    "default": 5,
                    "description": "How many results at most, 1 to 20",
                },
            },
            "required": ["query"],
        },
        "description": "Search the public web and return bounded titles, URLs, and snippets",
        "effects": ["network"],
        "requiresApproval": False,
    }
    assert tool.idempotent is True and is_rerunnable(tool)


# --- the request ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        pytest.param(
            {"query": "x", "extra": 1}, "Unexpected web_search argument", id="extra-key"
        ),
        pytest.param(
            {"extra": 1}, "Unexpected web_search argument", id="extra-key-first"
        ),
        pytest.param({}, QUERY_RULE, id="missing-query"),
        pytest.param({"query": None}, QUERY_RULE, id="null-query"),
        pytest.param({"query": ""}, QUERY_RULE, id="empty"),
        pytest.param({"query": " \t\u3000"}, QUERY_RULE, id="blank-js-whitespace"),
        pytest.param({"query": "x" * 601}, QUERY_RULE, id="601-characters"),
        pytest.param({"query": "😀" * 301}, QUERY_RULE, id="602-utf16-units"),
        pytest.param({"query": " ".join(["w"] * 76)}, QUERY_RULE, id="76-words"),
        pytest.param(
            {"query": "\u3000".join(["w"] * 76)},
            QUERY_RULE,
            id="76-words-unicode-space",
        ),
        pytest.param({"query": "a\nb"}, QUERY_RULE, id="newline"),
        pytest.param({"query": "a\rb"}, QUERY_RULE, id="carriage-return"),
        pytest.param({"query": "a\0b"}, QUERY_RULE, id="nul"),
        pytest.param({"query": 5}, QUERY_RULE, id="number"),
        pytest.param({"query": "x", "limit": 0}, LIMIT_RULE, id="limit-0"),
        pytest.param({"query": "x", "limit": 21}, LIMIT_RULE, id="limit-21"),
        pytest.param({"query": "x", "limit": "5"}, LIMIT_RULE, id="limit-string"),
        pytest.param({"query": "x", "limit": True}, LIMIT_RULE, id="limit-bool"),
        pytest.param({"query": "x", "limit": 1.5}, LIMIT_RULE, id="limit-fraction"),
        pytest.param({"query": "", "limit": 0}, QUERY_RULE, id="query-before-limit"),
    ],
)
async def test_invalid_requests_are_refused_before_the_provider(
    arguments: dict[str, Any], message: str
) -> None:
    provider = Provider()
    with pytest.raises(InvalidInput) as refused:
        await search(provider, arguments)
    assert refused.value.message == message
    assert provider.calls == []


@pytest.mark.parametrize(
    ("arguments", "sent"),
    [
        pytest.param(
            {"query": "  nats  worker "},
            ("nats  worker", 5),
            id="trimmed-default-limit",
        ),
        pytest.param({"query": "x", "limit": None}, ("x", 5), id="null-limit-is-5"),
        pytest.param({"query": "x", "limit": 2.0}, ("x", 2), id="integral-float"),
        pytest.param({"query": "x", "limit": 20}, ("x", 20), id="limit-20"),
        pytest.param({"query": "x" * 600}, ("x" * 600, 5), id="600-characters"),
        pytest.param(
            {"query": " ".join(["w"] * 75)}, (" ".join(["w"] * 75), 5), id="75-words"
        ),
        pytest.param({"query": "a\tb"}, ("a\tb", 5), id="tab"),
    ],
)
async def test_the_provider_gets_the_trimmed_query_and_the_limit(
    arguments: dict[str, Any], sent: tuple[str, int]
) -> None:
    provider = Provider([])
    result = await search(provider, arguments)
    assert provider.calls == [sent]
    assert result.structured_content == {
        "query": sent[0],
        "results": [],
        "truncated": False,
    }


async def test_the_network_origin_is_checked_after_the_request_and_before_the_provider() -> (
    None
):
    provider = Provider([hit()])
    with pytest.raises(
        PermissionDenied,
        match="^Permission denied: network:https://api.search.brave.com$",
    ):
        await search(
            provider, {"query": "x"}, network=["https://api.search.brave.com/"]
        )
    with pytest.raises(InvalidInput):
        await search(provider, {"query": ""}, network=[])
    assert provider.calls == []


# --- results ----------------------------------------------------------------------------------------


async def test_results_are_normalised_and_referenced() -> None:
    provider = Provider(
        [
            hit(1, title="  A \n\t title ", snippet="\u3000snip\u00a0pet  "),
            hit(2, url="HTTPS://Example.COM:443", snippet=""),
        ]
    )
    result = await search(provider, {"query": "x"})
    assert result.to_wire() == {
        "callId": "w-1",
        "source": "web_search",
        "status": "success",
        "structuredContent": {
            "query": "x",
            "results": [
                {
                    "title": "A title",
                    "url": "https://example.com/1",
                    "snippet": "snip pet",
                },
                {"title": "Title 2", "url": "https://example.com/", "snippet": ""},
            ],
            "truncated": False,
        },
        "references": [
            {"uri": "https://example.com/1"},
            {"uri": "https://example.com/"},
        ],
    }
    observation = observe_external_result(result)
    assert observation.status == "success"


async def test_one_reference_per_url() -> None:
    provider = Provider([hit(1), hit(2, url="https://example.com/1"), hit(3)])
    result = await search(provider, {"query": "x"})
    assert len(structured_of(result)["results"]) == 3
    assert result.to_wire()["references"] == [
        {"uri": "https://example.com/1"},
        {"uri": "https://example.com/3"},
    ]


async def test_more_results_than_the_limit_are_cut_and_marked() -> None:
    provider = Provider([hit(n) for n in range(1, 5)])
    result = await search(provider, {"query": "x", "limit": 2})
    content = structured_of(result)
    assert [r["title"] for r in content["results"]] == ["Title 1", "Title 2"]
    assert content["truncated"] is True


@pytest.mark.parametrize(
    ("field", "length", "maximum"),
    [("title", 257, 256), ("snippet", 2049, 2048)],
)
async def test_long_titles_and_snippets_are_cut_in_code_points(
    field: str, length: int, maximum: int
) -> None:
    provider = Provider([hit(1, **{field: "😀" * length})])
    result = await search(provider, {"query": "x"})
    content = structured_of(result)
    assert content["results"][0][field] == "😀" * maximum
    assert content["truncated"] is True
    exact = await search(Provider([hit(1, **{field: "😀" * maximum})]), {"query": "x"})
    assert structured_of(exact)["truncated"] is False


@pytest.mark.parametrize(
    "results",
    [
        pytest.param({"results": []}, id="not-a-list"),
        pytest.param("results", id="a-string"),
        pytest.param(None, id="none"),
        pytest.param([hit(1), "item"], id="item-not-an-object"),
        pytest.param([["title"]], id="item-a-list"),
        pytest.param([hit(1, title="   ")], id="blank-title"),
        pytest.param([hit(1, title="a\0b")], id="nul-title"),
        pytest.param([hit(1, title=5)], id="title-not-a-string"),
        pytest.param([{"url": "https://x.com/", "snippet": ""}], id="no-title"),
        pytest.param([{"title": "t", "url": "https://x.com/"}], id="no-snippet"),
        pytest.param([hit(1, snippet=None)], id="null-snippet"),
        pytest.param([hit(1, snippet="a\0")], id="nul-snippet"),
        pytest.param([hit(1, url="ftp://example.com/")], id="ftp-url"),
        pytest.param([hit(1, url="javascript:alert(1)")], id="javascript-url"),
        pytest.param([hit(1, url="https://user:pw@example.com/")], id="credentials"),
        pytest.param([hit(1, url="https://user@example.com/")], id="username"),
        pytest.param([hit(1, url="example.com/path")], id="relative-url"),
        pytest.param([hit(1, url="https://exa mple.com/")], id="space-in-host"),
        pytest.param([hit(1, url="http://x.com:99999/")], id="bad-port"),
        pytest.param([hit(1, url=None)], id="url-not-a-string"),
    ],
)
async def test_any_invalid_result_fails_the_whole_search(results: object) -> None:
    result = await search(Provider(results), {"query": "x"})
    assert result.to_wire() == {
        "callId": "w-1",
        "source": "web_search",
        "status": "failed",
        "error": {
            "code": "WEB_SEARCH_FAILED",
            "message": "Web search provider failed",
            "retryable": False,
        },
    }


async def test_results_past_the_limit_are_not_checked() -> None:
    result = await search(Provider([hit(1), "junk"]), {"query": "x", "limit": 1})
    assert result.status == "success"
    assert structured_of(result)["truncated"] is True


async def test_a_provider_exception_never_reaches_the_result_or_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "upstream said: token sk-abc123 /etc/passwd"
    caplog.set_level(logging.DEBUG)
    result = await search(Provider(error=RuntimeError(secret)), {"query": "x"})
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == "WEB_SEARCH_FAILED"
    assert secret not in result.to_json().decode()
    assert "sk-abc123" not in caplog.text
    assert "web_search failed: RuntimeError" in caplog.text


async def test_a_cancellation_inside_the_provider_is_web_search_cancelled() -> None:
    result = await search(Provider(error=asyncio.CancelledError()), {"query": "x"})
    assert result.to_wire() == {
        "callId": "w-1",
        "source": "web_search",
        "status": "cancelled",
        "error": {
            "code": "WEB_SEARCH_CANCELLED",
            "message": "Web search cancelled",
            "retryable": False,
        },
    }


async def test_cancelling_the_call_propagates() -> None:
    started = asyncio.Event()

    class Hanging(Provider):
        async def search(self, query: str, limit: int) -> Sequence[Mapping[str, Any]]:
            started.set()
            await asyncio.Event().wait()
            return []

    task = asyncio.ensure_future(search(Hanging(), {"query": "x"}))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# --- the provider's origin --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "normalised"),
    [
        ("https://api.search.brave.com", "https://api.search.brave.com"),
        ("https://API.Search.Brave.com/", "https://api.search.brave.com"),
        ("https://search.test:443", "https://search.test"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
    ],
)
def test_the_provider_origin_is_normalised(origin: str, normalised: str) -> None:
    assert WebSearchTool(Provider(origin=origin)).origin == normalised


@pytest.mark.parametrize(
    "origin",
    [
        "ftp://search.test",
        "https://user:pw@search.test",
        "https://search.test/path",
        "https://search.test/?q=1",
        "https://search.test/#top",
        "search.test",
        "",
        5,
    ],
)
def test_an_invalid_provider_origin_is_refused(origin: Any) -> None:
    with pytest.raises(
        ConfigurationError, match="^Invalid web search provider origin$"
    ):
        WebSearchTool(Provider(origin=origin))
