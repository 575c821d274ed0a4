"""The mapping forms of a sample (docs/flows.md 3): `usage` and action requests as dicts, a step of
`ScriptedModel` as a dict. They run as the types do; a wrong type is refused where it is written,
never a MODEL_ERROR "(TypeError)" in the middle of a flow."""

from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import pytest

from interaction_worker import ExternalResult, Message, ToolCall
from interaction_worker.client import ToolOutcome
from interaction_worker.contracts import McpDiscoverOutput
from interaction_worker.flows import (
    ActionDescriptor,
    ActionRequest,
    ReactConstraints,
    ReactFlowInput,
    ReactFlowResult,
    SampleOutput,
    ScriptedModel,
    Usage,
    run_react_flow,
)
from interaction_worker.nodes import observe_external_result

QUESTION = Message(role="user", content="What does the file say?")
ASSISTANT = {"role": "assistant", "content": None}


class Client:
    """Every tool call succeeds, in memory."""

    def __init__(self) -> None:
        self.sent: list[ToolCall] = []

    async def call_tool(self, call: ToolCall, /) -> ToolOutcome:
        self.sent.append(call)
        result = ExternalResult.model_validate(
            {
                "callId": call.id,
                "source": call.name,
                "status": "success",
                "content": "ok",
            }
        )
        return ToolOutcome(result, observe_external_result(result))

    async def mcp_invoke(self, server: str, call: ToolCall, /) -> ToolOutcome:
        raise AssertionError("no MCP action here")

    async def mcp_discover(self, server: str | None = None) -> McpDiscoverOutput:
        return McpDiscoverOutput(capabilities=[])


async def run(model: Any, client: Client) -> ReactFlowResult:
    flow_input = ReactFlowInput(
        messages=[QUESTION],
        actions=[ActionDescriptor(name="read")],
        # A token limit: usage is then required, and summed.
        constraints=ReactConstraints(max_total_tokens=1000),
    )
    with anyio.fail_after(10):
        return await run_react_flow(client, model, flow_input)


async def test_a_script_of_mappings_runs_as_one_of_samples() -> None:
    def second(messages: Sequence[Message]) -> Mapping[str, Any]:
        assert messages[-1].role == "tool"
        return {
            "message": {"role": "assistant", "content": "It says hello."},
            "usage": {"inputTokens": 5, "outputTokens": 2},  # as to_dict writes it
            "stopReason": "stop",
        }

    model = ScriptedModel(
        [
            {
                "message": ASSISTANT,
                "action_requests": [
                    {"id": "a", "name": "read", "arguments": {"path": "README"}}
                ],
                "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
            },
            second,
        ]
    )
    client = Client()

    result = await run(model, client)

    assert (result.status, result.stop_reason) == ("completed", "completed")
    assert result.usage == Usage(8, 3, 11)
    assert [call.arguments for call in client.sent] == [{"path": "README"}]
    assert result.result == Message(role="assistant", content="It says hello.")
    assert result.samples[0].action_requests == (
        ActionRequest("a", "read", {"path": "README"}),
    )


async def test_a_sample_built_with_mappings_holds_the_types() -> None:
    loose: Any = SampleOutput
    sample = loose(
        ASSISTANT,
        [{"id": "a", "name": "read", "arguments": {}}],
        {"input_tokens": 2, "output_tokens": 1},
    )
    assert sample.message == Message(role="assistant", content=None)
    assert sample.action_requests == (ActionRequest("a", "read", {}),)
    assert sample.usage == Usage(2, 1, 3)
    assert SampleOutput.of(sample.to_dict()) == sample

    result = await run(
        ScriptedModel([sample, {"message": {"role": "assistant", "content": "ok"}}]),
        Client(),
    )
    # The second sample gave no usage while a token limit is set: the flow's own rule, not a TypeError.
    assert result.error is not None
    assert result.error.code == "USAGE_UNAVAILABLE"


