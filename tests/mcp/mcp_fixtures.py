"""Fixtures of the MCP tests, loaded with `pytest_plugins = ["mcp_fixtures"]`: servers that are slow to
start are started once per test module and shared by its tests."""

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from mcp_harness import pages_connection, stdio_probe
from mcp_pages_server import SCENARIOS, serving

from interaction_worker.mcp import McpServerConnection


@pytest.fixture(scope="module")
def markers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the module's probe servers leave their marker files."""
    return tmp_path_factory.mktemp("mcp-markers")


@pytest.fixture(scope="module")
async def probe(markers: Path) -> AsyncIterator[McpServerConnection]:
    """The probe over stdio, connected for the whole module."""
    async with stdio_probe(markers / "probe") as connection:
        yield connection


@pytest.fixture(scope="module")
async def pages_urls() -> AsyncIterator[dict[str, str]]:
    """Every paginating scenario served over streamable HTTP in this process: scenario -> URL."""
    async with AsyncExitStack() as stack:
        yield {
            scenario: await stack.enter_async_context(serving(scenario))
            for scenario in SCENARIOS
        }


@pytest.fixture(scope="module")
async def pages(pages_urls: dict[str, str]) -> AsyncIterator[McpServerConnection]:
    """The three-page server over streamable HTTP, connected for the whole module."""
    async with pages_connection(pages_urls, "pages") as connection:
        yield connection
