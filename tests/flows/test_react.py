"""`run_react_flow` with `ScriptedModel` and a double of the client's three requests: every stop
reason and error code, the limits at their edges, what is fed back to the model, and what stays in
`action_requests`. The same flows against a real worker are in tests/bus/test_bus_flows.py; the
`unknown` outcome with its request kept is here and there, cancellation of the task only here."""

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import pytest

from interaction_worker import ExternalResult, Message, ToolCall
from interaction_worker.client import (
    InteractionRequestError,
    NoWorkerError,
    ToolOutcome,
)
from interaction_worker.contracts import McpDiscoverOutput
from interaction_worker.flows import (
    ActionDescriptor,
    ActionRequest,
    ActionStep,
    McpTarget,
    ModelError,
    ReactConstraints,
    ReactFlowInput,
    ReactFlowResult,
    SampleOutput,
    ScriptedModel,
    ToolTarget,
    Usage,
    run_react_flow,
)
from interaction_worker.nodes import observe_external_result

QUESTION = Message(role="user", content="What do the files say?")
READ = ActionDescriptor(name="read", description="Read a file")
SEARCH = ActionDescriptor(name="search", target=McpTarget(server="docs", tool="find"))


def answer(text: str = "Done.", usage: Usage | None = None) -> SampleOutput:
    return SampleOutput(Message(role="assistant", content=text), usage=usage)


def act(*requests: tuple[str, str, Any], usage: Usage | None = None) -> SampleOutput:
    return SampleOutput(
        Message(role="assistant", content=None),
        tuple(ActionRequest(i, n, a) for i, n, a in requests),
        usage,
    )


def usage(total: int) -> Usage:
    return Usage(total - 1, 1, total)


class Client:
    """The client's requests, answered in memory: `statuses` by tool name (default success),
    `raises` an exception instead, `hangs` never answers."""

    def __init__(
        self,
        statuses: Mapping[str, str] | None = None,
        raises: Mapping[str, Exception] | None = None,
        hangs: Sequence[str] = (),
    ) -> None:
        self.statuses = dict(statuses or {})
        self.raises = dict(raises or {})
        self.hangs = set(hangs)
        self.sent: list[tuple[str | None, ToolCall]] = []
        self.started = asyncio.Event()
        self.abandoned: list[str] = []

    async def call_tool(self, call: ToolCall, /) -> ToolOutcome:
        return await self._answer(None, call)

    async def mcp_invoke(self, server: str, call: ToolCall, /) -> ToolOutcome:
        return await self._answer(server, call)

    async def mcp_discover(self, server: str | None = None) -> McpDiscoverOutput:
        return McpDiscoverOutput(capabilities=[])

    async def _answer(self, server: str | None, call: ToolCall) -> ToolOutcome:
        self.sent.append((server, call))
        self.started.set()
        if call.name in self.raises:
            raise self.raises[call.name]
        if call.name in self.hangs:
            try:
                await asyncio.Event().wait()
            finally:
                self.abandoned.append(call.id)
        status = self.statuses.get(call.name, "success")
        source = call.name if server is None else f"{server}:{call.name}"
        fields: dict[str, Any] = {"content": f"{call.name} {call.arguments}"}
        if status != "success":
            fields = {"error": {"code": "E", "message": f"{call.name} {status}"}}
        result = ExternalResult.model_validate(
            {"callId": call.id, "source": source, "status": status, **fields}
        )
        return ToolOutcome(result, observe_external_result(result))


async def run(
    steps: Sequence[SampleOutput | Callable[[Sequence[Message]], SampleOutput]],
    client: Client | None = None,
    *,
    actions: Sequence[ActionDescriptor] = (READ, SEARCH),
    constraints: ReactConstraints | None = None,
    **options: Any,
) -> tuple[ReactFlowResult, ScriptedModel, Client]:
    model = ScriptedModel(steps)
    client = client or Client()
    flow_input = ReactFlowInput(
        messages=[QUESTION],
        actions=actions,
        constraints=constraints or ReactConstraints(),
    )
    with anyio.fail_after(10):
        result = await run_react_flow(client, model, flow_input, **options)
    return result, model, client


