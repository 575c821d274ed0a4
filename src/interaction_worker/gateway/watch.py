"""Who hears that the tools changed, and the polling that finds out while anyone listens.

A `ToolWatch` is the SDK's `SubscriptionBus` (mcp.server.subscriptions): the hosts of the 2026
protocol listen through the SDK's `subscriptions/listen` handler, and each session of the 2025
protocol listens from its `notifications/initialized` until it ends (server.py). While at least one
listens, `run` reads the tools every `interval` seconds; the catalog publishes `ToolsListChanged`
when a read finds them changed.
"""

import logging
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
from mcp.server.subscriptions import ServerEvent

_LOGGER = logging.getLogger("interaction_worker.gateway")

POLL_SECONDS = 30.0

Listener = Callable[[ServerEvent], None]


class ToolWatch:
    """Listeners of the gateway's events, and the poll that runs while there are any.

    Args:
        poll: reads the tools (the catalog's fresh read), which publishes what changed.
        interval: seconds between polls.
    """

    def __init__(
        self, poll: Callable[[], Awaitable[object]], *, interval: float = POLL_SECONDS
    ) -> None:
        self.poll = poll
        self.interval = interval
        self._listeners: dict[object, Listener] = {}
        self._listened = anyio.Event()

    @property
    def listeners(self) -> int:
        return len(self._listeners)

    async def publish(self, event: ServerEvent) -> None:
        for listener in list(self._listeners.values()):
            try:
                listener(event)
            except Exception:  # one listener must not keep the event from the others
                _LOGGER.exception("a listener of the tools' changes failed")
        await anyio.lowlevel.checkpoint()

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        token = object()
        self._listeners[token] = listener
        self._listened.set()

        def unsubscribe() -> None:
            self._listeners.pop(token, None)
            if not self._listeners and self._listened.is_set():
                self._listened = anyio.Event()

        return unsubscribe

    async def run(self) -> None:
        """Poll while anyone listens, until cancelled."""
        while True:
            await self._listened.wait()
            await anyio.sleep(self.interval)
            if not self._listeners:
                continue
            try:
                await self.poll()
            except Exception:  # a failed poll is tried again at the next interval
                _LOGGER.exception("reading the tools failed")
