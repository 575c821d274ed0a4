"""interaction-worker's pytest plugin (docs/replay.md 5): a real nats-server, served workers and
recorded bus traffic as fixtures, in every project that installs the package (entry point
`pytest11`), without a conftest.

The async fixtures run on anyio's pytest plugin (installed with the package) on its asyncio
backend, because nats-py is asyncio-only. Mark the tests that use them::

    import pytest

    @pytest.mark.anyio
    async def test_reads_a_file(serve_worker, tmp_path):
        (tmp_path / "a.txt").write_text("hello")
        handle = await serve_worker(workspace=tmp_path)
        outcome = await handle.client.call_tool("read_text", path="a.txt")
        assert outcome.result.status == "success"

(or set `anyio_mode = "auto"` in the pytest configuration). With trio installed, anyio runs a marked
test on both backends; define an `anyio_backend` fixture returning `"asyncio"` in a conftest: on any
other backend these fixtures fail with a message saying so.

| fixture | scope | value |
|---|---|---|
| `nats_server` | session | `NatsServer`: `.url`, `.monitor_url`, `.port`, `.store_dir`; JetStream on |
| `nats_server_factory` | function | `NatsServerFactory`: private servers with extra flags (auth, TLS, restarts) |
| `serve_worker` | function | `ServeWorker` (`testing.served`): `await serve_worker(worker_or_config, **settings)` |
| `recorded_events` | function | `RecordedEvents` (`testing.recorded`): `await recorded_events(path)` |
| `replay_requests` | function | `ReplayRequests` (`testing.recorded`): `await replay_requests(path, handle)` |

This module is imported by every pytest run of every such project, whether or not it uses a fixture,
so it imports nothing heavy: the worker, the client and the recording code (FastStream, the MCP SDK)
are imported inside the fixtures that need them. Their types are imported for the type checker only,
for that reason alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .nats_server import NatsServer, NatsServerFactory, start_nats_server, stop_process

if TYPE_CHECKING:
    from .recorded import RecordedEvents, ReplayRequests
    from .served import ServeWorker


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """One server for the session; tests keep apart by prefix (`serve_worker` gives each its own).

    A missing binary is an error, never a skip: tests that need the bus must not vanish silently.
    """
    server = start_nats_server(tmp_path_factory.mktemp("nats"))
    try:
        yield server
    finally:
        stop_process(server.process)


@pytest.fixture
def nats_server_factory(tmp_path: Path) -> Iterator[NatsServerFactory]:
    """Private servers with extra arguments, for what the shared one cannot do (credentials, TLS,
    a restart on the same store); all stopped at teardown even if the test fails."""
    factory = NatsServerFactory(tmp_path)
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
async def serve_worker(
    nats_server: NatsServer, anyio_backend_name: str
) -> AsyncIterator[ServeWorker]:
    """`await serve_worker(worker_or_config=None, **settings)` serves a worker on `nats_server`
    under a fresh prefix and returns its handle (`.prefix`, `.nats_url`, `.client`, `.worker`);
    every worker served is stopped at teardown, its client closed."""
    _require_asyncio(anyio_backend_name)
    from .served import ServeWorker

    starter = ServeWorker(nats_server.url)
    try:
        yield starter
    finally:
        await starter.aclose()


@pytest.fixture
async def recorded_events(
    nats_server: NatsServer, anyio_backend_name: str
) -> AsyncIterator[RecordedEvents]:
    """`await recorded_events(path, prefix=None, speed=None)` publishes a recording's events to
    `nats_server` as the worker published them, and returns how many."""
    _require_asyncio(anyio_backend_name)
    from .recorded import RecordedEvents

    publisher = RecordedEvents(nats_server.url)
    try:
        yield publisher
    finally:
        await publisher.aclose()


@pytest.fixture
def replay_requests(anyio_backend_name: str) -> ReplayRequests:
    """`await replay_requests(path, handle, id_suffix=None, ignore=())` sends a recording's
    requests to a served worker and compares the outcomes; `report.assert_identical()`."""
    _require_asyncio(anyio_backend_name)
    from .recorded import ReplayRequests

    return ReplayRequests()


def _require_asyncio(backend: str) -> None:
    if backend != "asyncio":
        pytest.fail(
            f"interaction-worker's fixtures run on anyio's asyncio backend only (nats-py), not "
            f"{backend}: define an `anyio_backend` fixture returning 'asyncio'",
            pytrace=False,
        )
