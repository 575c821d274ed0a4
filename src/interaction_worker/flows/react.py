"""`run_react_flow` (flows.md 3): SAMPLE → declared actions → observations fed back → next SAMPLE.

The loop runs in the client: the model is a `ModelProvider`, each action one request to the worker
through the client (a tool call or an MCP invoke, observed as the worker observes it). Actions
run one after another. Everything that can happen while it runs ends in a `ReactFlowResult`; only
invalid input raises (`ValueError`, before anything runs), and cancelling the flow's task is
ordinary asyncio cancellation.
"""

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from pydantic import ValidationError

from ..client import InteractionRequestError, NoWorkerError, ToolOutcome
from ..contracts import Message, Observation, ToolCall, is_safe_message
from ._bounded import Interrupted, bounded
from ._client import FlowClient
from .actions import ActionDescriptor, ActionRequest, ToolTarget
from .model_provider import ModelError, ModelProvider, SampleOutput, Usage
from .react_types import (
    ActionStep,
    FlowError,
    FlowStatus,
    ReactFlowInput,
    ReactFlowResult,
    StopReason,
    _is_positive_seconds,
)

DUPLICATE_ACTION_ID = "DUPLICATE_ACTION_ID"
UNDECLARED_ACTION = "UNDECLARED_ACTION"
INVALID_ACTION_ARGUMENTS = "INVALID_ACTION_ARGUMENTS"
USAGE_UNAVAILABLE = "USAGE_UNAVAILABLE"
MODEL_ERROR = "MODEL_ERROR"
NO_REPLY = "NO_REPLY"
NO_WORKER = "NO_WORKER"

# A result with one of these statuses may or may not have had its effect: nothing after it runs.
STOPPING_STATUSES = frozenset(("cancelled", "timeout", "unknown"))

StepCallback = Callable[[SampleOutput | ActionStep], None]
T = TypeVar("T")


async def run_react_flow(
    client: FlowClient,
    model: ModelProvider,
    flow_input: ReactFlowInput,
    *,
    timeout: float | None = None,  # noqa: ASYNC109 - the flow's own deadline, which it reports
    cancel: asyncio.Event | None = None,
    on_step: StepCallback | None = None,
) -> ReactFlowResult:
    """Run the loop until the model answers without actions, a limit is reached, or it stops.

    Args:
        timeout: seconds for the whole flow; the smaller of this and `constraints.timeout` applies.
        cancel: once set, the flow stops at its next await with stop reason `cancelled`.
        on_step: called with each `SampleOutput` and each `ActionStep` as they happen.

    Raises:
        ValueError: `timeout` is not a number of seconds above 0.
    """
    if not isinstance(flow_input, ReactFlowInput):
        raise ValueError("flow_input must be a ReactFlowInput")
    if timeout is not None and not _is_positive_seconds(timeout):
        raise ValueError("timeout must be None or a number of seconds above 0")
    seconds = flow_input.constraints.timeout
    if timeout is not None:
        seconds = min(seconds, timeout)
    run = _Run(client, model, flow_input, seconds, cancel, on_step)
    return await run.run()