def ids(requests: Sequence[ActionRequest]) -> list[str]:
    return [request.id for request in requests]


# --- completed, and what the model is given ------------------------------------------------------


async def test_an_answer_without_actions_completes_with_generation_and_metadata_passed() -> (
    None
):
    model = ScriptedModel([answer("Hi.", usage(7))])
    flow_input = ReactFlowInput(
        messages=[QUESTION],
        actions=[READ],
        generation={"temperature": 0},
        metadata={"run": "r-1"},
    )
    result = await run_react_flow(Client(), model, flow_input)

    assert (result.status, result.stop_reason, result.error) == (
        "completed",
        "completed",
        None,
    )
    assert result.result == Message(role="assistant", content="Hi.")
    assert result.usage == Usage(6, 1, 7)
    [call] = model.calls
    assert call.messages == (QUESTION,)
    assert call.actions == (READ,)
    assert dict(call.generation) == {"temperature": 0}
    assert dict(call.metadata) == {"run": "r-1"}


async def test_actions_run_in_order_and_their_observations_are_the_next_messages() -> (
    None
):
    steps: list[SampleOutput] = []
    seen: list[str] = []

    def second(messages: Sequence[Message]) -> SampleOutput:
        seen.extend(str(m.content) for m in messages)
        return answer("Both read.", usage(5))

    first = act(
        ("a", "read", {"path": "x"}), ("b", "search", {"q": "y"}), usage=usage(10)
    )
    steps = [first]
    result, model, client = await run([*steps, second])

    assert result.status == "completed"
    assert result.usage == Usage(13, 2, 15)
    # One after another; the MCP action goes to the bound server and tool, whatever the model says.
    assert [(server, call.name, call.arguments) for server, call in client.sent] == [
        (None, "read", {"path": "x"}),
        ("docs", "find", {"q": "y"}),
    ]
    call_ids = [call.id for _, call in client.sent]
    assert len(set(call_ids)) == 2 and all(i.startswith("react-") for i in call_ids)
    assert [o.call_id for o in result.observations] == call_ids
    messages = model.calls[1].messages
    assert messages[:2] == (QUESTION, first.message)
    assert [
        (m.role, m.name, (m.model_extra or {})["toolCallId"]) for m in messages[2:]
    ] == [
        ("tool", "read", "a"),
        ("tool", "docs:find", "b"),
    ]
    assert seen[2:] == ["read {'path': 'x'}", "find {'q': 'y'}"]
    assert result.action_requests == ()


async def test_a_failed_result_is_fed_back_and_the_flow_goes_on() -> None:
    result, model, client = await run(
        [act(("a", "read", {}), ("b", "read", {})), answer()],
        Client(statuses={"read": "failed"}),
    )
    assert result.stop_reason == "completed"
    assert [o.status for o in result.observations] == ["failed", "failed"]
    assert model.calls[1].messages[-1].content == "failed: E: read failed"


async def test_each_step_is_reported_as_it_happens() -> None:
    steps: list[SampleOutput | ActionStep] = []
    await run([act(("a", "read", {})), answer()], on_step=steps.append)
    assert [type(s).__name__ for s in steps] == [
        "SampleOutput",
        "ActionStep",
        "SampleOutput",
    ]
    step = steps[1]
    assert isinstance(step, ActionStep)
    assert (step.request.id, step.result.status) == ("a", "success")


# --- outcomes that stop the actions --------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kept"),
    [
        pytest.param("cancelled", ["b"], id="cancelled"),
        pytest.param("timeout", ["b"], id="timeout"),
        pytest.param("unknown", ["a", "b"], id="unknown-is-kept"),
    ],
)
async def test_an_outcome_that_may_not_have_happened_stops_further_actions(
    status: str, kept: list[str]
) -> None:
    result, model, client = await run(
        [act(("a", "search", {}), ("b", "read", {})), answer()],
        Client(statuses={"find": status}),
    )
    assert (result.status, result.stop_reason) == ("partial", "dependency_failed")
    assert [call.name for _, call in client.sent] == ["find"]
    assert [o.status for o in result.observations] == [status]
    assert ids(result.action_requests) == kept
    assert len(model.calls) == 1


