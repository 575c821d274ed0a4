"""Telling the server a durable message is still being handled, so a long call is not delivered again
before it ends (docs/wire.md 7)."""

import asyncio
import logging

from nats.aio.msg import Msg


class ProgressReports:
    """Tells the server every `interval` seconds that a message is still being handled: a timer,
    and a task only for each report (most calls end before the first is due)."""

    def __init__(self, msg: Msg, interval: float, logger: logging.Logger) -> None:
        self.msg = msg
        self.interval = interval
        self.logger = logger
        self.loop = asyncio.get_running_loop()
        self.reports: set[asyncio.Task[None]] = set()
        self.timer: asyncio.TimerHandle | None = self.loop.call_later(
            interval, self._due
        )

    def _due(self) -> None:
        report = self.loop.create_task(self._report())
        self.reports.add(report)
        report.add_done_callback(self.reports.discard)
        self.timer = self.loop.call_later(self.interval, self._due)

    async def _report(self) -> None:
        if self.timer is None:
            return  # the message ended before this report ran: it is acknowledged, or coming back
        try:
            await self.msg.in_progress()
        except Exception:
            # While the server cannot hear it (the writes waiting say so once, not per message).
            self.logger.debug(
                "telling the server %s is in progress failed", self.msg.subject
            )

    def stop(self) -> None:
        """No report after this (one being written finishes: cut short, it could leave a partial
        write on the connection)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
