"""`P.observe`: the observation of a result, as a reply only."""

from typing import Any

from ...contracts import Observation
from ...contracts.keys import valid_id
from ..dead_letters import CALL_ID, IdNames
from ..incoming import Incoming
from ..outgoing import Outgoing, Publish
from .family import Nodes


class Observations:
    def __init__(self, worker: Nodes, outgoing: Outgoing) -> None:
        self.worker = worker
        self.outgoing = outgoing

    def identify(self, body: dict[str, Any], msg: Incoming) -> str | None:
        result = body.get("result")
        return valid_id(result.get("callId")) if isinstance(result, dict) else None

    def id_names(self, body: dict[str, Any]) -> IdNames:
        return CALL_ID

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> Observation:
        return self.worker.observe(body)

    def publishes(
        self, outcome: Observation, msg: Incoming, key: str, target: str | None
    ) -> list[Publish]:
        return self.outgoing.reply(target, outcome.to_json())
