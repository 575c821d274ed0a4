"""The flows against a worker served on a real nats-server (the package's `serve_worker`), with tools
of this module that answer each status, a slow tool, and the MCP probe server over stdio: the
tool-call and MCP flows, every stop reason of `run_react_flow`, its limits at their edges, and
examples/react_agent.py as a user runs it."""

import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from interaction_worker import (
    InteractionWorker,
    McpRegistry,
    Message,
    Sandbox,
    ToolCall,
    ToolContext,
)
from interaction_worker.client import InteractionClient
from interaction_worker.flows import (
    ActionDescriptor,
    ActionRequest,
    Context,
    McpTarget,
    ReactConstraints,
    ReactFlowInput,
    ReactFlowResult,
    SampleOutput,
    ScriptedModel,
    Usage,
    run_mcp_flow,
    run_react_flow,
    run_tool_call_flow,
)
from interaction_worker.mcp import McpServerConnection
from interaction_worker.testing.served import ServedWorker, ServeWorker
from interaction_worker.tools import ReadTextTool

pytest_plugins = ["mcp_fixtures"]

REPO = Path(__file__).resolve().parents[2]
QUESTION = Message(role="user", content="Go.")
ACTIONS = [
    ActionDescriptor(name="read_text"),
    ActionDescriptor(name="outcome"),
    ActionDescriptor(name="sleep"),
    ActionDescriptor(name="hidden"),
    ActionDescriptor(name="echo", target=McpTarget(server="probe", tool="echo")),
]


class Outcome:
    """Answers with the status its `status` argument names (success by default)."""

    name = "outcome"
    input_schema: Mapping[str, Any] = {"type": "object"}

    def __init__(self) -> None:
        self.calls: list[str] = []

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.calls.append(context.call_id)
        status = arguments.get("status", "success")
        if status == "success":
            return {"status": "success", "content": f"done {arguments.get('n', '')}"}
        return {
            "status": status,
            "error": {"code": "OUTCOME", "message": f"Outcome {status}"},
        }


class Sleep:
    """Sleeps `seconds`; `started` is set when a call begins."""

    name = "sleep"
    input_schema: Mapping[str, Any] = {"type": "object"}

    def __init__(self) -> None:
        self.started = asyncio.Event()

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.started.set()
        await asyncio.sleep(float(arguments["seconds"]))
        return {"status": "success", "content": "slept"}


class Hidden(Outcome):
    """Registered, not granted by the sandbox."""

    name = "hidden"


class Shared:
    """The module's probe connection, without `start`/`aclose`: a worker that stops leaves it open
    for the next test."""

    def __init__(self, connection: McpServerConnection) -> None:
        self.connection = connection

    async def list_tools(self, cursor: str | None = None) -> Any:
        return await self.connection.list_tools(cursor)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        return await self.connection.call_tool(name, arguments)


class Kit:
    def __init__(
        self, workspace: Path, probe: McpServerConnection | None = None
    ) -> None:
        (workspace / "a.txt").write_text("alpha\n")
        (workspace / "b.txt").write_text("beta\n")
        self.outcome = Outcome()
        self.sleep = Sleep()
        registry = None
        if probe is not None:
            registry = McpRegistry()
            registry.register("probe", Shared(probe))
        self.worker = InteractionWorker(
            tools=[ReadTextTool(), self.outcome, self.sleep, Hidden()],
            mcp=registry,
            sandbox=Sandbox(
                tools=["read_text", "outcome", "sleep"],
                mcp=["probe"],
                read=True,
                workspace=workspace,
            ),
        )


def act(
    *requests: tuple[str, str, dict[str, Any]], tokens: int | None = None
) -> SampleOutput:
    return SampleOutput(
        Message(role="assistant", content=None),
        tuple(ActionRequest(*request) for request in requests),
        None if tokens is None else Usage(tokens - 1, 1, tokens),
    )


def answer(text: str = "Done.", tokens: int | None = None) -> SampleOutput:
    return SampleOutput(
        Message(role="assistant", content=text),
        usage=None if tokens is None else Usage(tokens - 1, 1, tokens),
    )


