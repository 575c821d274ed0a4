"""BraveSearch on `httpx.MockTransport` (reference section 8.5): the request it sends, the results it
maps, and every failure as a fixed message that never holds the key, the body or httpx's text."""

import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import httpx
import pytest

from interaction_worker import ExternalResult, Sandbox, ToolRegistry
from interaction_worker.errors import ConfigurationError, InvalidInput
from interaction_worker.tools import BraveSearch, WebSearchError, WebSearchTool

KEY = "brave-key-6f1c"
Handler = Callable[[httpx.Request], Any]


def structured_of(result: ExternalResult) -> dict[str, Any]:
    content = result.structured_content
    assert isinstance(content, dict)
    return content


def brave(handler: Handler, **options: Any) -> BraveSearch:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return BraveSearch(KEY, client=client, **options)


def answer(results: Sequence[Any], status: int = 200) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json={"web": {"results": list(results)}})

    return handler


def item(n: int, **fields: Any) -> dict[str, Any]:
    return {
        "title": f"Result {n}",
        "url": f"https://example.com/{n}",
        "description": f"About {n}",
        **fields,
    }


class Tracked(httpx.AsyncByteStream):
    """A response body that counts the chunks it produced and knows whether it was closed."""

    def __init__(self, chunk: bytes = b"x" * 512, count: int | None = None) -> None:
        self.chunk, self.count = chunk, count
        self.sent = 0
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self.count is None or self.sent < self.count:
            self.sent += 1
            yield self.chunk

    async def aclose(self) -> None:
        self.closed = True


async def failure(provider: BraveSearch, query: str = "nats", limit: int = 5) -> str:
    with pytest.raises(WebSearchError) as failed:
        await provider.search(query, limit)
    return str(failed.value)


# --- the request and the results -------------------------------------------------------------------


async def test_sends_one_get_with_the_key_header_and_maps_the_results() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        no_description = {"title": "Result 2", "url": "https://example.com/2"}
        return httpx.Response(200, json={"web": {"results": [item(1), no_description]}})

    results = await brave(handler).search("Ditto Worker", 3)
    (request,) = seen
    assert request.method == "GET"
    assert str(request.url) == (
        "https://api.search.brave.com/res/v1/web/search?q=Ditto+Worker&count=3"
    )
    assert request.headers["accept"] == "application/json"
    assert request.headers["x-subscription-token"] == KEY
    assert results == [
        {"title": "Result 1", "url": "https://example.com/1", "snippet": "About 1"},
        {"title": "Result 2", "url": "https://example.com/2", "snippet": ""},
    ]


async def test_keeps_at_most_limit_results() -> None:
    results = await brave(answer([item(n) for n in range(10)])).search("q", 3)
    assert [r["title"] for r in results] == ["Result 0", "Result 1", "Result 2"]


async def test_through_the_tool_results_are_normalised_and_limited() -> None:
    long_title = "T" * 300
    handler = answer([item(1, title=long_title), item(2, url="HTTPS://Example.com")])
    tool = WebSearchTool(brave(handler))
    sandbox = Sandbox(tools=["web_search"], network=["https://api.search.brave.com"])
    result = await ToolRegistry([tool]).call(
        {"id": "b", "name": "web_search", "arguments": {"query": " q ", "limit": 2}},
        sandbox,
    )
    assert result.status == "success"
    content = structured_of(result)
    assert content["query"] == "q"
    assert [r["url"] for r in content["results"]] == [
        "https://example.com/1",
        "https://example.com/",
    ]
    assert content["results"][0]["title"] == "T" * 256
    assert content["truncated"] is True


# --- failures ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 404, 429, 500, 503])
async def test_a_non_2xx_answer_fails_without_reading_the_body(status: int) -> None:
    body = Tracked(b'{"error": "quota for brave-key-6f1c"}')

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, stream=body)

    assert await failure(brave(handler)) == "Brave web search request failed"
    assert (body.sent, body.closed) == (0, True)


async def test_a_redirect_is_refused_not_followed() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(302, headers={"Location": "https://evil.test/steal"})

    assert await failure(brave(handler)) == "Brave web search request failed"
    assert len(seen) == 1 and seen[0].startswith("https://api.search.brave.com/")


async def test_a_redirect_is_refused_even_by_a_client_that_follows() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(307, headers={"Location": "https://evil.test/"})

    client = httpx.AsyncClient(
        transport=httpx.MockTransport(handler), follow_redirects=True
    )
    assert await failure(BraveSearch(KEY, client=client)) == (
        "Brave web search request failed"
    )
    assert len(seen) == 1


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"not json", id="text"),
        pytest.param(b"", id="empty"),
        pytest.param(b'{"web": {"results": []}} trailing', id="trailing"),
        pytest.param(b'{"web": NaN}', id="nan"),
        pytest.param(b"\xff\xfe", id="not-utf8"),
    ],
)
async def test_a_body_that_is_not_json_fails(body: bytes) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body)

    assert await failure(brave(handler)) == "Brave web search returned invalid JSON"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param([], id="array"),
        pytest.param({}, id="no-web"),
        pytest.param({"web": []}, id="web-array"),
        pytest.param({"web": {}}, id="no-results"),
        pytest.param({"web": {"results": {}}}, id="results-object"),
        pytest.param({"web": {"results": ["x"]}}, id="item-string"),
        pytest.param({"web": {"results": [[]]}}, id="item-array"),
        pytest.param({"web": {"results": [item(1, title=5)]}}, id="title-number"),
        pytest.param({"web": {"results": [item(1, url=None)]}}, id="url-null"),
        pytest.param({"web": {"results": [{"title": "t"}]}}, id="no-url"),
        pytest.param(
            {"web": {"results": [item(1, description=None)]}}, id="null-description"
        ),
        pytest.param(
            {"web": {"results": [item(1, description=3)]}}, id="number-description"
        ),
    ],
)
async def test_results_of_the_wrong_shape_fail(body: Any) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=body)

    assert await failure(brave(handler)) == "Brave web search returned invalid results"


