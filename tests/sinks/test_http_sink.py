"""HttpSink: receipts from status codes, timeouts and lost connections, with httpx.MockTransport and
against a real local HTTP server (uvicorn serving a small Starlette app)."""

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from interaction_worker import DeliveryContext, InteractionWorker, OutputRequest
from interaction_worker.errors import ConfigurationError
from interaction_worker.nodes import deliver_output
from interaction_worker.sinks import HttpSink

# A URL with a credential in its query: it must never reach a receipt.
URL = "https://hooks.example.test/deliveries?token=s3cret-value"
BOUND = 10  # seconds: starting or stopping the local server


def _request(delivery_id: str = "d-1", content: Any = "hello") -> OutputRequest:
    return OutputRequest.model_validate(
        {
            "deliveryId": delivery_id,
            "message": {"role": "assistant", "content": content},
        }
    )


async def _deliver(sink: HttpSink, delivery_id: str = "d-1") -> Any:
    return await sink.deliver(_request(delivery_id), DeliveryContext(delivery_id))


def _mock(
    handler: Callable[[httpx.Request], Any], **options: Any
) -> tuple[HttpSink, list[httpx.Request]]:
    """A sink whose client answers with `handler`; the list gets every request it sent."""
    seen: list[httpx.Request] = []

    async def recording(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        outcome = handler(request)
        if asyncio.iscoroutine(outcome):
            outcome = await outcome
        assert isinstance(outcome, httpx.Response)
        return outcome

    client = httpx.AsyncClient(transport=httpx.MockTransport(recording))
    return HttpSink(URL, client=client, **options), seen


def _status(code: int) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(code, text="upstream body with /srv/secret")


def _raises(error: type[httpx.HTTPError]) -> Callable[[httpx.Request], Any]:
    def handler(request: httpx.Request) -> httpx.Response:
        raise error("boom /etc/passwd", request=request)  # type: ignore[call-arg]

    return handler


def _assert_nothing_leaks(receipt: Any) -> None:
    text = json.dumps(receipt)
    for leak in ("example.test", "s3cret", "upstream body", "/srv", "boom", "/etc"):
        assert leak not in text


async def test_a_2xx_accepts_and_the_post_carries_the_delivery_and_idempotency_key() -> (
    None
):
    sink, seen = _mock(_status(201), name="hook")
    request = _request("a.b c", {"text": "✓"})
    receipt = await deliver_output(request, sink)
    assert receipt.to_wire() == {"deliveryId": "a.b c", "status": "accepted"}
    [sent] = seen
    assert sent.method == "POST"
    assert str(sent.url) == URL
    assert sent.content == request.to_json()
    assert sent.headers["Content-Type"] == "application/json"
    assert sent.headers["Idempotency-Key"] == "a=2Eb=20c"


async def test_the_idempotency_key_is_a_valid_header_for_any_id() -> None:
    sink, seen = _mock(_status(204))
    assert (await _deliver(sink, "é\r\nX-Injected: 1"))["status"] == "accepted"
    assert seen[0].headers["Idempotency-Key"] == "=C3=A9=0D=0AX-Injected=3A=201"
    assert "X-Injected" not in seen[0].headers


@pytest.mark.parametrize(
    ("code", "status", "retryable"),
    [
        pytest.param(200, "accepted", None, id="200"),
        pytest.param(202, "accepted", None, id="202"),
        pytest.param(299, "accepted", None, id="299"),
        pytest.param(301, "rejected", False, id="301-not-followed"),
        pytest.param(400, "rejected", False, id="400"),
        pytest.param(404, "rejected", False, id="404"),
        pytest.param(408, "rejected", True, id="408-retryable"),
        pytest.param(413, "rejected", False, id="413"),
        pytest.param(429, "rejected", True, id="429-retryable"),
        pytest.param(500, "unknown", False, id="500"),
        pytest.param(502, "unknown", False, id="502"),
        pytest.param(503, "unknown", False, id="503"),
    ],
)
async def test_the_status_code_decides_the_receipt(
    code: int, status: str, retryable: bool | None
) -> None:
    sink, seen = _mock(_status(code))
    receipt = await _deliver(sink)
    assert len(seen) == 1  # never retried, never redirected
    assert receipt["status"] == status
    if retryable is None:
        assert "error" not in receipt
    else:
        assert receipt["error"] == {
            "code": f"HTTP_{code}",
            "message": f"The endpoint answered HTTP {code}",
            "retryable": retryable,
        }
    _assert_nothing_leaks(receipt)


@pytest.mark.parametrize(
    ("error", "status", "code", "retryable"),
    [
        pytest.param(httpx.ReadTimeout, "unknown", "SINK_TIMEOUT", False, id="read-timeout"),
        pytest.param(httpx.WriteTimeout, "unknown", "SINK_TIMEOUT", False, id="write-timeout"),
        pytest.param(httpx.RemoteProtocolError, "unknown", "SINK_CONNECTION_LOST", False, id="dropped"),
        pytest.param(httpx.ReadError, "unknown", "SINK_CONNECTION_LOST", False, id="reset"),
        pytest.param(httpx.WriteError, "unknown", "SINK_CONNECTION_LOST", False, id="write-error"),
        pytest.param(httpx.ConnectError, "rejected", "SINK_UNAVAILABLE", True, id="refused"),
        pytest.param(httpx.ConnectTimeout, "rejected", "SINK_UNAVAILABLE", True, id="connect-timeout"),
        pytest.param(httpx.PoolTimeout, "rejected", "SINK_UNAVAILABLE", True, id="pool-timeout"),
    ],
)  # fmt: skip
async def test_transport_failures_give_honest_receipts(
    error: type[httpx.HTTPError], status: str, code: str, retryable: bool
) -> None:
    sink, _ = _mock(_raises(error))
    receipt = await _deliver(sink)
    assert receipt["status"] == status
    assert receipt["error"]["code"] == code
    assert receipt["error"]["retryable"] is retryable
    _assert_nothing_leaks(receipt)


async def test_an_endpoint_slower_than_the_timeout_gives_unknown() -> None:
    release = asyncio.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return httpx.Response(200)

    sink, _ = _mock(slow, timeout=0.2)
    with anyio.fail_after(5):
        receipt = await _deliver(sink)
    assert receipt == {
        "deliveryId": "d-1",
        "status": "unknown",
        "error": {
            "code": "SINK_TIMEOUT",
            "message": "The sink did not answer within 0.2 s",
            "retryable": False,
        },
    }


async def test_a_client_given_stays_open_and_one_made_is_closed() -> None:
    given = httpx.AsyncClient(transport=httpx.MockTransport(_status(200)))
    sink = HttpSink(URL, client=given)
    await InteractionWorker(output=sink).aclose()
    assert not given.is_closed
    await given.aclose()
    own = HttpSink(URL)
    await own.aclose()
    assert own._client.is_closed


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("ftp://example.test/x", id="scheme"),
        pytest.param("https:///path", id="no-host"),
        pytest.param("http://example.test:99999/", id="bad-port"),
        pytest.param("http://exa mple.test/", id="space"),
        pytest.param("", id="empty"),
    ],
)
def test_an_invalid_url_is_refused_without_echoing_it(url: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        HttpSink(url)
    assert str(caught.value) == "url must be an http or https URL with a host"


# --- a real local HTTP server -------------------------------------------------------------------


class Hook:
    """A Starlette app: `POST /status/<code>` answers that code; `POST /slow` waits for `release`."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.release = asyncio.Event()
        self.app = Starlette(
            routes=[
                Route("/status/{code:int}", self.status, methods=["POST"]),
                Route("/slow", self.slow, methods=["POST"]),
            ]
        )

    async def status(self, request: Request) -> Response:
        self.received.append((dict(request.headers), await request.body()))
        return Response(status_code=request.path_params["code"])

    async def slow(self, request: Request) -> Response:
        await self.release.wait()
        return Response(status_code=200)


@asynccontextmanager
async def _serving(app: Any) -> AsyncIterator[str]:
    """uvicorn on a free loopback port; yields its base URL; stops it within BOUND seconds."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        with anyio.fail_after(BOUND):
            while not server.started:
                if task.done():
                    task.result()  # raises the reason it did not start
                await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        with anyio.fail_after(BOUND):
            await task


@asynccontextmanager
async def _dropping() -> AsyncIterator[str]:
    """A TCP server that reads the request and closes the connection without answering."""

    async def handle(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await reader.read(65536)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


async def test_a_real_server_gets_the_delivery_and_its_status_decides() -> None:
    hook = Hook()
    async with _serving(hook.app) as base, httpx.AsyncClient(trust_env=False) as client:
        accepted = HttpSink(f"{base}/status/200", client=client)
        request = _request("r-1")
        assert (await deliver_output(request, accepted)).status == "accepted"
        [(headers, body)] = hook.received
        assert body == request.to_json()
        assert headers["idempotency-key"] == "r-1"
        assert headers["content-type"] == "application/json"
        for code, status in ((429, "rejected"), (404, "rejected"), (503, "unknown")):
            sink = HttpSink(f"{base}/status/{code}", client=client)
            receipt = await _deliver(sink, f"r-{code}")
            assert (receipt["status"], receipt["error"]["code"]) == (
                status,
                f"HTTP_{code}",
            )


async def test_a_real_server_slower_than_the_timeout_gives_unknown() -> None:
    hook = Hook()
    async with _serving(hook.app) as base, httpx.AsyncClient(trust_env=False) as client:
        sink = HttpSink(f"{base}/slow", client=client, timeout=0.3)
        receipt = await _deliver(sink)
        hook.release.set()
        assert receipt["status"] == "unknown"
        assert receipt["error"]["code"] == "SINK_TIMEOUT"


async def test_a_connection_dropped_after_the_request_gives_unknown() -> None:
    async with _dropping() as base, httpx.AsyncClient(trust_env=False) as client:
        receipt = await _deliver(HttpSink(f"{base}/hook", client=client))
    assert receipt["status"] == "unknown"
    assert receipt["error"]["code"] == "SINK_CONNECTION_LOST"


async def test_a_port_where_nothing_listens_gives_rejected_retryable() -> None:
    async with _dropping() as base:
        pass  # the port is free again
    async with httpx.AsyncClient(trust_env=False) as client:
        receipt = await _deliver(HttpSink(f"{base}/hook", client=client))
    assert receipt["status"] == "rejected"
    assert receipt["error"] == {
        "code": "SINK_UNAVAILABLE",
        "message": "The endpoint could not be reached; nothing was sent",
        "retryable": True,
    }
