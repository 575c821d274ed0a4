"""What the handler asks of each kind of request (`Family`), and what the families ask of the worker
(`Nodes`)."""

from typing import Any, Protocol, TypeVar

from ...commands import CommandDispatcher
from ...contracts import (
    ExternalResult,
    McpDiscoverOutput,
    McpInvokeOutput,
    Observation,
    OutputReceipt,
    ToolList,
)
from ...contracts.wire import IdNames
from ...nodes import DeliveryContext, Sandbox, ToolContext
from ..incoming import Incoming
from ..outgoing import Publish

Outcome = TypeVar("Outcome")


class Family(Protocol[Outcome]):
    """The requests of one subject: how their id is read, how one runs, what its outcome publishes.

    Running and publishing are two steps so that what comes between them (recording the outcome
    before it is published, in durable mode) needs no change here, and so that a tool call costs one
    coroutine beside the tool's own.
    """

    def identify(self, body: dict[str, Any], msg: Incoming) -> str | None:
        """The id that keys the message's subjects, when a valid one can be read."""
        ...

    def id_names(self, body: dict[str, Any]) -> IdNames | None:
        """Where a dead letter carries the id; None when the id is not a call's or a delivery's."""
        ...

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> Outcome:
        """The outcome; an `InteractionWorkerError` refuses the message."""
        ...

    def publishes(
        self, outcome: Outcome, msg: Incoming, key: str, target: str | None
    ) -> list[Publish]:
        """The reply (to `target`, when there is one) and the events of `outcome`."""
        ...


class Nodes(Protocol):
    """The four nodes, as `InteractionWorker` offers them."""

    sandbox: Sandbox

    @property
    def commands(self) -> CommandDispatcher | None: ...

    async def call_tool(
        self,
        request: object,
        *,
        context: ToolContext | None = None,
        trusted_json: bool = False,
    ) -> ExternalResult: ...

    async def call_tool_document(
        self,
        request: object,
        *,
        context: ToolContext | None = None,
        trusted_json: bool = False,
    ) -> dict[str, Any]: ...

    async def call_mcp(
        self, request: object
    ) -> McpDiscoverOutput | McpInvokeOutput: ...

    def bounds_own_time(self, name: str) -> bool: ...

    def rerunnable(self, name: str) -> bool: ...

    def observe(self, request: object) -> Observation: ...

    def list_tools(self, request: object) -> ToolList: ...

    async def deliver(
        self, request: object, *, context: DeliveryContext | None = None
    ) -> OutputReceipt: ...
