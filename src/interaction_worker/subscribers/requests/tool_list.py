"""`P.tool.list`: the tools served and granted, or one of them, as a reply only."""

from typing import Any

from ...contracts import ToolList
from ...contracts.wire import WIRE, IdNames
from ..incoming import Incoming
from ..outgoing import Outgoing, Publish
from .family import Nodes


class ToolLists:
    def __init__(self, worker: Nodes, outgoing: Outgoing) -> None:
        self.worker = worker
        self.outgoing = outgoing

    identify = staticmethod(WIRE["list"].read_id)

    def id_names(self, body: dict[str, Any]) -> IdNames | None:
        return WIRE["list"].ids

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> ToolList:
        return self.worker.list_tools(body)

    def publishes(
        self, outcome: ToolList, msg: Incoming, key: str, target: str | None
    ) -> list[Publish]:
        return self.outgoing.reply(target, outcome.to_json())
