"""The results the worker writes itself when a call does not end on its own: cut by `tool_timeout`,
or cancelled by the worker's shutdown (wire.md 6)."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

from ...contracts import ExternalResult
from ...contracts import validation as check
from ...errors import ShuttingDown

T = TypeVar("T")


def failure(
    call_id: str, source: str, status: str, code: str, message: str
) -> ExternalResult:
    return check.external_result(
        {
            "callId": call_id,
            "source": source,
            "status": status,
            "error": {"code": code, "message": message, "retryable": False},
        }
    )


class Shutdown:
    """Whether the worker is stopping: set when shutdown cancels running calls, whose cancellation
    then becomes a WORKER_SHUTDOWN outcome instead of ending the message unanswered."""

    def __init__(self) -> None:
        self.started = False

    async def cancellable(
        self,
        work: Awaitable[T],
        body: dict[str, Any],
        source: Callable[[dict[str, Any]], str],
    ) -> T | ExternalResult:
        """Await `work`; a cancellation by shutdown becomes a `cancelled` WORKER_SHUTDOWN result."""
        try:
            return await work
        except asyncio.CancelledError:
            return self.result(body, source)

    def refuse(self) -> NoReturn:
        """Called while handling a CancelledError of a request that has no result to write:
        re-raises it unless shutdown caused it, else refuses the request with SHUTTING_DOWN."""
        task = asyncio.current_task()
        if not self.started or task is None:
            raise asyncio.CancelledError
        task.uncancel()
        raise ShuttingDown("The worker shut down before the request finished")

    def result(
        self, body: dict[str, Any], source: Callable[[dict[str, Any]], str]
    ) -> ExternalResult:
        """Called while handling a CancelledError: re-raises it unless shutdown caused it.

        `source` names the call's source from its (by now validated) body."""
        task = asyncio.current_task()
        if not self.started or task is None:
            raise asyncio.CancelledError
        task.uncancel()
        return failure(
            body["call"]["id"],
            source(body),
            "cancelled",
            "WORKER_SHUTDOWN",
            "The worker shut down before the call finished",
        )
