"""The model side of a ReAct flow: `ModelProvider` and what one SAMPLE returns."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..contracts import Message
from .actions import ActionDescriptor, ActionRequest


class ModelError(Exception):
    """The provider failed or answered something unreadable. The message is shown to the caller
    of the flow: it names what went wrong, never a URL, a key or a response body."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one SAMPLE used, or the sum over a flow's SAMPLEs."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.total_tokens + other.total_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "totalTokens": self.total_tokens,
        }


@dataclass(frozen=True, slots=True)
class SampleOutput:
    """One SAMPLE: the assistant message, the actions it requests (none ends the flow), its usage
    (None when the provider did not say) and the provider's stop reason."""

    message: Message
    action_requests: tuple[ActionRequest, ...] = ()
    usage: Usage | None = None
    stop_reason: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "action_requests", tuple(self.action_requests))

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message.to_wire(),
            "actionRequests": [request.to_dict() for request in self.action_requests],
            "usage": None if self.usage is None else self.usage.to_dict(),
            "stopReason": self.stop_reason,
        }


class ModelProvider(Protocol):
    """Anything that can SAMPLE: `OpenAICompatibleModel`, `ScriptedModel`, or an adapter of yours.

    `generation` and `metadata` are the flow input's, passed unchanged to every call. Raise
    `ModelError` with a safe message when the model cannot answer; any other exception is reported
    as a failure of the provider, by its type only.
    """

    async def sample(
        self,
        messages: Sequence[Message],
        actions: Sequence[ActionDescriptor],
        generation: Mapping[str, Any],
        metadata: Mapping[str, Any],
    ) -> SampleOutput: ...