async def test_invalid_titles_and_urls_fail_the_search_through_the_tool() -> None:
    for bad in (item(1, title="  "), item(1, url="ftp://x.test/"), item(1, url="nope")):
        tool = WebSearchTool(brave(answer([bad])))
        sandbox = Sandbox(
            tools=["web_search"], network=["https://api.search.brave.com"]
        )
        result = await ToolRegistry([tool]).call(
            {"id": "b", "name": "web_search", "arguments": {"query": "q"}}, sandbox
        )
        assert result.status == "failed"
        assert result.error is not None
        assert result.error.code == "WEB_SEARCH_FAILED"


async def test_a_streamed_body_over_the_cap_is_abandoned_and_closed() -> None:
    body = Tracked()  # endless

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=body)

    provider = brave(handler, max_response_bytes=4096)
    assert await failure(provider) == "Brave web search response is too large"
    assert body.closed
    assert body.sent == 9  # 4096 bytes fit in 8 chunks of 512; the 9th passes the cap


async def test_a_body_of_exactly_the_cap_is_read() -> None:
    data = json.dumps({"web": {"results": [item(1)]}}).encode()
    body = Tracked(data, count=1)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=body)

    results = await brave(handler, max_response_bytes=len(data)).search("q", 5)
    assert len(results) == 1
    assert body.closed


async def test_a_request_past_the_timeout_fails_as_timed_out() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    with anyio.fail_after(5):
        assert await failure(brave(handler, timeout=0.1)) == (
            "Brave web search timed out"
        )


async def test_a_body_that_never_ends_in_time_fails_as_timed_out() -> None:
    class Slow(Tracked):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b'{"web": '
            await anyio.sleep_forever()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=Slow())

    with anyio.fail_after(5):
        assert await failure(brave(handler, timeout=0.1)) == (
            "Brave web search timed out"
        )


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (httpx.ReadTimeout(f"read timed out, key {KEY}"), "Brave web search timed out"),
        (
            httpx.ConnectError(f"connect failed for {KEY}"),
            "Brave web search request failed",
        ),
        (RuntimeError(f"boom {KEY}"), "Brave web search request failed"),
    ],
)
async def test_transport_errors_become_fixed_messages(
    error: Exception, message: str
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise error

    failed = await failure(brave(handler))
    assert failed == message
    assert KEY not in failed


async def test_the_key_never_appears_in_a_result_a_log_or_a_repr(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, text=f"bad key {KEY}")

    provider = brave(handler)
    tool = WebSearchTool(provider)
    sandbox = Sandbox(tools=["web_search"], network=["https://api.search.brave.com"])
    result = await ToolRegistry([tool]).call(
        {"id": "b", "name": "web_search", "arguments": {"query": "q"}}, sandbox
    )
    assert result.status == "failed"
    assert KEY not in result.to_json().decode()
    assert KEY not in caplog.text
    assert "Brave web search request failed" in caplog.text
    assert KEY not in repr(provider) and KEY not in repr(vars(tool).get("provider"))


async def test_the_provider_checks_its_request_too() -> None:
    provider = brave(answer([]))
    with pytest.raises(InvalidInput, match="^limit must be an integer from 1 to 20$"):
        await provider.search("q", 21)
    with pytest.raises(InvalidInput, match="^query must be"):
        await provider.search("", 5)


# --- configuration ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "options", "message"),
    [
        ("", {}, "Invalid Brave web search configuration"),
        (" \t", {}, "Invalid Brave web search configuration"),
        ("a\nb", {}, "Invalid Brave web search configuration"),
        ("a\rb", {}, "Invalid Brave web search configuration"),
        (KEY, {"timeout": 0}, "Invalid Brave web search configuration"),
        (KEY, {"timeout": True}, "Invalid Brave web search configuration"),
        (KEY, {"timeout": float("inf")}, "Invalid Brave web search configuration"),
        (KEY, {"timeout": 2_147_484}, "Invalid Brave web search configuration"),
        (KEY, {"max_response_bytes": 0}, "Invalid Brave max_response_bytes"),
        (KEY, {"max_response_bytes": 16_777_217}, "Invalid Brave max_response_bytes"),
        (KEY, {"max_response_bytes": 1.5}, "Invalid Brave max_response_bytes"),
    ],
)
def test_invalid_configuration_is_refused_without_the_key(
    key: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        BraveSearch(key, **options)
    assert str(refused.value) == message


def test_defaults_and_origin() -> None:
    provider = BraveSearch(KEY)
    assert (provider.timeout, provider.max_response_bytes) == (30.0, 1_048_576)
    assert provider.origin == "https://api.search.brave.com"
    assert WebSearchTool(provider).origin == "https://api.search.brave.com"