async def test_an_error_reply_stops_with_its_wire_code_and_keeps_the_request() -> None:
    refused = InteractionRequestError(
        "PERMISSION_DENIED", "Permission denied: tools:read", 403
    )
    result, _, _ = await run(
        [act(("a", "read", {}), ("b", "read", {}))], Client(raises={"read": refused})
    )
    assert (result.status, result.stop_reason) == ("partial", "error")
    assert result.error is not None
    assert result.error.to_dict() == {
        "code": "PERMISSION_DENIED",
        "message": "Permission denied: tools:read",
    }
    assert ids(result.action_requests) == ["a", "b"]


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        pytest.param(
            TimeoutError("no reply on p.tool.call within 1 s"),
            "NO_REPLY",
            id="no-reply",
        ),
        pytest.param(
            NoWorkerError("no worker is serving p.tool.call"),
            "NO_WORKER",
            id="no-worker",
        ),
    ],
)
async def test_no_reply_or_no_worker_is_a_failed_dependency(
    failure: Exception, code: str
) -> None:
    result, _, _ = await run([act(("a", "read", {}))], Client(raises={"read": failure}))
    assert (result.status, result.stop_reason) == ("partial", "dependency_failed")
    assert result.error is not None and result.error.code == code
    assert result.error.message == str(failure)
    assert ids(result.action_requests) == ["a"]


# --- invalid model output --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("second", "code"),
    [
        pytest.param(
            act(("b", "read", {}), ("b", "read", {})),
            "DUPLICATE_ACTION_ID",
            id="dup-in-sample",
        ),
        pytest.param(
            act(("c", "read", {}), ("a", "read", {})),
            "DUPLICATE_ACTION_ID",
            id="dup-in-flow",
        ),
        pytest.param(
            act(("c", "read", {}), ("d", "write", {})),
            "UNDECLARED_ACTION",
            id="undeclared",
        ),
        pytest.param(
            act(("c", "read", {}), ("d", "read", "{}")),
            "INVALID_ACTION_ARGUMENTS",
            id="string",
        ),
        pytest.param(
            act(("c", "read", {}), ("d", "read", [1])),
            "INVALID_ACTION_ARGUMENTS",
            id="array",
        ),
        pytest.param(
            act(("c", "read", {}), ("d", "read", None)),
            "INVALID_ACTION_ARGUMENTS",
            id="null",
        ),
        pytest.param(
            act(("c", "read", {}), ("", "read", {})), "MODEL_ERROR", id="no-id"
        ),
    ],
)
async def test_an_invalid_request_stops_the_flow_before_any_request_of_its_sample_runs(
    second: SampleOutput, code: str
) -> None:
    result, _, client = await run([act(("a", "read", {})), second, answer()])
    assert (result.status, result.stop_reason) == ("partial", "error")
    assert result.error is not None and result.error.code == code
    assert len(client.sent) == 1  # only the first SAMPLE's action ran
    assert result.action_requests == second.action_requests
    assert result.result == second.message
    # The message names the request's position, not what the model wrote.
    assert "write" not in result.error.message and "{}" not in result.error.message


async def test_an_invalid_first_sample_fails_the_flow() -> None:
    result, _, client = await run([act(("a", "write", {}))])
    assert (result.status, result.stop_reason) == ("failed", "error")
    assert client.sent == []


class Broken:
    def __init__(self, error: Exception) -> None:
        self.error = error

    async def sample(self, *args: Any) -> SampleOutput:
        raise self.error


@pytest.mark.parametrize(
    ("error", "message"),
    [
        pytest.param(
            ModelError("the model server answered HTTP 500"),
            "the model server answered HTTP 500",
            id="model-error",
        ),
        pytest.param(
            RuntimeError("key sk-live-123 at /srv/app"),
            "the model provider failed (RuntimeError)",
            id="other",
        ),
        pytest.param(
            ModelError("bad key sk-live-1234567890 in /etc/secret"),
            "the model failed",
            id="unsafe-message",
        ),
    ],
)
async def test_a_failing_provider_is_a_model_error_with_a_safe_message(
    error: Exception, message: str
) -> None:
    flow_input = ReactFlowInput(messages=[QUESTION])
    result = await run_react_flow(Client(), Broken(error), flow_input)
    assert (result.status, result.stop_reason) == ("failed", "error")
    assert result.error is not None
    assert result.error.to_dict() == {"code": "MODEL_ERROR", "message": message}
    assert result.samples == () and result.result is None


