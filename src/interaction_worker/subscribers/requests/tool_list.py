"""`P.tool.list`: the tools served and granted, or one of them, as a reply only."""

from typing import Any

from ...contracts import ToolList
from ...contracts.keys import valid_id
from ..dead_letters import IdNames
from ..incoming import Incoming
from ..outgoing import Outgoing, Publish
from .family import Nodes


class ToolLists:
    def __init__(self, worker: Nodes, outgoing: Outgoing) -> None:
        self.worker = worker
        self.outgoing = outgoing

    def identify(self, body: dict[str, Any], msg: Incoming) -> str | None:
        return valid_id(body.get("name"))

    def id_names(self, body: dict[str, Any]) -> IdNames | None:
        return None  # the name keys the subjects, but a tool list is no call

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> ToolList:
        return self.worker.list_tools(body)

    def publishes(
        self, outcome: ToolList, msg: Incoming, key: str, target: str | None
    ) -> list[Publish]:
        return self.outgoing.reply(target, outcome.to_json())
