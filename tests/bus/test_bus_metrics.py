"""Metrics and health over HTTP (docs/configuration.md, "Metrics and health") of a worker served as
`run` serves it, on a real nats-server: each metric moves with what the worker did (a call, a failed
call, a refusal, a delivery, a call in flight, the ledger, an MCP server going down), `/healthz`
answers while the loop runs, and `/readyz` turns 503 while NATS is away, while a required MCP server
is down and while the worker drains."""

import asyncio
import contextlib
import json
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import nats
import nats.errors
import pytest
from bus_doubles import Fails, ListSink
from mcp_harness import HttpProbe, wait_for
from prometheus_client.parser import text_string_to_metric_families

from interaction_worker import InteractionWorker, Sandbox, ToolContext
from interaction_worker.client import InteractionRequestError
from interaction_worker.errors import ServeError
from interaction_worker.monitoring import ServiceState
from interaction_worker.service import ServeOptions, serve
from interaction_worker.subscribers import Incoming
from interaction_worker.testing import NatsServerFactory
from interaction_worker.testing.served import ServeWorker

METRICS = {"listen": "127.0.0.1:0"}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class Ok:
    name = "ok"
    input_schema = {"type": "object"}

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return {"status": "success", "content": "fine"}


class Gate:
    """Holds each call until `opened` is set; `entered` is set once a call is inside."""

    name = "gate"
    input_schema = {"type": "object"}

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.opened = asyncio.Event()

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.entered.set()
        await self.opened.wait()
        return {"status": "success", "content": "through"}


def worker(*tools: Any, output: Any = None) -> InteractionWorker:
    names = [tool.name for tool in tools]
    return InteractionWorker(
        tools=list(tools), sandbox=Sandbox(tools=names), output=output
    )


async def get(url: str) -> httpx.Response:
    async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
        return await http.get(url)


async def scrape(base: str | None) -> Samples:
    assert base is not None
    response = await get(f"{base}/metrics")
    assert response.status_code == 200
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


async def readiness(base: str | None) -> tuple[int, dict[str, Any]]:
    response = await get(f"{base}/readyz")
    return response.status_code, response.json()


async def until_ready(base: str | None, status: int, within: float = 15) -> list[str]:
    """Poll /readyz until it answers `status` (the worker notices a loss on its own time); the
    reasons it gave then."""
    with anyio.fail_after(within):
        while True:
            code, body = await readiness(base)
            if code == status:
                return list(body.get("reasons", []))
            await asyncio.sleep(0.05)


async def test_each_metric_moves_with_calls_failures_refusals_and_deliveries(
    serve_worker: Any,
) -> None:
    handle = await serve_worker(
        worker(Ok(), Fails(), output=ListSink()), metrics=METRICS
    )
    client = handle.client

    assert (await client.call_tool("ok")).result.status == "success"
    assert (await client.call_tool("fails")).result.status == "failed"
    refused = {"call": {"id": "c-refused", "name": "secret", "arguments": {}}}
    await client.send("tool.call", json.dumps(refused).encode())
    receipt = await client.deliver(
        {"deliveryId": "d-1", "message": {"role": "assistant", "content": "hello"}}
    )
    assert receipt.status == "accepted"
    await client.list_tools()
    samples = await scrape(handle.metrics_url)

    requests = "interaction_requests_total"
    assert value(samples, requests, kind="tool", outcome="success") == 1
    assert value(samples, requests, kind="tool", outcome="failed") == 1
    assert value(samples, requests, kind="tool", outcome="refused") == 1
    assert value(samples, requests, kind="tool", outcome="timeout") == 0
    assert value(samples, requests, kind="output", outcome="success") == 1
    assert value(samples, requests, kind="list", outcome="success") == 1
    refusals = "interaction_refusals_total"
    assert value(samples, refusals, kind="tool", code="PERMISSION_DENIED") == 1
    assert value(samples, "interaction_dead_letters_total", kind="tool") == 1
    durations = "interaction_request_duration_seconds"
    assert value(samples, f"{durations}_count", kind="tool") == 3
    assert value(samples, f"{durations}_bucket", kind="tool", le="+Inf") == 3
    assert value(samples, f"{durations}_count", kind="output") == 1
    deliveries = "interaction_sink_deliveries_total"
    assert value(samples, deliveries, sink="ListSink#0", status="accepted") == 1
    assert value(samples, "interaction_in_flight", kind="tool") == 0
    assert value(samples, "interaction_pending") == 0
    assert value(samples, "process_cpu_seconds_total") > 0
    assert not any(name.startswith("interaction_ledger") for name, _ in samples)


