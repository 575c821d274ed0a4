"""`OpenAICompatibleModel` against `httpx.MockTransport` (the request it sends, the key, the
conversion of messages) and against a chat-completions server of this module served by uvicorn on
127.0.0.1 (tool calls, an answer, 4xx/5xx, a malformed body, no answer in time); then a whole ReAct
flow with it against a served worker, and `interaction-worker react` as a user runs it."""

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import uvicorn

from interaction_worker import Message
from interaction_worker.cli import main
from interaction_worker.flows import (
    ActionDescriptor,
    ActionRequest,
    ModelError,
    OpenAICompatibleModel,
    ReactConstraints,
    ReactFlowInput,
    Usage,
    run_react_flow,
)
from interaction_worker.testing.served import ServeWorker

KEY = "sk-test-0123456789abcdef"
READ = ActionDescriptor(
    name="read_text",
    description="Read a workspace text file",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
)
QUESTION = Message(role="user", content="What is in a.txt?")


def completion(
    content: str | None = None,
    calls: list[dict[str, Any]] | None = None,
    *,
    usage: dict[str, Any] | None = None,
    finish: str = "stop",
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls is not None:
        message["tool_calls"] = calls
    document: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if usage is not None:
        document["usage"] = usage
    return document


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


USAGE = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}


# --- the chat-completions server -----------------------------------------------------------------


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    hold: bool = False  # answer only when the test ends


