"""`P.observe`: the observation of a result, as a reply only."""

from typing import Any

from ...contracts import Observation
from ...contracts.wire import WIRE, IdNames
from ..incoming import Incoming
from ..outgoing import Outgoing, Publish
from .family import Nodes


class Observations:
    def __init__(self, worker: Nodes, outgoing: Outgoing) -> None:
        self.worker = worker
        self.outgoing = outgoing

    identify = staticmethod(WIRE["observe"].read_id)

    def id_names(self, body: dict[str, Any]) -> IdNames | None:
        return WIRE["observe"].ids

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> Observation:
        return self.worker.observe(body)

    def publishes(
        self, outcome: Observation, msg: Incoming, key: str, target: str | None
    ) -> list[Publish]:
        return self.outgoing.reply(target, outcome.to_json())
