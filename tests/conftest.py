"""Fixtures shared by the whole suite: the anyio backend and real nats-servers."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from natsserver import NatsServer, NatsServerFactory, start_nats_server, stop_process


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"  # nats-py and FastStream are asyncio-only


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """One server for the session; tests isolate themselves with unique subjects and streams."""
    server = start_nats_server(tmp_path_factory.mktemp("nats"))
    try:
        yield server
    finally:
        stop_process(server.process)


@pytest.fixture
def nats_url(nats_server: NatsServer) -> str:
    return nats_server.url


@pytest.fixture
def nats_server_factory(tmp_path: Path) -> Iterator[NatsServerFactory]:
    """Private servers with extra arguments, all stopped at teardown even if the test fails."""
    factory = NatsServerFactory(tmp_path)
    try:
        yield factory
    finally:
        factory.close()