async def test_a_fan_out_counts_each_sinks_own_status(serve_worker: Any) -> None:
    handle = await serve_worker(
        worker(Ok(), output=ListSink()),
        metrics=METRICS,
        output={"sinks": [{"type": "console", "name": "screen"}]},
    )
    message = {"role": "assistant", "content": "reject"}  # ListSink rejects this one
    receipt = await handle.client.deliver({"deliveryId": "d-1", "message": message})
    samples = await scrape(handle.metrics_url)

    assert receipt.status == "unknown"  # policy all: one sink accepted, one rejected
    deliveries = "interaction_sink_deliveries_total"
    assert value(samples, deliveries, sink="ListSink#0", status="rejected") == 1
    assert value(samples, deliveries, sink="screen", status="accepted") == 1
    requests = "interaction_requests_total"
    assert value(samples, requests, kind="output", outcome="unknown") == 1


async def test_a_running_call_is_in_flight_and_pending_until_it_is_answered(
    serve_worker: Any,
) -> None:
    gate = Gate()
    handle = await serve_worker(worker(gate), metrics=METRICS)

    call = asyncio.create_task(handle.client.call_tool("gate"))
    with anyio.fail_after(10):
        await gate.entered.wait()
    during = await scrape(handle.metrics_url)
    gate.opened.set()
    assert (await call).result.status == "success"
    after = await scrape(handle.metrics_url)

    assert value(during, "interaction_in_flight", kind="tool") == 1
    assert value(during, "interaction_pending") == 1
    assert value(after, "interaction_in_flight", kind="tool") == 0
    assert value(after, "interaction_pending") == 0
    duration = "interaction_request_duration_seconds_count"
    assert (
        value(during, duration, kind="tool"),
        value(after, duration, kind="tool"),
    ) == (0, 1)


async def test_two_workers_in_one_process_keep_their_metrics_apart(
    serve_worker: Any,
) -> None:
    first = await serve_worker(worker(Fails()), metrics=METRICS)
    second = await serve_worker(worker(Fails()), metrics=METRICS)
    await first.client.call_tool("fails")

    requests = "interaction_requests_total"
    assert (
        value(await scrape(first.metrics_url), requests, kind="tool", outcome="failed")
        == 1
    )
    assert (
        value(await scrape(second.metrics_url), requests, kind="tool", outcome="failed")
        == 0
    )
    assert first.metrics_url != second.metrics_url


async def test_the_ledgers_operations_are_counted_when_it_is_on(
    serve_worker: Any,
) -> None:
    bucket = f"metrics_{uuid.uuid4().hex[:10]}"
    handle = await serve_worker(
        worker(Fails()),
        metrics=METRICS,
        idempotency={"enabled": True, "bucket": bucket},
    )
    try:
        await handle.client.call_tool("fails")
        samples = await scrape(handle.metrics_url)
    finally:
        await handle.client.nc.jetstream().delete_key_value(bucket)

    operations = "interaction_ledger_operations_total"
    assert value(samples, operations, op="create", result="ok") == 1
    assert value(samples, operations, op="update", result="ok") == 2  # started, done


async def test_a_ledger_entry_no_worker_wrote_is_counted_once_and_its_id_refused(
    serve_worker: Any,
) -> None:
    bucket = f"metrics_{uuid.uuid4().hex[:10]}"
    handle = await serve_worker(
        worker(Ok()),
        metrics=METRICS,
        idempotency={"enabled": True, "bucket": bucket},
    )
    js = handle.client.nc.jetstream()
    try:
        kv = await js.key_value(bucket)
        await kv.put("tool.k-1", b"not a record")
        for _ in range(2):
            with pytest.raises(InteractionRequestError):
                await handle.client.call_tool("ok", call_id="k-1")
        samples = await scrape(handle.metrics_url)
    finally:
        await js.delete_key_value(bucket)

    assert value(samples, "interaction_ledger_invalid_entries_total") == 1
    refusals = "interaction_refusals_total"
    assert value(samples, refusals, kind="tool", code="ID_REUSED") == 2


async def test_readiness_turns_503_while_draining_and_discovery_stops_answering(
    serve_worker: Any,
) -> None:
    gate = Gate()
    name = f"metrics-{uuid.uuid4().hex[:8]}"
    handle = await serve_worker(worker(gate), metrics=METRICS, nats={"name": name})
    watcher = await nats.connect(handle.nats_url)
    try:
        assert await readiness(handle.metrics_url) == (200, {"status": "ready"})
        call = asyncio.create_task(handle.client.call_tool("gate"))
        with anyio.fail_after(10):
            await gate.entered.wait()
        stopping = asyncio.create_task(handle.stop())

        assert await until_ready(handle.metrics_url, 503) == [
            "draining: the worker is shutting down"
        ]
        assert (await get(f"{handle.metrics_url}/healthz")).status_code == 200
        with pytest.raises(nats.errors.NoRespondersError):
            await watcher.request(f"$SRV.PING.{name}", b"", timeout=5)
        gate.opened.set()
        await stopping
        assert (await call).result.status == "success"  # the drain let it finish
    finally:
        gate.opened.set()
        await watcher.close()