async def test_a_script_that_runs_out_or_a_non_assistant_message_is_a_model_error() -> (
    None
):
    result, _, _ = await run([act(("a", "read", {}))])
    assert (result.status, result.stop_reason) == ("partial", "error")
    assert result.error is not None and result.error.code == "MODEL_ERROR"
    assert ids(result.action_requests) == []

    odd = SampleOutput(Message(role="user", content="?"))
    result, _, _ = await run([odd])
    assert result.error is not None and result.error.code == "MODEL_ERROR"


async def test_no_usage_while_a_token_limit_is_set_is_usage_unavailable() -> None:
    result, _, client = await run(
        [act(("a", "read", {}))],
        constraints=ReactConstraints(max_total_tokens=100),
    )
    assert (result.status, result.stop_reason) == ("failed", "error")
    assert result.error is not None and result.error.code == "USAGE_UNAVAILABLE"
    assert client.sent == []
    assert ids(result.action_requests) == ["a"]

    # Without a limit, a missing usage is only left out of the sum.
    result, _, _ = await run([act(("a", "read", {}), usage=usage(4)), answer()])
    assert (result.stop_reason, result.usage.total_tokens) == ("completed", 4)


# --- limits ----------------------------------------------------------------------------------------


async def test_zero_action_calls_executes_nothing_and_keeps_the_requests() -> None:
    result, _, client = await run(
        [act(("a", "read", {}), ("b", "search", {}))],
        constraints=ReactConstraints(max_action_calls=0),
    )
    assert (result.status, result.stop_reason) == ("partial", "max_action_calls")
    assert client.sent == []
    assert ids(result.action_requests) == ["a", "b"]


async def test_a_batch_is_split_at_max_action_calls() -> None:
    result, model, client = await run(
        [
            act(("a", "read", {}), ("b", "read", {})),
            act(("c", "read", {}), ("d", "read", {})),
        ],
        constraints=ReactConstraints(max_action_calls=3),
    )
    assert result.stop_reason == "max_action_calls"
    assert len(client.sent) == 3
    assert ids(result.action_requests) == ["d"]
    assert len(model.calls) == 2


async def test_the_last_step_runs_no_action_nobody_would_read() -> None:
    result, model, client = await run(
        [act(("a", "read", {})), act(("b", "read", {}))],
        constraints=ReactConstraints(max_steps=2),
    )
    assert (result.status, result.stop_reason) == ("partial", "max_steps")
    assert [call.name for _, call in client.sent] == ["read"]
    assert len(result.observations) == 1
    assert ids(result.action_requests) == ["b"]
    assert len(model.calls) == 2


async def test_one_step_may_still_complete() -> None:
    result, _, _ = await run([answer()], constraints=ReactConstraints(max_steps=1))
    assert result.stop_reason == "completed"


@pytest.mark.parametrize(
    ("budget", "reason", "samples"),
    [
        pytest.param(11, "completed", 2, id="below"),
        pytest.param(10, "max_tokens", 1, id="reached"),
        pytest.param(9, "max_tokens", 1, id="crossed"),
    ],
)
async def test_the_token_budget_is_checked_before_a_further_sample(
    budget: int, reason: str, samples: int
) -> None:
    result, model, client = await run(
        [act(("a", "read", {}), usage=usage(10)), answer(usage=usage(3))],
        constraints=ReactConstraints(max_total_tokens=budget),
    )
    assert result.stop_reason == reason
    assert len(model.calls) == samples
    if reason == "max_tokens":
        assert result.status == "partial"
        assert client.sent == [] and ids(result.action_requests) == ["a"]


