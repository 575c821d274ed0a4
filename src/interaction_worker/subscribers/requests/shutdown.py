"""The results the worker writes itself when a call does not end on its own: cut by `tool_timeout`,
or cancelled by the worker's shutdown (wire.md 6).

A CancelledError is a cancellation of the request only while the request's task is being cancelled
(`Task.cancelling()`); one raised while it is not comes from the code the request ran (a tool, an MCP
client, a sink awaiting something cancelled) and is a failure of that code, answered as one
(docs/guarantees.md). Shutdown's own cancellation becomes the `cancelled` / WORKER_SHUTDOWN outcome.
"""

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


def being_cancelled() -> asyncio.Task[Any] | None:
    """The current task when it is being cancelled (a CancelledError it handles is a cancellation of
    it, not one the code it awaited raised), else None."""
    task = asyncio.current_task()
    return task if task is not None and task.cancelling() else None


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

    def cancelling(self) -> asyncio.Task[Any] | None:
        """Called while handling a CancelledError: the current task when shutdown is cancelling it."""
        return being_cancelled() if self.started else None

    def refuse(self) -> NoReturn:
        """Called while handling a CancelledError of a request that has no result to write:
        re-raises it unless shutdown caused it, else refuses the request with SHUTTING_DOWN."""
        task = self.cancelling()
        if task is None:
            raise  # the CancelledError being handled
        task.uncancel()
        raise ShuttingDown("The worker shut down before the request finished")

    def result(
        self, body: dict[str, Any], source: Callable[[dict[str, Any]], str]
    ) -> ExternalResult:
        """Called while handling a CancelledError: re-raises it unless shutdown caused it.

        `source` names the call's source from its (by now validated) body."""
        task = self.cancelling()
        if task is None:
            raise  # the CancelledError being handled
        task.uncancel()
        return failure(
            body["call"]["id"],
            source(body),
            "cancelled",
            "WORKER_SHUTDOWN",
            "The worker shut down before the call finished",
        )
