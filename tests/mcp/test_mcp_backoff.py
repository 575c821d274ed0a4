"""The supervisor's backoff with servers that die right after each start (a crash loop): the delay
between attempts doubles up to the longest, and goes back to the first only after a session that
stayed up for the longest delay.

The server is an in-process SDK server behind a transport double, whose sessions end as soon as they
are connected, or after a set time.
"""

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp.client import Transport
from mcp.client._transport import TransportStreams
from mcp.server import Server
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage

from interaction_worker.mcp import McpServerConnection

BACKOFF = (0.05, 0.4)
TOLERANCE = 0.01  # a sleep may end by a clock tick early


class CrashingServer:
    """A transport factory: each attempt connects to a fresh in-process server whose session ends
    once it is connected (after its first answer), or after `stays[n]` seconds for the n-th. Records
    when each attempt began and when each session ended."""

    def __init__(self, stays: Mapping[int, float] | None = None) -> None:
        self.stays = dict(stays or {})
        self.attempts: list[float] = []
        self.ends: list[float] = []
        self._ended = anyio.Event()

    def __call__(self) -> Transport:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[TransportStreams]:
        stay = self.stays.get(len(self.attempts), 0.0)
        self.attempts.append(anyio.current_time())
        server: Server[Any] = Server("crashing")
        async with (
            create_client_server_memory_streams() as (client, served),
            anyio.create_task_group() as group,
        ):
            group.start_soon(
                lambda: server.run(
                    served[0], served[1], server.create_initialization_options()
                )
            )
            send, receive = anyio.create_memory_object_stream[
                SessionMessage | Exception
            ](0)
            group.start_soon(self._relay, client[0], send, stay)
            try:
                yield receive, client[1]
            finally:
                group.cancel_scope.cancel()

    async def _relay(
        self, read: Any, send: anyio.abc.ObjectSendStream[Any], stay: float
    ) -> None:
        """Forward the server's side until its first answer, then `stay` seconds longer, then end."""
        async with send:
            await send.send(await read.receive())
            with anyio.move_on_after(stay):
                async for item in read:
                    await send.send(item)
        self.ends.append(anyio.current_time())
        self._ended.set()
        self._ended = anyio.Event()

    async def until(self, sessions: int) -> None:
        """Wait until `sessions` sessions have ended."""
        while len(self.ends) < sessions:
            await self._ended.wait()

    def delays(self) -> list[float]:
        """The time from each session's end to the next attempt."""
        return [
            start - end
            for end, start in zip(self.ends, self.attempts[1:], strict=False)
        ]


def logged_delays(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The delays the supervisor chose after each lost session, as it logged them."""
    lost = "MCP server crashing: the connection was lost; reconnecting in "
    return [
        record.getMessage().removeprefix(lost)
        for record in caplog.records
        if record.name == "interaction_worker.mcp"
    ]


async def crash_loop(server: CrashingServer, sessions: int) -> None:
    """Connect to `server` and let `sessions` of its sessions end."""
    connection = McpServerConnection("crashing", server, backoff=BACKOFF)
    with anyio.fail_after(10):
        await connection.start()
        await server.until(sessions)
        await connection.aclose()


async def test_a_server_that_dies_at_each_start_is_restarted_ever_more_slowly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "interaction_worker.mcp")
    server = CrashingServer()

    await crash_loop(server, 6)

    assert logged_delays(caplog)[:5] == ["0.05 s", "0.1 s", "0.2 s", "0.4 s", "0.4 s"]
    expected = [0.05, 0.1, 0.2, 0.4, 0.4]
    measured = server.delays()[:5]
    assert all(
        slept >= delay - TOLERANCE
        for slept, delay in zip(measured, expected, strict=True)
    ), measured


async def test_the_delay_is_reset_only_after_a_session_stayed_up_for_the_longest_delay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "interaction_worker.mcp")
    # Up for 0.2 s (shorter than the longest delay), then for 0.5 s (longer).
    server = CrashingServer(stays={2: 0.2, 4: 0.5})

    await crash_loop(server, 6)

    assert logged_delays(caplog)[:5] == ["0.05 s", "0.1 s", "0.2 s", "0.4 s", "0.05 s"]
    measured = server.delays()[:5]
    assert measured[3] >= 0.4 - TOLERANCE, measured
    assert 0.05 - TOLERANCE <= measured[4] < 0.3, measured
