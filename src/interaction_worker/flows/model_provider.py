"""The model side of a ReAct flow: `ModelProvider` and what one SAMPLE returns."""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..contracts import Message
from .actions import ActionDescriptor, ActionRequest


class ModelError(Exception):
    """The provider failed or answered something unreadable. The message is shown to the caller
    of the flow: it names what went wrong, never a URL, a key or a response body."""


_USAGE_KEYS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "total_tokens": "total_tokens",
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "totalTokens": "total_tokens",
}
_SAMPLE_KEYS = {
    "message": "message",
    "action_requests": "action_requests",
    "actionRequests": "action_requests",
    "usage": "usage",
    "stop_reason": "stop_reason",
    "stopReason": "stop_reason",
}


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one SAMPLE used, or the sum over a flow's SAMPLEs: non-negative integers."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0

    def __post_init__(self) -> None:
        for name in ("input_tokens", "output_tokens", "total_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise TypeError(f"Usage.{name} must be a non-negative integer")

    @classmethod
    def of(cls, value: "Usage | Mapping[str, Any]") -> "Usage":
        """A `Usage`, or its mapping form `{"input_tokens", "output_tokens", "total_tokens"}`
        (camelCase too, as `to_dict` writes it); a total left out is the sum of the other two."""
        if isinstance(value, Usage):
            return value
        if not isinstance(value, Mapping):
            raise TypeError("usage must be a Usage, a mapping of token counts or None")
        counts = _fields(value, _USAGE_KEYS, "usage")
        input_tokens = counts.get("input_tokens", 0)
        output_tokens = counts.get("output_tokens", 0)
        if "total_tokens" in counts:
            return cls(input_tokens, output_tokens, counts["total_tokens"])
        cls(input_tokens, output_tokens)  # checked before they are added
        return cls(input_tokens, output_tokens, input_tokens + output_tokens)

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
        # The mapping forms (docs/flows.md 3) become the types here, and a wrong type is refused
        # now, where it was written, rather than as a MODEL_ERROR in the middle of a flow.
        message: Any = self.message
        if isinstance(message, Mapping):
            message = Message.model_validate(dict(message))
        elif not isinstance(message, Message):
            raise TypeError("SampleOutput.message must be a Message or its mapping")
        requests: Any = self.action_requests
        if isinstance(requests, str | bytes | Mapping) or not isinstance(
            requests, Iterable
        ):
            raise TypeError("SampleOutput.action_requests must be a list of requests")
        usage: Any = self.usage
        if self.stop_reason is not None and not isinstance(self.stop_reason, str):
            raise TypeError("SampleOutput.stop_reason must be a string or None")
        object.__setattr__(self, "message", message)
        object.__setattr__(
            self, "action_requests", tuple(ActionRequest.of(r) for r in requests)
        )
        object.__setattr__(self, "usage", None if usage is None else Usage.of(usage))

    @classmethod
    def of(cls, value: "SampleOutput | Mapping[str, Any]") -> "SampleOutput":
        """A `SampleOutput`, or its mapping form: `{"message", "action_requests"?, "usage"?,
        "stop_reason"?}` (camelCase too, as `to_dict` writes it)."""
        if isinstance(value, SampleOutput):
            return value
        if not isinstance(value, Mapping):
            raise TypeError("a sample must be a SampleOutput or its mapping")
        fields = _fields(value, _SAMPLE_KEYS, "sample")
        if "message" not in fields:
            raise TypeError("a sample needs a message")
        return cls(**fields)

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message.to_wire(),
            "actionRequests": [request.to_dict() for request in self.action_requests],
            "usage": None if self.usage is None else self.usage.to_dict(),
            "stopReason": self.stop_reason,
        }


def _fields(
    value: Mapping[str, Any], names: Mapping[str, str], what: str
) -> dict[str, Any]:
    """`value`'s keys in their snake_case names; an unknown key, or one given in both spellings, is refused."""
    fields: dict[str, Any] = {}
    for key, item in value.items():
        name = names.get(key) if isinstance(key, str) else None
        if name is None:
            raise TypeError(f"{what} has an unknown key {key!r}")
        if name in fields:
            raise TypeError(f"{what} gives {name} twice")
        fields[name] = item
    return fields


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
