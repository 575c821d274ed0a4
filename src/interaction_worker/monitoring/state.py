"""What the HTTP side knows of a served worker, filled in by `service.serve` as it goes: the worker,
its connection once made, its binding once built, and whether it has subscribed or is draining.

Readiness is decided here from that state each time it is asked, never cached: the connection's
own status says whether it is connected at this moment, each MCP connection whether its session is
up, and the dispatcher whether the requests it holds have workers to run them. A dispatcher is seen
stalled from one probe to the next (it reads no clock per message): the reason appears at the first
probe that finds the same request still waiting, with no worker to take it, `stall_bound` seconds or
more after one that first saw it so (docs/operations.md).
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

from nats.aio.client import Client

from ..mcp import McpServerConnection
from ..subscribers import DurableBinding, NatsBinding
from ..worker import InteractionWorker


@dataclass(frozen=True)
class McpServerState:
    """One MCP server: whether its session is up, and whether the worker needs it (`required`).

    A client given in code that is not an `McpServerConnection` (an in-process one) has no session
    to lose: it counts as up, and as not required."""

    name: str
    up: bool
    required: bool
    why: str | None = None  # why it is down, when it refused the credentials


# Seconds queued requests may wait with no worker to take them before the worker is not ready.
STALL_BOUND = 2.0


@dataclass
class ServiceState:
    worker: InteractionWorker
    client: Client | None = None
    binding: NatsBinding | DurableBinding | None = None
    subscribed: bool = False
    draining: bool = False
    stall_bound: float = STALL_BOUND
    clock: Callable[[], float] = time.monotonic

    def mcp_servers(self) -> list[McpServerState]:
        registry = self.worker.mcp
        if registry is None:
            return []
        servers = []
        for name in registry.servers():
            client = registry.get(name)
            if isinstance(client, McpServerConnection):
                servers.append(
                    McpServerState(
                        name, client.connected, client.required, client.down_reason
                    )
                )
            else:
                servers.append(McpServerState(name, True, False))
        return servers

    def not_ready(self) -> list[str]:
        """Why the worker should not be sent requests now; empty when it is ready."""
        if self.draining:
            return ["draining: the worker is shutting down"]
        reasons = []
        if self.client is None:
            reasons.append("not connected to NATS yet")
        elif not self.client.is_connected:
            reasons.append("disconnected from NATS")
        if not self.subscribed:
            reasons.append("not subscribed yet")
        reasons += [
            f"the required MCP server {server.name} is down"
            + ("" if server.why is None else f": {server.why}")
            for server in self.mcp_servers()
            if server.required and not server.up
        ]
        if self.binding is not None:
            dispatcher = self.binding.dispatcher
            stalled = dispatcher.stalled_for(self.clock())
            if stalled >= self.stall_bound:
                reasons.append(
                    f"the dispatcher holds {dispatcher.pending} requests and has started none "
                    f"for {stalled:.0f} s ({dispatcher.in_flight} running, "
                    f"{dispatcher.workers} workers)"
                )
        return reasons
