"""`Context`: the messages an agent has gathered so far, as an immutable value."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Self

from ..contracts import Message, Observation


@dataclass(frozen=True, slots=True)
class Context:
    """The agent's messages and metadata; every update returns a new `Context`.

    `messages` is a tuple and `metadata` a read-only copy, so a context handed to a flow is never
    changed by it; the `Message` objects themselves are shared, not copied.
    """

    messages: tuple[Message, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        messages: Iterable[Message] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        found = tuple(messages)
        for message in found:
            if not isinstance(message, Message):
                raise TypeError(
                    f"Context messages must be Message, not {type(message).__name__}"
                )
        object.__setattr__(self, "messages", found)
        object.__setattr__(self, "metadata", MappingProxyType(dict(metadata or {})))

    def with_message(self, message: Message) -> Self:
        """This context with `message` appended."""
        return type(self)((*self.messages, message), self.metadata)

    def with_observation(self, observation: Observation) -> Self:
        """This context with the observation's tool message appended, whatever its status: a failed,
        cancelled, timed-out or unknown outcome is what the model must see next."""
        return self.with_message(observation.message.model_copy(deep=True))
