"""The input, limits and result of a ReAct flow (flows.md 3)."""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from ..contracts import ExternalResult, Message, Observation
from .actions import ActionDescriptor, ActionRequest
from .model_provider import SampleOutput, Usage

StopReason = Literal[
    "completed",
    "max_steps",
    "max_action_calls",
    "max_tokens",
    "timeout",
    "cancelled",
    "dependency_failed",
    "error",
]
FlowStatus = Literal["completed", "partial", "failed"]

DEFAULT_MAX_STEPS = 8
DEFAULT_MAX_ACTION_CALLS = 16
DEFAULT_TIMEOUT = 30.0


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class ReactConstraints:
    """The flow's limits. `max_total_tokens` bounds the usage summed so far, checked before each
    further SAMPLE: it is not a cap on one request."""

    max_steps: int = DEFAULT_MAX_STEPS
    max_action_calls: int = DEFAULT_MAX_ACTION_CALLS
    max_total_tokens: int | None = None
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        if not _is_int(self.max_steps) or self.max_steps < 1:
            raise ValueError("max_steps must be a whole number of at least 1")
        if not _is_int(self.max_action_calls) or self.max_action_calls < 0:
            raise ValueError("max_action_calls must be a whole number of at least 0")
        if self.max_total_tokens is not None and (
            not _is_int(self.max_total_tokens) or self.max_total_tokens < 1
        ):
            raise ValueError(
                "max_total_tokens must be None or a whole number of at least 1"
            )
        if not _is_positive_seconds(self.timeout):
            raise ValueError("timeout must be a number of seconds above 0")


def _is_positive_seconds(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


@dataclass(frozen=True, slots=True)
class ReactFlowInput:
    """What the model starts from and what it may do.

    `generation` (temperature, max tokens, …) and `metadata` reach every `sample()` unchanged.
    """

    messages: Sequence[Message]
    actions: Sequence[ActionDescriptor] = ()
    constraints: ReactConstraints = field(default_factory=ReactConstraints)
    generation: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        messages = tuple(self.messages)
        if not messages:
            raise ValueError("a ReAct flow needs at least one message")
        if not all(isinstance(m, Message) for m in messages):
            raise ValueError("messages must be Message objects")
        actions = tuple(self.actions)
        if not all(isinstance(a, ActionDescriptor) for a in actions):
            raise ValueError("actions must be ActionDescriptor objects")
        names = [action.name for action in actions]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"action names must be unique: {', '.join(duplicates)}")
        if not isinstance(self.constraints, ReactConstraints):
            raise ValueError("constraints must be ReactConstraints")
        object.__setattr__(self, "messages", messages)
        object.__setattr__(self, "actions", actions)
        object.__setattr__(self, "generation", MappingProxyType(dict(self.generation)))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))


@dataclass(frozen=True, slots=True)
class FlowError:
    """Why the flow stopped, when it stopped on an error: a code and a safe message."""

    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True, slots=True)
class ActionStep:
    """One executed action: the model's request, the worker's result and its observation."""

    request: ActionRequest
    result: ExternalResult
    observation: Observation

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.request.to_dict(),
            "observation": self.observation.to_wire(),
        }


@dataclass(frozen=True, slots=True)
class ReactFlowResult:
    """How the flow ended.

    `result` is the last assistant message (None when no SAMPLE answered); `action_requests` holds
    the requests not handled: never sent, or sent with an outcome the caller must not assume
    (unknown, no reply, the flow's timeout or cancellation, an error reply).
    """

    result: Message | None
    samples: tuple[SampleOutput, ...]
    observations: tuple[Observation, ...]
    action_requests: tuple[ActionRequest, ...]
    status: FlowStatus
    stop_reason: StopReason
    usage: Usage
    error: FlowError | None = None

    def to_dict(self) -> dict[str, Any]:
        """As JSON: camelCase keys, as the wire and the command line print it."""
        document: dict[str, Any] = {
            "result": None if self.result is None else self.result.to_wire(),
            "samples": [sample.to_dict() for sample in self.samples],
            "observations": [o.to_wire() for o in self.observations],
            "actionRequests": [r.to_dict() for r in self.action_requests],
            "status": self.status,
            "stopReason": self.stop_reason,
            "usage": self.usage.to_dict(),
        }
        if self.error is not None:
            document["error"] = self.error.to_dict()
        return document