async def test_readiness_turns_503_while_nats_is_away_and_200_once_it_is_back(
    nats_server_factory: NatsServerFactory,
) -> None:
    server = nats_server_factory()
    starter = ServeWorker(server.url)
    try:
        handle = await starter(worker(Fails()), metrics=METRICS)
        assert await until_ready(handle.metrics_url, 200) == []

        nats_server_factory.stop(server)
        assert await until_ready(handle.metrics_url, 503) == ["disconnected from NATS"]
        assert (await get(f"{handle.metrics_url}/healthz")).status_code == 200
        nats_server_factory("-p", str(server.port), workdir=server.workdir)
        await until_ready(handle.metrics_url, 200)
    finally:
        await starter.aclose()


async def test_a_required_mcp_server_down_shows_in_the_metrics_and_in_readiness(
    serve_worker: Any, tmp_path: Path
) -> None:
    web = HttpProbe(tmp_path / "web")
    await web.start()
    try:
        connection = web.connection()
        served = InteractionWorker(
            mcp={"web": connection}, sandbox=Sandbox(mcp=["web"])
        )
        handle = await serve_worker(served, metrics=METRICS)
        answered = await handle.client.mcp_invoke("web", "echo", {"text": "hi"})
        assert answered.result.status == "success"
        up = await scrape(handle.metrics_url)
        assert value(up, "interaction_mcp_server_up", server="web") == 1
        requests = "interaction_requests_total"
        assert value(up, requests, kind="mcp", outcome="success") == 1

        await web.kill()
        # An idle streamable-HTTP session notices nothing: the next call finds the server gone.
        with contextlib.suppress(InteractionRequestError):
            await handle.client.mcp_invoke("web", "echo", {"text": "lost"})
        await wait_for(lambda: not connection.connected, "the loss to be seen")
        down = await scrape(handle.metrics_url)
        assert value(down, "interaction_mcp_server_up", server="web") == 0
        assert await until_ready(handle.metrics_url, 503) == [
            "the required MCP server web is down"
        ]
    finally:
        await web.kill()


async def test_an_address_already_in_use_fails_the_start_naming_the_key() -> None:
    taken = await asyncio.get_running_loop().create_server(
        asyncio.Protocol, "127.0.0.1", 0
    )
    port = taken.sockets[0].getsockname()[1]
    options = ServeOptions(url="nats://127.0.0.1:1", metrics_listen=f"127.0.0.1:{port}")
    try:
        with pytest.raises(
            ServeError,
            match=rf"^metrics\.listen: cannot listen on 127\.0\.0\.1:{port}: ",
        ):
            await serve(worker(Fails()), options, install_signal_handlers=False)
    finally:
        taken.close()


class CancelsItself:
    """A tool with a bug: it cancels the task running it."""

    name = "cancels"
    input_schema = {"type": "object"}

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(0)
        return {"status": "success"}


async def test_a_worker_lost_to_a_stray_cancellation_is_counted_and_replaced(
    serve_worker: Any,
) -> None:
    handle = await serve_worker(
        worker(CancelsItself(), Ok()), metrics=METRICS, concurrency=1
    )

    with pytest.raises(InteractionRequestError) as refused:
        await handle.client.call_tool("cancels")
    after = await handle.client.call_tool("ok")
    samples = await scrape(handle.metrics_url)

    assert refused.value.code == "INTERNAL"
    assert after.result.status == "success"
    assert value(samples, "interaction_workers_lost_total") == 1
    assert await readiness(handle.metrics_url) == (200, {"status": "ready"})


async def test_readiness_turns_503_while_queued_requests_have_no_worker(
    nats_url: str,
) -> None:
    client = await nats.connect(nats_url, max_reconnect_attempts=1)
    try:
        binding = worker(Ok()).nats_binding(client, prefix=f"t{uuid.uuid4().hex}")
        now = [100.0]
        state = ServiceState(
            binding.handler.worker,  # type: ignore[arg-type]
            client=client,
            binding=binding,
            subscribed=True,
            clock=lambda: now[0],
        )
        dispatcher = binding.dispatcher
        # A dispatcher that takes a request and summons no worker for it (what losing its workers
        # without replacing them did): it holds the request and runs nothing.
        dispatcher._summon = lambda wanted: None  # type: ignore[method-assign]
        body = json.dumps({"call": {"id": "c-1", "name": "ok", "arguments": {}}})
        endpoint = binding.handler.endpoints["tool"]
        assert (
            dispatcher.offer(
                endpoint, Incoming("p.tool.call", body.encode(), None, None)
            )
            is None
        )

        assert state.not_ready() == []  # first seen
        now[0] += 1.0
        assert state.not_ready() == []  # within the bound
        now[0] += 1.5
        assert state.not_ready() == [
            "the dispatcher holds 1 requests and has started none for 2 s "
            "(0 running, 0 workers)"
        ]
    finally:
        await client.close()