async def react(
    client: InteractionClient,
    steps: Sequence[Any],
    constraints: ReactConstraints | None = None,
    **options: Any,
) -> tuple[ReactFlowResult, ScriptedModel]:
    model = ScriptedModel(steps)
    flow_input = ReactFlowInput(
        messages=[QUESTION],
        actions=ACTIONS,
        constraints=constraints or ReactConstraints(timeout=20),
    )
    with anyio.fail_after(30):
        return await run_react_flow(client, model, flow_input, **options), model


def pending(result: ReactFlowResult) -> list[str]:
    return [request.id for request in result.action_requests]


@pytest.fixture
async def kit(serve_worker: ServeWorker, tmp_path: Path) -> tuple[Kit, ServedWorker]:
    kit = Kit(tmp_path)
    return kit, await serve_worker(kit.worker, tool_timeout="0.3s")


# --- the tool-call and MCP flows -----------------------------------------------------------------


async def test_the_tool_call_flow_appends_each_observation_to_a_new_context(
    kit: tuple[Kit, ServedWorker],
) -> None:
    _, served = kit
    start = Context([QUESTION], {"run": "r-1"})
    first = await run_tool_call_flow(
        served.client,
        context=start,
        call=ToolCall(id="call-1", name="read_text", arguments={"path": "a.txt"}),
    )
    missing = await run_tool_call_flow(
        served.client,
        context=first.context,
        call=ToolCall(id="call-2", name="read_text", arguments={"path": "none.txt"}),
    )
    assert first.result.content == "alpha\n"
    assert first.context.messages == (QUESTION, first.observation.message)
    assert missing.result.status == "failed"  # still an observation, still appended
    assert missing.context.messages[-1] == missing.observation.message
    assert dict(missing.context.metadata) == {"run": "r-1"}
    assert start.messages == (QUESTION,)  # the input is not changed


async def test_the_mcp_flow_discovers_and_invokes_a_real_mcp_server(
    serve_worker: ServeWorker, tmp_path: Path, probe: McpServerConnection
) -> None:
    served = await serve_worker(Kit(tmp_path, probe).worker)
    start = Context([QUESTION])
    found = await run_mcp_flow(served.client, context=start, operation="discover")
    step = await run_mcp_flow(
        served.client,
        context=start,
        operation="invoke",
        server="probe",
        call=ToolCall(id="m-1", name="echo", arguments={"text": "hi"}),
    )
    assert "echo" in [c.name for c in found.capabilities]
    assert found.context is start
    assert (step.result.source, step.result.content) == (
        "probe:echo",
        [{"type": "text", "text": "hi"}],
    )
    assert step.context.messages == (QUESTION, step.observation.message)
    with pytest.raises(ValueError, match="needs a server"):
        await run_mcp_flow(
            served.client,
            context=start,
            operation="invoke",
            server="",
            call=ToolCall(id="m-2", name="echo", arguments={}),
        )


# --- ReAct: every stop reason --------------------------------------------------------------------


async def test_completed_after_a_tool_and_an_mcp_action(
    serve_worker: ServeWorker, tmp_path: Path, probe: McpServerConnection
) -> None:
    served = await serve_worker(Kit(tmp_path, probe).worker)
    result, model = await react(
        served.client,
        [
            act(
                ("r1", "read_text", {"path": "a.txt"}),
                ("e1", "echo", {"text": "hi", "server": "x"}),
            ),
            answer("alpha, hi"),
        ],
    )
    assert (result.status, result.stop_reason) == ("completed", "completed")
    assert [(o.source, o.status) for o in result.observations] == [
        ("read_text", "success"),
        ("probe:echo", "success"),
    ]
    fed_back = model.calls[1].messages[2:]
    assert [m.content for m in fed_back][0] == "alpha\n"
    assert result.result == Message(role="assistant", content="alpha, hi")


