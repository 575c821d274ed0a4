"""Fixtures shared by the whole suite. The real nats-servers (`nats_server`, `nats_server_factory`)
come from the package's own pytest plugin (`interaction_worker.testing.plugin`), so the suite runs on
what users get."""

import pytest

from interaction_worker.testing import NatsServer


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"  # nats-py and FastStream are asyncio-only


@pytest.fixture
def nats_url(nats_server: NatsServer) -> str:
    return nats_server.url