async def test_the_flow_timeout_stops_a_model_that_does_not_answer() -> None:
    class Silent:
        async def sample(self, *args: Any) -> SampleOutput:
            await asyncio.Event().wait()
            raise AssertionError

    flow_input = ReactFlowInput(
        messages=[QUESTION], constraints=ReactConstraints(timeout=5)
    )
    with anyio.fail_after(5):
        result = await run_react_flow(Client(), Silent(), flow_input, timeout=0.05)
    assert (result.status, result.stop_reason) == ("failed", "timeout")


async def test_the_flow_timeout_abandons_the_action_in_flight_and_keeps_it() -> None:
    client = Client(hangs=["read"])
    result, _, _ = await run(
        [act(("a", "read", {}), ("b", "read", {}))],
        client,
        constraints=ReactConstraints(timeout=0.1),
    )
    assert (result.status, result.stop_reason) == ("partial", "timeout")
    assert ids(result.action_requests) == ["a", "b"]
    assert len(client.abandoned) == 1


async def test_a_cancel_event_stops_the_flow_at_the_action_in_flight() -> None:
    cancel = asyncio.Event()
    client = Client(hangs=["read"])

    async def stop_when_sent() -> None:
        await client.started.wait()
        cancel.set()

    async with anyio.create_task_group() as group:
        group.start_soon(stop_when_sent)
        result, _, _ = await run([act(("a", "read", {}))], client, cancel=cancel)
    assert (result.status, result.stop_reason) == ("partial", "cancelled")
    assert ids(result.action_requests) == ["a"]
    assert client.abandoned == [client.sent[0][1].id]


async def test_a_cancel_event_set_before_the_start_fails_the_flow() -> None:
    cancel = asyncio.Event()
    cancel.set()
    result, model, _ = await run([answer()], cancel=cancel)
    assert (result.status, result.stop_reason) == ("failed", "cancelled")
    assert model.calls == []


async def test_cancelling_the_task_raises_and_abandons_the_action() -> None:
    client = Client(hangs=["read"])
    model = ScriptedModel([act(("a", "read", {}))])
    flow_input = ReactFlowInput(messages=[QUESTION], actions=[READ])
    task = asyncio.create_task(run_react_flow(client, model, flow_input))
    with anyio.fail_after(5):
        await client.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(client.abandoned) == 1


# --- invalid input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: ReactFlowInput(messages=[]), id="no-messages"),
        pytest.param(
            lambda: ReactFlowInput(messages=[QUESTION], actions=[READ, READ]),
            id="duplicate-names",
        ),
        pytest.param(lambda: ReactConstraints(max_steps=0), id="max-steps-0"),
        pytest.param(lambda: ReactConstraints(max_steps=True), id="max-steps-bool"),
        pytest.param(
            lambda: ReactConstraints(max_action_calls=-1),
            id="max-action-calls-negative",
        ),
        pytest.param(lambda: ReactConstraints(max_total_tokens=0), id="max-tokens-0"),
        pytest.param(lambda: ReactConstraints(timeout=0), id="timeout-0"),
        pytest.param(lambda: ReactConstraints(timeout=float("inf")), id="timeout-inf"),
        pytest.param(lambda: ActionDescriptor(name="read file"), id="action-name"),
        pytest.param(lambda: McpTarget(server="", tool="x"), id="mcp-server"),
    ],
)
def test_invalid_input_raises_value_error(build: Callable[[], object]) -> None:
    with pytest.raises(ValueError):
        build()


async def test_an_invalid_timeout_raises_before_the_model_is_asked() -> None:
    model = ScriptedModel([answer()])
    with pytest.raises(ValueError, match="timeout"):
        await run_react_flow(
            Client(), model, ReactFlowInput(messages=[QUESTION]), timeout=-1
        )
    assert model.calls == []


def test_the_defaults_are_the_specified_ones() -> None:
    constraints = ReactConstraints()
    assert (constraints.max_steps, constraints.max_action_calls) == (8, 16)
    assert (constraints.max_total_tokens, constraints.timeout) == (None, 30.0)
    assert READ.bound == ToolTarget("read")
