"""`ScriptedModel`: a model that plays a script, for tests and for examples without keys."""

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..contracts import Message
from .actions import ActionDescriptor
from .model_provider import ModelError, SampleOutput

Step = SampleOutput | Callable[[Sequence[Message]], SampleOutput]


@dataclass(frozen=True, slots=True)
class SampleCall:
    """What one `sample()` received."""

    messages: tuple[Message, ...]
    actions: tuple[ActionDescriptor, ...]
    generation: Mapping[str, Any]
    metadata: Mapping[str, Any]


class ScriptedModel:
    """Answers the n-th `sample()` with the n-th step: a `SampleOutput`, or a function of the
    messages so far that returns one (to answer from what the actions observed).

    A call beyond the script raises `ModelError`. `calls` records what each call received.
    """

    def __init__(self, steps: Iterable[Step]) -> None:
        self.steps: tuple[Step, ...] = tuple(steps)
        self.calls: list[SampleCall] = []

    async def sample(
        self,
        messages: Sequence[Message],
        actions: Sequence[ActionDescriptor],
        generation: Mapping[str, Any],
        metadata: Mapping[str, Any],
    ) -> SampleOutput:
        number = len(self.calls)
        self.calls.append(
            SampleCall(tuple(messages), tuple(actions), generation, metadata)
        )
        if number >= len(self.steps):
            raise ModelError(
                f"the script has {len(self.steps)} steps, no step {number + 1}"
            )
        step = self.steps[number]
        return step if isinstance(step, SampleOutput) else step(tuple(messages))
