"""`P.mcp.call`: a discover (its capabilities, a reply only) or an invoke (a result and its events)."""

import asyncio
from typing import Any

from ...contracts import ExternalResult, McpDiscoverOutput, McpInvokeOutput
from ...contracts.wire import WIRE, IdNames, is_discover
from ..incoming import Incoming
from ..outgoing import Outgoing, Publish, trace_headers
from .family import Nodes
from .shutdown import Shutdown

McpOutcome = McpDiscoverOutput | McpInvokeOutput | ExternalResult


def _source(body: dict[str, Any]) -> str:
    call = body["call"]
    return f"{body['server']}:{call['name']}"


class McpCalls:
    """Runs MCP requests; an invoke cancelled by shutdown ends as a `cancelled` result."""

    def __init__(self, worker: Nodes, outgoing: Outgoing, shutdown: Shutdown) -> None:
        self.worker = worker
        self.outgoing = outgoing
        self.shutdown = shutdown

    identify = staticmethod(WIRE["mcp"].read_id)

    def id_names(self, body: dict[str, Any]) -> IdNames | None:
        return None if is_discover(body) else WIRE["mcp"].ids

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> McpOutcome:
        if body.get("operation") == "discover":
            # A discover has no call to answer with a `cancelled` result: shutdown refuses it.
            try:
                return await self.worker.call_mcp(body)
            except asyncio.CancelledError:
                self.shutdown.refuse()
        return await self.shutdown.cancellable(
            self.worker.call_mcp(body), body, _source
        )

    def publishes(
        self, outcome: McpOutcome, msg: Incoming, key: str, target: str | None
    ) -> list[Publish]:
        if isinstance(outcome, ExternalResult):
            result = outcome
        elif isinstance(outcome, McpInvokeOutput):
            result = outcome.result
        else:
            return self.outgoing.reply(
                target,
                outcome.to_json(),
                "The discover reply is larger than the server's max_payload",
            )
        trace = trace_headers(msg.headers)
        return self.outgoing.result(
            "mcp", result.to_wire(), key, target, trace, "invoke"
        )
