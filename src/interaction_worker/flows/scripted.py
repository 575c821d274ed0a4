"""`ScriptedModel`: a model that plays a script, for tests and for examples without keys."""

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..contracts import Message
from .actions import ActionDescriptor
from .model_provider import ModelError, SampleOutput

Step = (
    SampleOutput
    | Mapping[str, Any]
    | Callable[[Sequence[Message]], SampleOutput | Mapping[str, Any]]
)


@dataclass(frozen=True, slots=True)
class SampleCall:
    """What one `sample()` received."""

    messages: tuple[Message, ...]
    actions: tuple[ActionDescriptor, ...]
    generation: Mapping[str, Any]
    metadata: Mapping[str, Any]


class ScriptedModel:
    """Answers the n-th `sample()` with the n-th step: a `SampleOutput` or its mapping form
    (docs/flows.md 3), or a function of the messages so far that returns one (to answer from what the
    actions observed).

    Steps are checked when the script is built: a mapping becomes a `SampleOutput`, anything else
    that is not callable is a TypeError. A call beyond the script raises `ModelError`, and so does a
    function that returns something other than a sample. `calls` records what each call received.
    """

    def __init__(self, steps: Iterable[Step]) -> None:
        self.steps: tuple[SampleOutput | Callable[[Sequence[Message]], object], ...] = (
            tuple(_step(number, step) for number, step in enumerate(steps, start=1))
        )
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
        if isinstance(step, SampleOutput):
            return step
        answer = step(tuple(messages))
        try:
            return SampleOutput.of(answer)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ModelError(
                f"step {number + 1} of the script returned something other than a sample"
            ) from None


def _step(
    number: int, step: object
) -> SampleOutput | Callable[[Sequence[Message]], object]:
    if isinstance(step, SampleOutput | Mapping):
        try:
            return SampleOutput.of(step)
        except (TypeError, ValueError) as error:
            raise TypeError(f"step {number} of the script: {error}") from None
    if callable(step):
        return step
    raise TypeError(
        f"step {number} of the script must be a SampleOutput, its mapping or a function"
    )
