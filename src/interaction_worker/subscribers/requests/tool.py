"""`P.tool.call`: a tool call under `tool_timeout`; its result, then its observation."""

import asyncio
from typing import Any

from ...config import defaults
from ...contracts.wire import WIRE, IdNames
from ...nodes import ToolContext
from ..incoming import Incoming
from ..outgoing import Outgoing, Publish, trace_headers
from .deadlines import Deadline, Deadlines
from .family import Nodes
from .shutdown import Shutdown, failure


def _source(body: dict[str, Any]) -> str:
    name: str = body["call"]["name"]
    return name


class ToolCalls:
    """Runs tool calls; the outcome is the result's wire document (see
    `InteractionWorker.call_tool_document`), which is published without building its model.

    Args:
        timeout: seconds a tool may run before it is cancelled with TOOL_TIMEOUT; a tool that
            bounds its own time runs without it.
    """

    def __init__(
        self,
        worker: Nodes,
        outgoing: Outgoing,
        shutdown: Shutdown,
        *,
        timeout: float | None = defaults.TOOL_TIMEOUT,
        deadlines: Deadlines | None = None,
    ) -> None:
        self.worker = worker
        self.outgoing = outgoing
        self.shutdown = shutdown
        self.timeout = timeout
        self.deadlines = deadlines or Deadlines()

    identify = staticmethod(WIRE["tool"].read_id)

    def id_names(self, body: dict[str, Any]) -> IdNames | None:
        return WIRE["tool"].ids

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> dict[str, Any]:
        timeout = self.timeout
        context = None
        deadline = None
        if timeout is not None:
            requested = body.get("call")
            # The body is not validated yet: a name that is not a string fails in the call itself.
            name = requested.get("name") if type(requested) is dict else None
            if type(name) is not str or not self.worker.bounds_own_time(name):
                deadline = asyncio.get_running_loop().time() + timeout
        if identifier is not None:
            context = ToolContext(identifier, self.worker.sandbox, deadline=deadline)
        call = self.worker.call_tool_document(body, context=context, trusted_json=True)
        task = asyncio.current_task()
        try:
            if deadline is None or task is None:
                result = await call
            else:
                # Disarmed when the call ends, however it ends: a refused call's deadline must not
                # cancel what this task (a dispatcher worker's) runs next.
                with Deadline(self.deadlines, task, deadline) as scope:
                    result = await call
                if scope.expired:
                    return failure(
                        body["call"]["id"],
                        body["call"]["name"],
                        "timeout",
                        "TOOL_TIMEOUT",
                        "Tool call timed out",
                    ).to_wire()
        except asyncio.CancelledError:
            return self.shutdown.result(body, _source).to_wire()
        return result

    def publishes(
        self,
        outcome: dict[str, Any],
        msg: Incoming,
        key: str,
        target: str | None,
    ) -> list[Publish]:
        trace = trace_headers(msg.headers) if msg.headers else {}
        return self.outgoing.result("tool", outcome, key, target, trace, None)