async def test_a_failed_result_is_fed_back(kit: tuple[Kit, ServedWorker]) -> None:
    outcomes, served = kit
    result, model = await react(
        served.client,
        [act(("a", "outcome", {"status": "failed"}), ("b", "outcome", {})), answer()],
    )
    assert result.stop_reason == "completed"
    assert [o.status for o in result.observations] == ["failed", "success"]
    assert model.calls[1].messages[2].content == "failed: OUTCOME: Outcome failed"


@pytest.mark.parametrize(
    ("arguments", "status", "kept"),
    [
        pytest.param({"status": "cancelled"}, "cancelled", ["b"], id="cancelled"),
        pytest.param({"status": "unknown"}, "unknown", ["a", "b"], id="unknown"),
        pytest.param({"seconds": 2}, "timeout", ["b"], id="tool-timeout"),
    ],
)
async def test_an_outcome_that_may_not_have_happened_is_a_failed_dependency(
    kit: tuple[Kit, ServedWorker],
    arguments: dict[str, Any],
    status: str,
    kept: list[str],
) -> None:
    outcomes, served = kit
    tool = "sleep" if "seconds" in arguments else "outcome"
    result, model = await react(
        served.client, [act(("a", tool, arguments), ("b", "outcome", {})), answer()]
    )
    assert (result.status, result.stop_reason) == ("partial", "dependency_failed")
    assert [o.status for o in result.observations] == [status]
    assert pending(result) == kept
    assert len(outcomes.outcome.calls) == (0 if tool == "sleep" else 1)
    assert len(model.calls) == 1


async def test_an_error_reply_stops_with_the_wire_code(
    kit: tuple[Kit, ServedWorker],
) -> None:
    outcomes, served = kit
    result, _ = await react(
        served.client,
        [act(("a", "outcome", {}), ("b", "hidden", {}), ("c", "outcome", {}))],
    )
    assert (result.status, result.stop_reason) == ("partial", "error")
    assert result.error is not None
    assert result.error.to_dict() == {
        "code": "PERMISSION_DENIED",
        "message": "Permission denied: tools:hidden",
    }
    assert pending(result) == ["b", "c"]
    assert len(outcomes.outcome.calls) == 1


async def test_no_reply_in_time_is_a_failed_dependency(
    kit: tuple[Kit, ServedWorker],
) -> None:
    _, served = kit
    impatient = InteractionClient(served.client.nc, prefix=served.prefix, timeout=0.1)
    async with impatient:
        result, _ = await react(impatient, [act(("a", "sleep", {"seconds": 0.25}))])
    assert (result.status, result.stop_reason) == ("partial", "dependency_failed")
    assert result.error is not None
    assert result.error.code == "NO_REPLY"
    assert result.error.message == f"no reply on {served.prefix}.tool.call within 0.1 s"
    assert pending(result) == ["a"]


async def test_invalid_model_output_runs_nothing(kit: tuple[Kit, ServedWorker]) -> None:
    outcomes, served = kit
    result, _ = await react(
        served.client, [act(("a", "outcome", {}), ("b", "delete_everything", {}))]
    )
    assert (result.status, result.stop_reason) == ("failed", "error")
    assert result.error is not None and result.error.code == "UNDECLARED_ACTION"
    assert outcomes.outcome.calls == []


async def test_zero_action_calls_sends_nothing(kit: tuple[Kit, ServedWorker]) -> None:
    outcomes, served = kit
    result, _ = await react(
        served.client,
        [act(("a", "outcome", {}), ("b", "outcome", {}))],
        ReactConstraints(max_action_calls=0),
    )
    assert (result.status, result.stop_reason) == ("partial", "max_action_calls")
    assert outcomes.outcome.calls == []
    assert pending(result) == ["a", "b"]


async def test_a_batch_is_split_at_the_action_limit(
    kit: tuple[Kit, ServedWorker],
) -> None:
    outcomes, served = kit
    result, _ = await react(
        served.client,
        [act(("a", "outcome", {}), ("b", "outcome", {}), ("c", "outcome", {}))],
        ReactConstraints(max_action_calls=2),
    )
    assert result.stop_reason == "max_action_calls"
    assert len(outcomes.outcome.calls) == 2
    assert pending(result) == ["c"]


