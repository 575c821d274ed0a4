"""Fixtures of the bus tests, loaded by each test module with `pytest_plugins = ["bus_fixtures"]`.

Not a `tests/bus/conftest.py`: tests/ has no packages, so mypy would see a second module named
`conftest` and stop checking `tests` altogether.
"""

from collections.abc import AsyncIterator

import nats
import pytest
from bus_harness import BINDINGS, Serve
from nats.aio.client import Client


@pytest.fixture(params=BINDINGS)
async def serve(
    request: pytest.FixtureRequest,
    nats_url: str,
    nats_server_factory: object,
) -> AsyncIterator[Serve]:
    """`await serve(worker, ...)` runs `worker` with the binding of this parametrization.

    It holds `nats_server_factory`, so private servers a test starts outlive its workers.
    """
    starter = Serve(request.param, nats_url)
    try:
        yield starter
    finally:
        await starter.close()


@pytest.fixture
async def nats_client(nats_url: str) -> AsyncIterator[Client]:
    """A raw nats-py client on the session server."""
    client = await nats.connect(nats_url, max_reconnect_attempts=1)
    try:
        yield client
    finally:
        await client.close()
