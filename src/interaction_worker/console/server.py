"""The console as a running thing: its HTTP server (uvicorn), its feed from NATS, and the pings that
keep the pages' streams alive, started and stopped together."""

import asyncio
import socket

import uvicorn

from ..monitoring.http import (
    CannotListen,
    ListenError,
    LoopServer,
    listen,
    serving,
    url_of,
)
from .access import Access
from .app import console_app
from .bus import BusFeed, Connector, FeedOptions
from .hub import DEFAULT_QUEUE_SIZE, Hub

# Long enough for a proxy not to time the stream out, short enough to notice a gone page soon.
PING_INTERVAL = 15.0


class _Server(LoopServer):
    """uvicorn's server ending the pages' streams as soon as it is told to stop: an open event
    stream would otherwise hold the shutdown for its whole grace period."""

    def __init__(self, config: uvicorn.Config, hub: Hub) -> None:
        super().__init__(config)
        self.hub = hub

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.hub.close()
        await super().shutdown(sockets=sockets)


class Console:
    """The console on `host:port`, fed through `connect`.

    Args:
        options: what to read and how to send.
        connect: makes a connection to NATS (bus.Connector); called again after each loss.
        token: the console's token when it serves beyond loopback (access.py), else None.
        queue_size: frames one page may have waiting before it loses events.
    """

    def __init__(
        self,
        options: FeedOptions,
        connect: Connector,
        *,
        token: str | None = None,
        queue_size: int = DEFAULT_QUEUE_SIZE,
    ) -> None:
        self.hub = Hub(options.history, queue_size=queue_size)
        self.feed = BusFeed(self.hub, options, connect)
        self.access = Access(token)
        self.url: str | None = None
        self._server: _Server | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, host: str, port: int) -> str:
        """Listen, start the feed, and return the URL of the page.

        Raises:
            ListenError: the address cannot be listened on.
        """
        try:
            sock = await listen(host, port)
        except CannotListen as error:
            raise ListenError(str(error)) from None
        config = uvicorn.Config(
            console_app(self.hub, self.feed, self.access),
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=2,
        )
        server = self._server = _Server(config, self.hub)
        self._tasks = [
            await serving(server, sock),
            asyncio.create_task(self.feed.run()),
            asyncio.create_task(self._ping()),
        ]
        if not server.listening.is_set():
            await self.stop()
            raise ListenError(f"cannot serve on {host}:{port}")
        self.url = url_of(sock)
        return self.url

    async def wait(self) -> None:
        """Until the HTTP server stops (it fails, or `stop` is called)."""
        if self._tasks:
            await asyncio.wait({self._tasks[0]})

    async def stop(self) -> None:
        """Stop serving: the pages' streams end, the feed closes its connection."""
        if self._server is not None:
            self._server.should_exit = True
        for task in self._tasks[1:]:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)

    async def _ping(self) -> None:
        while True:
            await asyncio.sleep(PING_INTERVAL)
            self.hub.ping()
