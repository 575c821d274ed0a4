"""What every wrapper of a family shares (`Ledgered`, `Redelivered`, `Measured`): the id, where a dead
letter carries it and the publishes are the wrapped family's own."""

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from ...contracts.wire import IdNames
from ..incoming import Incoming
from ..outgoing import Publish
from .family import Family

Outcome = TypeVar("Outcome")


class Wrapper(Generic[Outcome]):
    """A `Family` around another one, changing only how it runs."""

    # The wrapped family's own reader, not a method calling it: the id stays one call per message
    # however many wrappers a family has (docs/benchmarks.md).
    identify: Callable[[dict[str, Any], Incoming], str | None]

    def __init__(self, family: Family[Outcome]) -> None:
        self.family = family
        self.identify = family.identify

    def id_names(self, body: dict[str, Any]) -> IdNames | None:
        return self.family.id_names(body)

    def publishes(
        self, outcome: Outcome, msg: Incoming, key: str, target: str | None
    ) -> list[Publish]:
        return self.family.publishes(outcome, msg, key, target)