@dataclass
class ChatServer:
    """`POST /v1/chat/completions` answered from a script, one answer per request; it records each
    request's body and headers."""

    answers: list[Answer] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def script(self, *answers: dict[str, Any] | Answer) -> None:
        self.answers.extend(
            a if isinstance(a, Answer) else Answer(body=json.dumps(a).encode())
            for a in answers
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        if scope["path"] != "/v1/chat/completions" or scope["method"] != "POST":
            answer = Answer(404, b'{"error": "no such route"}')
        else:
            self.bodies.append(json.loads(body))
            answer = self.answers.pop(0)
        if answer.hold:
            await self.released.wait()
        await send(
            {
                "type": "http.response.start",
                "status": answer.status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": answer.body})


class _Server(uvicorn.Server):
    """uvicorn in the test's loop: no signal handlers of its own, an event once it listens, and
    told to stop rather than looking every 0.1 s."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()
        self.stopping = asyncio.Event()

    async def main_loop(self) -> None:
        await self.stopping.wait()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        self.listening.set()


@pytest.fixture
async def chat() -> AsyncIterator[tuple[ChatServer, str]]:
    """The server and its base URL, `http://127.0.0.1:PORT/v1`."""
    app = ChatServer()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_config=None, lifespan="off", access_log=False
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve())
    try:
        with anyio.fail_after(10):
            await server.listening.wait()
        port = server.servers[0].sockets[0].getsockname()[1]
        yield app, f"http://127.0.0.1:{port}/v1"
    finally:
        app.released.set()
        server.should_exit = True
        server.stopping.set()
        with anyio.fail_after(10):
            await task


async def sample(provider: OpenAICompatibleModel, /, **generation: Any) -> Any:
    return await provider.sample([QUESTION], [READ], generation, {"run": "r"})


# --- against the local server ----------------------------------------------------------------------


async def test_tool_calls_become_action_requests_with_usage(
    chat: tuple[ChatServer, str],
) -> None:
    server, url = chat
    calls = [
        tool_call("call_1", "read_text", '{"path": "a.txt"}'),
        tool_call("call_2", "read_text", ""),
    ]
    server.script(completion(None, calls, usage=USAGE, finish="tool_calls"))
    async with OpenAICompatibleModel(url, "m", api_key=KEY) as model:
        output = await sample(model, temperature=0, model="ignored")

    assert output.action_requests == (
        ActionRequest("call_1", "read_text", {"path": "a.txt"}),
        ActionRequest("call_2", "read_text", {}),
    )
    assert output.usage == Usage(12, 3, 15)
    assert output.stop_reason == "tool_calls"
    # The server's own tool_calls stay on the message, to be sent back as they came.
    assert (output.message.model_extra or {})["toolCalls"] == calls
    [body] = server.bodies
    assert body["model"] == "m" and body["temperature"] == 0
    assert body["messages"] == [{"role": "user", "content": "What is in a.txt?"}]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_text",
                "parameters": dict(READ.input_schema),
                "description": "Read a workspace text file",
            },
        }
    ]
    assert "run" not in body and "metadata" not in body
    assert server.headers[0]["authorization"] == f"Bearer {KEY}"


async def test_an_answer_without_tool_calls_has_no_requests(
    chat: tuple[ChatServer, str],
) -> None:
    server, url = chat
    server.script(completion("It says hello."))
    async with OpenAICompatibleModel(url, "m", env={}) as model:
        output = await sample(model)
    assert output.action_requests == ()
    assert output.message == Message(role="assistant", content="It says hello.")
    assert output.usage is None
    assert "authorization" not in server.headers[0]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        pytest.param(
            Answer(401, f'{{"error": "bad key {KEY}"}}'.encode()),
            "the model server answered HTTP 401 (check INTERACTION_MODEL_API_KEY)",
            id="401",
        ),
        pytest.param(
            Answer(404, b'{"error": "no model m"}'),
            "the model server answered HTTP 404 (check the base URL and the model name)",
            id="404",
        ),
        pytest.param(
            Answer(400, b'{"error": "context too long"}'),
            "the model server answered HTTP 400",
            id="400",
        ),
        pytest.param(
            Answer(500, b"Traceback ... /srv/app.py"),
            "the model server answered HTTP 500",
            id="500",
        ),
        pytest.param(Answer(503, b""), "the model server answered HTTP 503", id="503"),
        pytest.param(
            Answer(200, b"<html>not json</html>"),
            "the model server's answer is not JSON",
            id="not-json",
        ),
        pytest.param(
            Answer(200, b'{"choices": []}'),
            "the model server's answer is not a chat completion",
            id="no-choice",
        ),
        pytest.param(
            Answer(200, b'{"choices": [{"message": {"content": 5}}]}'),
            "the model server's answer is not a chat completion",
            id="content-number",
        ),
        pytest.param(
            Answer(
                200, b'{"choices": [{"message": {"tool_calls": [{"function": {}}]}}]}'
            ),
            "the model server's answer is not a chat completion",
            id="call-without-name",
        ),
    ],
)
async def test_errors_and_malformed_answers_are_model_errors_that_leak_nothing(
    chat: tuple[ChatServer, str], answer: Answer, message: str
) -> None:
    server, url = chat
    server.script(answer)
    async with OpenAICompatibleModel(url, "m", api_key=KEY) as model:
        with pytest.raises(ModelError) as raised:
            await sample(model)
    assert str(raised.value) == message
    assert KEY not in repr(model) and url not in str(raised.value)


async def test_no_answer_in_time_is_a_model_error(chat: tuple[ChatServer, str]) -> None:
    server, url = chat
    server.script(Answer(hold=True))
    async with OpenAICompatibleModel(url, "m", timeout=0.2) as model:
        with pytest.raises(
            ModelError, match="^the model server did not answer in time$"
        ):
            await sample(model)


async def test_a_server_that_is_not_there_is_a_model_error() -> None:
    model = OpenAICompatibleModel("http://127.0.0.1:1/v1", "m")
    with pytest.raises(
        ModelError, match=r"^cannot reach the model server \(ConnectError\)$"
    ):
        await sample(model)
    await model.aclose()


# --- against httpx.MockTransport -----------------------------------------------------------------


def mock_client(
    seen: list[httpx.Request], document: dict[str, Any]
) -> httpx.AsyncClient:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=document)

    return httpx.AsyncClient(transport=httpx.MockTransport(handle))


async def test_the_key_comes_from_the_environment_and_is_never_shown() -> None:
    seen: list[httpx.Request] = []
    async with mock_client(seen, completion("ok")) as client:
        model = OpenAICompatibleModel(
            "https://api.example/v1/",
            "m",
            client=client,
            env={"INTERACTION_MODEL_API_KEY": KEY},
        )
        await sample(model)
        await model.aclose()  # the client is the caller's: still open
        assert not client.is_closed
    assert str(seen[0].url) == "https://api.example/v1/chat/completions"
    assert seen[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(model) and KEY not in str(vars(model).get("model"))
    assert repr(model) == "OpenAICompatibleModel(model='m')"


async def test_the_conversation_is_sent_back_in_the_chat_completions_shape() -> None:
    seen: list[httpx.Request] = []
    calls = [tool_call("call_9", "read_text", '{"path":"a.txt"}')]
    assistant = Message.model_validate(
        {"role": "assistant", "content": None, "toolCalls": calls}
    )
    tool = Message.model_validate(
        {
            "role": "tool",
            "name": "read_text",
            "toolCallId": "call_9",
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "json", "data": {"n": 1}},
                {"type": "reference", "reference": {"uri": "file:///a.txt"}},
            ],
        }
    )
    system = Message(role="system", content={"rules": ["be brief"]})
    async with mock_client(seen, completion("ok")) as client:
        model = OpenAICompatibleModel("http://h/v1", "m", client=client, env={})
        await model.sample([system, QUESTION, assistant, tool], [], {"tools": "x"}, {})
    body = json.loads(seen[0].content)
    assert body["messages"] == [
        {"role": "system", "content": '{"rules": ["be brief"]}'},
        {"role": "user", "content": "What is in a.txt?"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {
            "role": "tool",
            "content": 'hello\n{"n": 1}\nfile:///a.txt',
            "tool_call_id": "call_9",
        },
    ]
    assert "tools" not in body  # no actions: no tools, whatever `generation` says


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param('{"path": "a"}', {"path": "a"}, id="object"),
        pytest.param("", {}, id="empty"),
        pytest.param("[1, 2]", [1, 2], id="array"),
        pytest.param("{not json", "{not json", id="not-json"),
    ],
)
async def test_arguments_are_parsed_and_what_is_not_an_object_is_left_to_the_flow(
    arguments: str, expected: Any
) -> None:
    seen: list[httpx.Request] = []
    document = completion(None, [tool_call("c", "read_text", arguments)])
    async with mock_client(seen, document) as client:
        model = OpenAICompatibleModel("http://h/v1", "m", client=client, env={})
        output = await sample(model)
    assert output.action_requests[0].arguments == expected


async def test_a_call_without_an_id_gets_one_on_the_request_and_on_the_message() -> (
    None
):
    seen: list[httpx.Request] = []
    call = {"type": "function", "function": {"name": "read_text", "arguments": "{}"}}
    async with mock_client(seen, completion(None, [call])) as client:
        model = OpenAICompatibleModel("http://h/v1", "m", client=client, env={})
        output = await sample(model)
    [request] = output.action_requests
    assert request.id.startswith("call_")
    assert (output.message.model_extra or {})["toolCalls"][0]["id"] == request.id


@pytest.mark.parametrize("url", ["ftp://h/v1", "h/v1", "http:///v1", ""])
def test_a_base_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="base_url must be an http or https URL"):
        OpenAICompatibleModel(url, "m")


# --- a whole flow, and the command line ----------------------------------------------------------


async def test_a_react_flow_with_the_model_reads_through_the_worker(
    chat: tuple[ChatServer, str], serve_worker: ServeWorker, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("hello from a\n")
    served = await serve_worker(workspace=tmp_path)
    server, url = chat
    server.script(
        completion(
            None, [tool_call("call_1", "read_text", '{"path": "a.txt"}')], usage=USAGE
        ),
        completion("a.txt says hello.", usage=USAGE),
    )
    async with OpenAICompatibleModel(url, "m", env={}) as model:
        result = await run_react_flow(
            served.client,
            model,
            ReactFlowInput(
                messages=[QUESTION],
                actions=[READ],
                constraints=ReactConstraints(max_total_tokens=100, timeout=20),
            ),
        )
    assert (result.status, result.stop_reason) == ("completed", "completed")
    assert result.result == Message(role="assistant", content="a.txt says hello.")
    assert result.usage == Usage(24, 6, 30)
    second = server.bodies[1]["messages"]
    assert second[1]["tool_calls"][0]["id"] == "call_1"
    assert second[2] == {
        "role": "tool",
        "content": "hello from a\n",
        "tool_call_id": "call_1",
    }


def cli_env(**more: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("INTERACTION_", "NATS_"))
    }
    return {**env, **more}


async def react_cli(
    cwd: Path, *args: str, env: dict[str, str]
) -> tuple[int, list[Any], str]:
    command = [sys.executable, "-m", "interaction_worker.cli", "react", *args]
    command += ["--config", os.devnull]  # never a worker.yaml found upwards
    with anyio.fail_after(30):
        done = await anyio.run_process(command, cwd=cwd, env=env, check=False)
    lines = [json.loads(line) for line in done.stdout.decode().splitlines()]
    return done.returncode, lines, done.stderr.decode()


async def test_the_react_command_prints_each_step_then_the_result(
    chat: tuple[ChatServer, str], serve_worker: ServeWorker, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("hello from a\n")
    served = await serve_worker(workspace=tmp_path)
    server, url = chat
    server.script(
        completion(None, [tool_call("call_1", "read_text", '{"path": "a.txt"}')]),
        completion("a.txt says hello."),
    )
    where = [
        "--nats-url",
        served.nats_url,
        "--prefix",
        served.prefix,
        "--timeout",
        "20",
    ]
    code, lines, err = await react_cli(
        tmp_path,
        "What is in a.txt?",
        "--model",
        "m",
        "--action",
        "read_text",
        *where,
        env=cli_env(INTERACTION_MODEL_URL=url, INTERACTION_MODEL_API_KEY=KEY),
    )
    assert code == 0, err
    first, action, second, result = lines
    assert first["sample"]["actionRequests"] == [
        {"id": "call_1", "name": "read_text", "arguments": {"path": "a.txt"}}
    ]
    assert action["action"]["id"] == "call_1"
    assert action["observation"]["message"]["content"] == "hello from a\n"
    assert second["sample"]["message"]["content"] == "a.txt says hello."
    assert (result["status"], result["stopReason"]) == ("completed", "completed")
    assert [t["function"]["name"] for t in server.bodies[0]["tools"]] == ["read_text"]
    assert server.headers[0]["authorization"] == f"Bearer {KEY}"
    assert KEY not in err and KEY not in json.dumps(lines)


async def test_the_react_command_offers_every_tool_and_exits_1_unless_completed(
    chat: tuple[ChatServer, str], serve_worker: ServeWorker, tmp_path: Path
) -> None:
    served = await serve_worker(workspace=tmp_path)
    server, url = chat
    server.script(Answer(500, b"{}"))
    where = ["--nats-url", served.nats_url, "--prefix", served.prefix]
    code, lines, err = await react_cli(
        tmp_path, "Hi", "--model", "m", "--model-url", url, *where, env=cli_env()
    )
    assert code == 1, err
    [result] = lines
    assert (result["status"], result["stopReason"]) == ("failed", "error")
    assert result["error"] == {
        "code": "MODEL_ERROR",
        "message": "the model server answered HTTP 500",
    }
    offered = {t["function"]["name"] for t in server.bodies[0]["tools"]}
    assert {"read_text", "grep", "cat"} <= offered


def test_the_react_command_without_a_model_url_names_the_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INTERACTION_MODEL_URL", raising=False)
    assert main(["react", "Hi", "--model", "m"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "interaction-worker: react needs a model server: set INTERACTION_MODEL_URL "
        "or give --model-url URL"
    ]
