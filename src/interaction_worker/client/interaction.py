"""`InteractionClient`: the client side of the wire (docs/flows.md 1), over a connected nats-py client.

Each request is a typed body on its subject and a typed answer; where its reply comes and which
message is that reply is the `ReplyInbox`'s (`inbox`). The observation of a call's result is computed
here, as the worker computes its event, not read from the public event subject.
"""

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, Self

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import ConnectionClosedError

from ..config import defaults
from ..contracts import (
    ExternalResult,
    McpDiscoverOutput,
    McpInvokeOutput,
    Observation,
    OutputReceipt,
    OutputRequest,
    ToolCall,
    ToolDefinition,
    ToolList,
)
from ..contracts.wire import COMMAND_ID_HEADER, SERVICE_ERROR_HEADER, WIRE
from ..nodes import EVENT_HEADERS_ROOM, observation_json
from .inbox import ReplyInbox
from .replies import matcher, matcher_of_bytes
from .target import connect as connect_target
from .target import find_project, resolve_target

DEFAULT_TIMEOUT = 75.0
DEFAULT_INBOX_PREFIX = "_INBOX"


class InteractionRequestError(Exception):
    """The worker refused the request: its error reply (wire.md 4). A rejected command also has the
    protocol's `reason` (`UNKNOWN_FIELD`, ...) and the `path` it points at (docs/commands.md)."""

    def __init__(
        self,
        code: str,
        message: str,
        status: int,
        *,
        reason: str | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.reason = reason
        self.path = path


class ToolOutcome(NamedTuple):
    """A tool call's or MCP invoke's result, and its observation as the worker publishes it (the
    OBSERVE node's, shortened as the event is when it would not fit: docs/wire.md 1)."""

    result: ExternalResult
    observation: Observation


class InteractionClient:
    """Requests to a serving worker, and their events.

    Args:
        nc: a connected nats-py client; `InteractionClient.connect` makes one and closes it after.
        prefix: the worker's subject prefix.
        timeout: seconds to wait for a reply.
        inbox_prefix: where replies come (`nats.inbox_prefix`); must be under the worker's
            `subjects.reply_prefixes`.
    """

    def __init__(
        self,
        nc: Client,
        *,
        prefix: str = defaults.PREFIX,
        timeout: float = DEFAULT_TIMEOUT,
        inbox_prefix: str = DEFAULT_INBOX_PREFIX,
    ) -> None:
        self.nc = nc
        self.prefix = prefix
        self.timeout = timeout
        self._replies = ReplyInbox(nc, inbox_prefix)
        self._owns_connection = False

    @classmethod
    async def connect(
        cls,
        url: str | None = None,
        config: Path | None = None,
        *,
        data_dir: Path | None = None,
        prefix: str | None = None,
        # The client's per-request bound, kept for its requests: not a bound of this call.
        timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109
        env: Mapping[str, str] | None = None,
        name: str = "interaction-client",
    ) -> Self:
        """Find the worker's server as the command line does (docs/cli.md, "Finding the worker") and
        connect.

        Raises:
            ConnectError: the server cannot be reached (one line saying what was tried).
            ConfigurationError: the configuration file is invalid.
        """
        env = os.environ if env is None else env
        project = find_project(config, env=env, data_dir=data_dir)
        target = resolve_target(project, env, nats_url=url, prefix=prefix)
        made: list[InteractionClient] = []

        async def disconnected() -> None:
            # The connection does not reconnect (`connect_target`): nothing waited for can arrive.
            for client in made:
                client.connection_lost()

        nc = await connect_target(target, name=name, disconnected_cb=disconnected)
        client = cls(
            nc,
            prefix=target.prefix,
            timeout=timeout,
            inbox_prefix=project.settings.nats.inbox_prefix,
        )
        client._owns_connection = True
        made.append(client)
        return client

    def connection_lost(self) -> None:
        """End every request waiting for an answer with `ConnectionLost`, and refuse new ones.

        A client made by `connect` calls it itself when its connection goes; on a connection of
        your own, call it from the connection's `disconnected_cb` (or `closed_cb` when it
        reconnects), or a request waits out its `timeout` for a reply that cannot come."""
        self._replies.connection_lost(self.prefix)

    async def close(self) -> None:
        """Stop listening for replies; a connection made by `connect` is closed too."""
        await self._replies.close()
        # A connection that is closing refuses this too: there is nothing left to undo then.
        with contextlib.suppress(ConnectionClosedError):
            if self._owns_connection and not self.nc.is_closed:
                await self.nc.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- the requests ---------------------------------------------------------------------------

    async def call_tool(
        self,
        call_or_name: ToolCall | str,
        arguments: Mapping[str, Any] | None = None,
        /,
        *,
        call_id: str | None = None,
        **more_arguments: Any,
    ) -> ToolOutcome:
        """One tool call: `call_tool("read_text", path="README.md")`, or a `ToolCall`."""
        call = _tool_call(call_or_name, arguments, call_id, more_arguments)
        reply = await self._ask(WIRE["tool"].request, {"call": call})
        return self._outcome(
            ExternalResult.model_validate_json(reply.data), json.loads(reply.data)
        )

    async def mcp_invoke(
        self,
        server: str,
        call_or_name: ToolCall | str,
        arguments: Mapping[str, Any] | None = None,
        /,
        *,
        call_id: str | None = None,
        **more_arguments: Any,
    ) -> ToolOutcome:
        """One call of an MCP server's tool, through the worker."""
        call = _tool_call(call_or_name, arguments, call_id, more_arguments)
        body = {"operation": "invoke", "server": server, "call": call}
        reply = await self._ask(WIRE["mcp"].request, body)
        return self._outcome(
            McpInvokeOutput.model_validate_json(reply.data).result,
            json.loads(reply.data)["result"],
        )

    def _outcome(self, result: ExternalResult, document: Any) -> ToolOutcome:
        """The result and its observation: the body of the worker's observation event on this
        server, computed from the result's document as the reply carried it."""
        room = self.nc.max_payload - EVENT_HEADERS_ROOM
        observed = observation_json(document, room)
        return ToolOutcome(result, Observation.model_validate_json(observed))

    async def mcp_discover(self, server: str | None = None) -> McpDiscoverOutput:
        body: dict[str, Any] = {"operation": "discover"}
        if server is not None:
            body["server"] = server
        reply = await self._ask(WIRE["mcp"].request, body)
        return McpDiscoverOutput.model_validate_json(reply.data)

    async def observe(self, result: ExternalResult | Mapping[str, Any]) -> Observation:
        document = (
            result.to_wire() if isinstance(result, ExternalResult) else dict(result)
        )
        reply = await self._ask(WIRE["observe"].request, {"result": document})
        return Observation.model_validate_json(reply.data)

    async def deliver(
        self, request: OutputRequest | Mapping[str, Any]
    ) -> OutputReceipt:
        body = (
            request.to_wire() if isinstance(request, OutputRequest) else dict(request)
        )
        reply = await self._ask(WIRE["output"].request, body)
        return OutputReceipt.model_validate_json(reply.data)

    async def list_tools(self, name: str | None = None) -> list[ToolDefinition]:
        """The tools the worker serves and its sandbox grants; with `name`, that one."""
        reply = await self._ask(
            WIRE["list"].request, {} if name is None else {"name": name}
        )
        return ToolList.model_validate_json(reply.data).tools

    async def command(
        self, value: Mapping[str, Any], *, command_id: str | None = None
    ) -> dict[str, Any]:
        """One command of the worker's command protocol: `{"id", "result"}` (docs/commands.md).

        `command_id` is sent as `Interaction-Command-Id`: it keys the dead letter of a rejected
        command and the `P.command.done.<id>.<K>` event (without it the worker makes one up).
        A rejection raises `InteractionRequestError` with `.reason` and `.path`."""
        headers = {COMMAND_ID_HEADER: command_id} if command_id is not None else None
        reply = await self._ask(WIRE["command"].request, value, headers)
        answer: dict[str, Any] = json.loads(reply.data)
        return answer

    async def command_catalog(self) -> dict[str, Any]:
        """The command protocol the worker serves: `{"commandField", "commands", "modelJsonSchema"}`."""
        reply = await self._ask(WIRE["catalog"].request, {})
        catalog: dict[str, Any] = json.loads(reply.data)
        return catalog

    # --- the wire -------------------------------------------------------------------------------

    async def _ask(
        self,
        subject: str,
        body: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
    ) -> Msg:
        try:
            async with asyncio.timeout(self.timeout):
                return await self._request(subject, body, headers)
        except TimeoutError:
            raise self._timeout(subject) from None

    def _timeout(self, subject: str) -> TimeoutError:
        return TimeoutError(
            f"no reply on {self.prefix}.{subject} within {self.timeout:g} s"
        )

    async def _request(
        self,
        subject: str,
        body: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
    ) -> Msg:
        reply = await self._replies.send(
            self.prefix,
            subject,
            json.dumps(body, ensure_ascii=False).encode(),
            headers,
            matcher(subject, body),
        )
        if SERVICE_ERROR_HEADER in (reply.headers or {}):
            raise _request_error(reply)
        return reply

    async def send(
        self, subject: str, data: bytes, headers: Mapping[str, str] | None = None
    ) -> Msg:
        """One request as bytes on `P.<subject>`, and its reply as it came, error replies included
        (their `Nats-Service-Error` header tells them apart): for tools that resend recorded traffic.

        `Interaction-Reply-To` is this client's inbox whatever `headers` say, and only the answer to
        this request is taken from it (`replies`). Not bounded by `timeout`: the caller bounds the
        wait.

        Raises:
            NoWorkerError: no worker serves the subject.
        """
        return await self._replies.send(
            self.prefix, subject, data, headers, matcher_of_bytes(subject, data)
        )


def _tool_call(
    call_or_name: ToolCall | str,
    arguments: Mapping[str, Any] | None,
    call_id: str | None,
    more_arguments: Mapping[str, Any],
) -> dict[str, Any]:
    if isinstance(call_or_name, ToolCall):
        if arguments is not None or call_id is not None or more_arguments:
            raise TypeError("a ToolCall carries its own id and arguments")
        return call_or_name.to_wire()
    return {
        "id": str(uuid.uuid4()) if call_id is None else call_id,
        "name": call_or_name,
        "arguments": {**(arguments or {}), **more_arguments},
    }


def _request_error(reply: Msg) -> InteractionRequestError:
    headers = reply.headers or {}
    reason = path = None
    try:
        error = json.loads(reply.data)["error"]
        code, message = str(error["code"]), str(error["message"])
        if isinstance(error.get("reason"), str):
            reason = error["reason"]
        if isinstance(error.get("path"), str):
            path = error["path"]
    except (ValueError, KeyError, TypeError, AttributeError):
        code, message = "UNKNOWN", headers.get(SERVICE_ERROR_HEADER, "")
    try:
        status = int(headers.get("Nats-Service-Error-Code", "0"))
    except ValueError:
        status = 0
    return InteractionRequestError(code, message, status, reason=reason, path=path)