class MappingModel:
    """A provider of the caller's that answers the mapping form."""

    def __init__(self, answer: Mapping[str, Any]) -> None:
        self.answer = answer

    async def sample(self, *args: Any) -> Any:
        return self.answer


async def test_a_provider_answering_the_mapping_form_is_read() -> None:
    answer = {
        "message": {"role": "assistant", "content": "Hello."},
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }
    result = await run(MappingModel(answer), Client())
    assert (result.stop_reason, result.usage.total_tokens) == ("completed", 2)

    result = await run(MappingModel({"text": "Hello."}), Client())
    assert result.error is not None
    assert result.error.to_dict() == {
        "code": "MODEL_ERROR",
        "message": "the model provider answered a mapping that is not a sample",
    }


MESSAGE = Message(role="assistant", content="x")
# Built as a caller without type checking would: the wrong types are what is tested.
Loose: Any = SampleOutput
LooseScript: Any = ScriptedModel


@pytest.mark.parametrize(
    ("build", "problem"),
    [
        pytest.param(lambda: Loose(5), "SampleOutput.message", id="message"),
        pytest.param(
            lambda: Loose(MESSAGE, 5),
            "SampleOutput.action_requests",
            id="requests-number",
        ),
        pytest.param(
            lambda: Loose(MESSAGE, "ab"),
            "SampleOutput.action_requests",
            id="requests-string",
        ),
        pytest.param(
            lambda: Loose(MESSAGE, [("a", "read", {})]),
            "an action request must be",
            id="request-tuple",
        ),
        pytest.param(
            lambda: Loose(MESSAGE, [{"id": "a", "name": "read"}]),
            'exactly the keys "id", "name" and "arguments"',
            id="request-without-arguments",
        ),
        pytest.param(
            lambda: Loose(MESSAGE, usage=5),
            "usage must be a Usage",
            id="usage-number",
        ),
        pytest.param(
            lambda: Loose(MESSAGE, usage={"prompt_tokens": 1}),
            "usage has an unknown key 'prompt_tokens'",
            id="usage-other-names",
        ),
        pytest.param(
            lambda: Loose(MESSAGE, usage={"input_tokens": "3"}),
            "Usage.input_tokens must be a non-negative integer",
            id="usage-string-count",
        ),
        pytest.param(
            lambda: Usage.of({"input_tokens": 1, "inputTokens": 1}),
            "usage gives input_tokens twice",
            id="usage-twice",
        ),
        pytest.param(
            lambda: Usage(-1, 0, 0),
            "Usage.input_tokens must be a non-negative integer",
            id="usage-negative",
        ),
        pytest.param(
            lambda: Loose(MESSAGE, stop_reason=1),
            "SampleOutput.stop_reason",
            id="stop-reason",
        ),
        pytest.param(
            lambda: LooseScript([5]),
            "step 1 of the script must be",
            id="step-number",
        ),
        pytest.param(
            lambda: LooseScript([{"message": ASSISTANT}, {"messages": []}]),
            "step 2 of the script: sample has an unknown key 'messages'",
            id="step-mapping-unknown-key",
        ),
        pytest.param(
            lambda: LooseScript([{"usage": None}]),
            "step 1 of the script: a sample needs a message",
            id="step-without-message",
        ),
    ],
)
def test_a_wrong_type_is_refused_where_it_is_written(build: Any, problem: str) -> None:
    with pytest.raises(TypeError) as refused:
        build()
    assert problem in str(refused.value)


def test_a_message_mapping_that_is_no_message_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="role"):
        Loose({"role": "robot", "content": "x"})


async def test_a_script_function_returning_no_sample_is_a_model_error_naming_the_step() -> (
    None
):
    model = LooseScript([lambda messages: ["not", "a", "sample"]])
    result = await run(model, Client())
    assert result.error is not None
    assert result.error.to_dict() == {
        "code": "MODEL_ERROR",
        "message": "step 1 of the script returned something other than a sample",
    }
