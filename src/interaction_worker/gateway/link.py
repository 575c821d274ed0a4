"""The gateway's one client of the bus, connected again when its connection is gone.

A client command connects once and ends; the gateway serves for hours, through restarts of the
embedded server (which may come back on another port) or of the NATS server. Each request takes the
client from here, which dials afresh, by the command line's rules, once the last connection closed.
"""

import logging
from collections.abc import Awaitable, Callable

import anyio

from ..client import ConnectError, InteractionClient

_LOGGER = logging.getLogger("interaction_worker.gateway")

Connector = Callable[[], Awaitable[InteractionClient]]


class BusUnreachable(Exception):
    """The bus cannot be reached now; the reason went to the log, not to the host."""


class BusLink:
    """Hands out a connected `InteractionClient`, made by `connect` when there is none."""

    def __init__(self, connect: Connector) -> None:
        self._connect = connect
        self._client: InteractionClient | None = None
        self._lock = anyio.Lock()

    async def client(self) -> InteractionClient:
        """Raises:
        BusUnreachable: no connection could be made (the reason is logged)."""
        client = self._client
        if client is not None and not client.nc.is_closed:
            return client
        async with self._lock:
            if self._client is not None and not self._client.nc.is_closed:
                return self._client
            if self._client is not None:
                old, self._client = self._client, None
                await old.close()
            try:
                self._client = await self._connect()
            except ConnectError as error:
                # The line names the data directory and the URL: for the operator, not the host.
                _LOGGER.warning("%s", error)
                raise BusUnreachable("the bus cannot be reached") from None
            return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()