async def test_steps_run_out_with_an_observation_nobody_would_read(
    kit: tuple[Kit, ServedWorker],
) -> None:
    outcomes, served = kit
    result, _ = await react(
        served.client,
        [act(("a", "outcome", {"n": 1})), act(("b", "outcome", {"n": 2}))],
        ReactConstraints(max_steps=2),
    )
    assert (result.status, result.stop_reason) == ("partial", "max_steps")
    assert len(outcomes.outcome.calls) == 1  # b was not sent
    assert [o.message.content for o in result.observations] == ["done 1"]
    assert pending(result) == ["b"]


async def test_a_token_budget_crossed_stops_before_the_next_sample(
    kit: tuple[Kit, ServedWorker],
) -> None:
    outcomes, served = kit
    result, model = await react(
        served.client,
        [
            act(("a", "outcome", {}), tokens=60),
            act(("b", "outcome", {}), tokens=60),
            answer(tokens=10),
        ],
        ReactConstraints(max_total_tokens=100),
    )
    assert (result.status, result.stop_reason) == ("partial", "max_tokens")
    assert result.usage == Usage(118, 2, 120)
    assert len(outcomes.outcome.calls) == 1 and len(model.calls) == 2
    assert pending(result) == ["b"]


async def test_the_flow_timeout_with_an_action_in_flight(
    kit: tuple[Kit, ServedWorker],
) -> None:
    tools, served = kit
    result, _ = await react(
        served.client,
        [act(("a", "sleep", {"seconds": 0.25}), ("b", "outcome", {}))],
        ReactConstraints(timeout=20),
        timeout=0.2,
    )
    # The call was sent before the flow gave up: it runs (on a loaded machine it may arrive late).
    with anyio.fail_after(10):
        await tools.sleep.started.wait()
    assert (result.status, result.stop_reason) == ("partial", "timeout")
    assert result.observations == ()
    assert pending(result) == ["a", "b"]  # a's outcome is not known
    assert tools.outcome.calls == []


async def test_a_cancel_event_stops_the_flow_with_an_action_in_flight(
    kit: tuple[Kit, ServedWorker],
) -> None:
    tools, served = kit
    cancel = asyncio.Event()

    async def cancel_once_started() -> None:
        await tools.sleep.started.wait()
        cancel.set()

    async with anyio.create_task_group() as group:
        group.start_soon(cancel_once_started)
        result, _ = await react(
            served.client, [act(("a", "sleep", {"seconds": 0.25}))], cancel=cancel
        )
    assert (result.status, result.stop_reason) == ("partial", "cancelled")
    assert pending(result) == ["a"]


# --- examples/react_agent.py ---------------------------------------------------------------------


async def test_the_react_agent_example_reads_two_files_and_answers(
    serve_worker: ServeWorker, tmp_path: Path
) -> None:
    (tmp_path / "README.md").write_text("# demo\n\nA demo project.\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo-project"\n')
    reader = InteractionWorker(
        tools=[ReadTextTool()],
        sandbox=Sandbox(tools=["read_text"], read=True, workspace=tmp_path),
    )
    served = await serve_worker(reader)
    command = [
        sys.executable,
        str(REPO / "examples" / "react_agent.py"),
        "--nats-url",
        served.nats_url,
        "--prefix",
        served.prefix,
    ]
    with anyio.fail_after(30):
        done = await anyio.run_process(command, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr.decode()
    lines = [json.loads(line) for line in done.stdout.decode().splitlines()]
    first, readme, pyproject, second, result = lines
    assert [r["arguments"]["path"] for r in first["sample"]["actionRequests"]] == [
        "README.md",
        "pyproject.toml",
    ]
    assert readme["observation"]["message"]["content"] == "# demo\n\nA demo project.\n"
    assert pyproject["observation"]["status"] == "success"
    text = "This is demo-project; its README begins with '# demo'."
    assert second["sample"]["message"]["content"] == text
    assert (result["status"], result["stopReason"]) == ("completed", "completed")
    assert result["usage"] == {
        "inputTokens": 130,
        "outputTokens": 32,
        "totalTokens": 162,
    }
