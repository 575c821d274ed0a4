"""`OpenAICompatibleModel`: SAMPLE through a chat-completions endpoint, over httpx.

Any server that speaks `POST {base_url}/chat/completions` with `tools` and answers `tool_calls`
works: hosted APIs, vLLM, llama.cpp's server, Ollama. The key comes from the constructor or from
`INTERACTION_MODEL_API_KEY`, goes only into the `Authorization` header, and is never shown: not in
`repr`, not in an error. Errors are `ModelError`s that name the failure (a status code, a timeout,
an unreadable answer) and never the URL, the key or the body, which may echo either.
"""

import json
import os
import uuid
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

import httpx

from ..contracts import Message
from .actions import ACTION_NAME, ActionDescriptor, ActionRequest
from .model_provider import ModelError, SampleOutput, Usage

API_KEY_VARIABLE = "INTERACTION_MODEL_API_KEY"
DEFAULT_TIMEOUT = 60.0
_HINTS = {
    401: " (check INTERACTION_MODEL_API_KEY)",
    403: " (check INTERACTION_MODEL_API_KEY)",
    404: " (check the base URL and the model name)",
    429: " (rate limited)",
}
_UNREADABLE = "the model server's answer is not a chat completion"


class OpenAICompatibleModel:
    """A `ModelProvider` over an OpenAI-compatible chat-completions API.

    Args:
        base_url: the API's root, such as `http://127.0.0.1:8080/v1`; requests go to
            `{base_url}/chat/completions`.
        model: the `model` of every request.
        api_key: sent as `Authorization: Bearer …`; default `INTERACTION_MODEL_API_KEY` from `env`
            (the process's environment), and no header when neither is set.
        client: the httpx client to send with (its own timeout applies); default one of the
            model's own, closed by `aclose()`.
        timeout: seconds for one request with the model's own client.

    `generation` keys (temperature, max_tokens, …) are sent in each request's body; `model`,
    `messages` and `tools` are the model's own and win. `metadata` is not sent.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        env: Mapping[str, str] | None = None,
    ) -> None:
        parts = urlsplit(base_url) if isinstance(base_url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be an http or https URL")
        if not isinstance(model, str) or not model:
            raise ValueError("model must be a non-empty string")
        self.model = model
        self._url = base_url.rstrip("/") + "/chat/completions"
        environment = os.environ if env is None else env
        self._key = (
            api_key if api_key is not None else environment.get(API_KEY_VARIABLE)
        )
        self._client = client
        self._owns_client = client is None
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"OpenAICompatibleModel(model={self.model!r})"

    async def aclose(self) -> None:
        """Close the model's own client (a client given to it is the caller's to close)."""
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def sample(
        self,
        messages: Sequence[Message],
        actions: Sequence[ActionDescriptor],
        generation: Mapping[str, Any],
        metadata: Mapping[str, Any],
    ) -> SampleOutput:
        body: dict[str, Any] = {
            **generation,
            "model": self.model,
            "messages": [chat_message(message) for message in messages],
        }
        body.pop("tools", None)
        if actions:
            body["tools"] = [chat_tool(action) for action in actions]
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout)
        try:
            response = await self._client.post(self._url, json=body, headers=headers)
        except httpx.TimeoutException:
            raise ModelError("the model server did not answer in time") from None
        except httpx.HTTPError as error:
            raise ModelError(
                f"cannot reach the model server ({type(error).__name__})"
            ) from None
        if not response.is_success:
            hint = _HINTS.get(response.status_code, "")
            raise ModelError(
                f"the model server answered HTTP {response.status_code}{hint}"
            )
        try:
            document = response.json()
        except ValueError:
            raise ModelError("the model server's answer is not JSON") from None
        return sample_output(document)


def chat_tool(action: ActionDescriptor) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": action.name,
        "parameters": dict(action.input_schema),
    }
    if action.description:
        function["description"] = action.description
    return {"type": "function", "function": function}


def chat_message(message: Message) -> dict[str, Any]:
    """A `Message` as chat completions take it: text content; an assistant's `toolCalls` (the
    server's own `tool_calls`, kept as it sent them) and a tool message's `toolCallId`."""
    extra = message.model_extra or {}
    tool_calls = extra.get("toolCalls") if message.role == "assistant" else None
    document: dict[str, Any] = {"role": message.role}
    if tool_calls and message.content is None:
        document["content"] = None
    else:
        document["content"] = text_of(message.content)
    if tool_calls:
        document["tool_calls"] = tool_calls
    if message.role == "tool":
        if isinstance(extra.get("toolCallId"), str):
            document["tool_call_id"] = extra["toolCallId"]
    elif isinstance(message.name, str) and ACTION_NAME.fullmatch(message.name):
        document["name"] = message.name
    return document


def text_of(content: Any) -> str:
    """Message content as text: parts joined by lines (JSON as JSON, a reference as its URI)."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        return "\n".join(_part_text(part) for part in content)
    return json.dumps(content, ensure_ascii=False)


def _part_text(part: Any) -> str:
    if isinstance(part, dict):
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            return str(part["text"])
        if kind == "json":
            return json.dumps(part.get("data"), ensure_ascii=False)
        reference = part.get("reference")
        if kind == "reference" and isinstance(reference, dict):
            return str(reference.get("uri", ""))
    return json.dumps(part, ensure_ascii=False)


def sample_output(document: Any) -> SampleOutput:
    """A chat completion's first choice as a `SampleOutput`.

    Raises:
        ModelError: the document is not a chat completion.
    """
    try:
        choice = document["choices"][0]
        answer = choice["message"]
        content = answer.get("content")
        raw_calls = answer.get("tool_calls") or []
        if not isinstance(content, str | None) or not isinstance(raw_calls, list):
            raise TypeError
        calls = [dict(call) for call in raw_calls]
        requests = tuple(_request(call) for call in calls)
        stop_reason = choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        raise ModelError(_UNREADABLE) from None
    fields: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        fields["toolCalls"] = calls
    return SampleOutput(
        message=Message.model_validate(fields),
        action_requests=requests,
        usage=_usage(document.get("usage")),
        stop_reason=stop_reason if isinstance(stop_reason, str) else None,
    )


def _request(call: dict[str, Any]) -> ActionRequest:
    """One `tool_calls` entry. A missing id gets a fresh one, written into the entry too, so the
    tool message that answers it pairs with it when the conversation is sent back."""
    function = call["function"]
    name = function["name"]
    if not isinstance(name, str):
        raise TypeError
    if not isinstance(call.get("id"), str) or not call["id"]:
        call["id"] = f"call_{uuid.uuid4().hex}"
    raw = function.get("arguments")
    arguments: Any = raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        arguments = {}  # servers send "" for a call without arguments
    elif isinstance(raw, str):
        try:
            arguments = json.loads(raw)
        except ValueError:
            arguments = raw  # left to the flow: not a JSON object
    return ActionRequest(id=call["id"], name=name, arguments=arguments)


def _usage(value: Any) -> Usage | None:
    if not isinstance(value, dict):
        return None
    prompt = _count(value.get("prompt_tokens"))
    completion = _count(value.get("completion_tokens"))
    if prompt is None or completion is None:
        return None
    total = _count(value.get("total_tokens"))
    return Usage(prompt, completion, prompt + completion if total is None else total)


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