class _Stop(Exception):
    """Ends the loop; `_Run.run` turns it into the result."""

    def __init__(self, reason: StopReason, error: FlowError | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error = error


class _Run:
    """The state of one flow. `pending` is always the requests not handled yet, so every way out
    of the loop reports it as it stands."""

    def __init__(
        self,
        client: FlowClient,
        model: ModelProvider,
        flow_input: ReactFlowInput,
        seconds: float,
        cancel: asyncio.Event | None,
        on_step: StepCallback | None,
    ) -> None:
        self.client = client
        self.model = model
        self.input = flow_input
        self.constraints = flow_input.constraints
        self.actions = {action.name: action for action in flow_input.actions}
        self.deadline = asyncio.get_running_loop().time() + seconds
        self.cancel = cancel
        self.on_step = on_step
        # Call ids on the wire are the flow's own: a model's ids (`call_0`) repeat across flows,
        # and a worker with the idempotency ledger would answer a repeated id from its record.
        self.run_id = f"react-{uuid.uuid4().hex}"
        self.messages: list[Message] = list(flow_input.messages)
        self.samples: list[SampleOutput] = []
        self.accepted = 0
        self.observations: list[Observation] = []
        self.pending: list[ActionRequest] = []
        self.seen_ids: set[str] = set()
        self.calls_built = 0
        self.action_calls = 0
        self.usage = Usage()

    async def run(self) -> ReactFlowResult:
        try:
            await self._loop()
        except _Stop as stop:
            return self._finish(stop.reason, stop.error)
        raise AssertionError("the loop ends with a stop")  # pragma: no cover

    async def _loop(self) -> None:
        steps = 0
        while True:
            sample = await self._sample()
            steps += 1
            self.samples.append(sample)
            if self.on_step is not None:
                self.on_step(sample)
            self.pending = list(sample.action_requests)
            if sample.usage is not None:
                self.usage += sample.usage
            elif self.constraints.max_total_tokens is not None:
                raise _Stop(
                    "error",
                    FlowError(
                        USAGE_UNAVAILABLE,
                        "the model gave no token usage, and max_total_tokens is set",
                    ),
                )
            calls = self._validate(sample.action_requests)
            self.accepted += 1
            self.messages.append(sample.message)
            if not calls:
                raise _Stop("completed")
            # Observations nobody reads are not worth an action's side effects: without a further
            # SAMPLE (steps or tokens spent), the requests stay pending.
            if steps >= self.constraints.max_steps:
                raise _Stop("max_steps")
            if self._tokens_spent():
                raise _Stop("max_tokens")
            for request, descriptor, call in calls:
                if self.action_calls >= self.constraints.max_action_calls:
                    raise _Stop("max_action_calls")
                await self._act(request, descriptor, call)

    def _tokens_spent(self) -> bool:
        limit = self.constraints.max_total_tokens
        return limit is not None and self.usage.total_tokens >= limit

    async def _sample(self) -> SampleOutput:
        try:
            output = await self._bounded(
                self.model.sample(
                    tuple(self.messages),
                    self.input.actions,
                    self.input.generation,
                    self.input.metadata,
                )
            )
        except _Stop:
            raise
        except ModelError as error:
            text = str(error)
            safe = text if text and is_safe_message(text) else "the model failed"
            raise _Stop("error", FlowError(MODEL_ERROR, safe)) from None
        except Exception as error:
            raise _Stop(
                "error",
                FlowError(
                    MODEL_ERROR, f"the model provider failed ({type(error).__name__})"
                ),
            ) from None
        if isinstance(output, Mapping):
            # The mapping form of a sample (docs/flows.md 3), from a provider of the caller's.
            try:
                output = SampleOutput.of(output)
            except (TypeError, ValueError):
                raise _Stop(
                    "error",
                    FlowError(
                        MODEL_ERROR,
                        "the model provider answered a mapping that is not a sample",
                    ),
                ) from None
        if (
            not isinstance(output, SampleOutput)
            or not isinstance(output.message, Message)
            or output.message.role != "assistant"
        ):
            raise _Stop(
                "error",
                FlowError(
                    MODEL_ERROR,
                    "the model provider answered something other than an assistant message",
                ),
            )
        return output

    def _validate(
        self, requests: tuple[ActionRequest, ...]
    ) -> list[tuple[ActionRequest, ActionDescriptor, ToolCall]]:
        """Every request of a SAMPLE checked, and its call built, before any of them runs.

        The messages name the request by its position, never by what the model wrote."""
        calls = []
        ids: set[str] = set()
        for number, request in enumerate(requests, start=1):
            if (
                not isinstance(request, ActionRequest)
                or not isinstance(request.id, str)
                or not request.id
                or not isinstance(request.name, str)
            ):
                raise _Stop(
                    "error",
                    FlowError(
                        MODEL_ERROR,
                        f"action request {number} has no id or no name",
                    ),
                )
            if request.id in self.seen_ids or request.id in ids:
                raise _Stop(
                    "error",
                    FlowError(
                        DUPLICATE_ACTION_ID,
                        f"action request {number}: its id was used before in this flow",
                    ),
                )
            descriptor = self.actions.get(request.name)
            if descriptor is None:
                raise _Stop(
                    "error",
                    FlowError(
                        UNDECLARED_ACTION,
                        f"action request {number} names an action that was not declared",
                    ),
                )
            call = self._call(request, descriptor)
            if call is None:
                raise _Stop(
                    "error",
                    FlowError(
                        INVALID_ACTION_ARGUMENTS,
                        f"action request {number}: arguments must be a JSON object",
                    ),
                )
            ids.add(request.id)
            calls.append((request, descriptor, call))
        self.seen_ids |= ids
        return calls

    def _call(
        self, request: ActionRequest, descriptor: ActionDescriptor
    ) -> ToolCall | None:
        arguments = request.arguments
        if not isinstance(arguments, dict) or not all(
            isinstance(key, str) for key in arguments
        ):
            return None
        target = descriptor.bound
        self.calls_built += 1
        try:
            return ToolCall(
                id=f"{self.run_id}-{self.calls_built}",
                name=target.name if isinstance(target, ToolTarget) else target.tool,
                arguments=arguments,
            )
        except ValidationError:
            return None

    async def _act(
        self, request: ActionRequest, descriptor: ActionDescriptor, call: ToolCall
    ) -> None:
        target = descriptor.bound
        sent: Awaitable[ToolOutcome] = (
            self.client.call_tool(call)
            if isinstance(target, ToolTarget)
            else self.client.mcp_invoke(target.server, call)
        )
        self.action_calls += 1
        try:
            outcome = await self._bounded(sent)
        except InteractionRequestError as error:
            # Refused: not an observation, and some refusals (INVALID_RESULT) come after the tool
            # ran, so the request stays pending.
            raise _Stop("error", FlowError(error.code, error.message)) from None
        except NoWorkerError as error:
            raise _Stop("dependency_failed", FlowError(NO_WORKER, str(error))) from None
        except TimeoutError as error:
            raise _Stop("dependency_failed", FlowError(NO_REPLY, str(error))) from None
        observation = outcome.observation
        self.observations.append(observation)
        self.messages.append(_tool_message(request, observation))
        if self.on_step is not None:
            self.on_step(ActionStep(request, outcome.result, observation))
        if outcome.result.status == "unknown":
            raise _Stop("dependency_failed")
        self.pending.pop(0)
        if outcome.result.status in STOPPING_STATUSES:
            raise _Stop("dependency_failed")

    async def _bounded(self, awaitable: Awaitable[T]) -> T:
        try:
            return await bounded(awaitable, self.deadline, self.cancel)
        except Interrupted as interrupted:
            raise _Stop(interrupted.reason) from None

    def _finish(self, reason: StopReason, error: FlowError | None) -> ReactFlowResult:
        status: FlowStatus = (
            "completed"
            if reason == "completed"
            else "partial"
            if self.accepted
            else "failed"
        )
        return ReactFlowResult(
            result=self.samples[-1].message if self.samples else None,
            samples=tuple(self.samples),
            observations=tuple(self.observations),
            action_requests=tuple(self.pending),
            status=status,
            stop_reason=reason,
            usage=self.usage,
            error=error,
        )


def _tool_message(request: ActionRequest, observation: Observation) -> Message:
    """The observation's tool message, with the id the model gave its request (`toolCallId`), so a
    provider can pair them."""
    document = observation.message.to_wire()
    document["toolCallId"] = request.id
    return Message.model_validate(document)
