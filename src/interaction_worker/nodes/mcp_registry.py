"""The MCP registry: INTERACTION.ACT.MCP without a bus (reference section 4).

Discovery pages through each server with a budget of pages and capabilities shared by every server
of one request; invoke maps the server's answer (and the client's failures) to an ExternalResult.

A discover of all servers goes on without an optional server (a client whose `required` attribute is
False, as an `McpServerConnection` configured `required: false`) that does not answer: down, timed
out, refusing the worker's credentials (McpDenied), answering with an error or with a malformed page. It names it in the reply's `unavailable`
instead of failing (wire.md section 2); a required server, or a server discovered by name, still fails
the request.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..contracts import (
    ContractError,
    InteractionError,
    McpCapability,
    McpDiscoverInput,
    McpDiscoverOutput,
    McpInvokeInput,
    McpInvokeOutput,
    identifier,
    nonempty,
)
from ..contracts import validation as check
from ..errors import (
    ConfigurationError,
    InteractionWorkerError,
    InvalidInput,
    InvalidResult,
    McpConnectionLost,
    McpDenied,
    McpProtocolError,
    McpTimeout,
    McpUnauthorized,
    McpUnavailable,
    NotFound,
    RegistrationError,
    Timeout,
    Unavailable,
)
from ._callables import is_coroutine_function
from .mcp_answers import answer_fields, capability, result_of, tool_page
from .sandbox import Sandbox
from .side_effects import side_effect_starts

DEFAULT_MAX_DISCOVERY_PAGES = 100
DEFAULT_MAX_CAPABILITIES = 1000
_MAX_SAFE_INTEGER = 2**53 - 1

MCP_TOOL_ERROR = InteractionError.trusted(
    code="MCP_TOOL_ERROR", message="MCP tool reported an execution error"
)


@runtime_checkable
class McpClient(Protocol):
    """A connection to one MCP server. Failures are raised as McpUnavailable (nothing sent),
    McpTimeout, McpConnectionLost (the request may have been received) or McpProtocolError.

    A client may also have `required`: False marks its server optional for a discover of all
    servers; without the attribute, the server is required."""

    async def list_tools(self, cursor: str | None = None) -> Any: ...

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any: ...


def _failure(status: str, code: str, message: str, retryable: bool) -> dict[str, Any]:
    return {
        "status": status,
        "error": {"code": code, "message": message, "retryable": retryable},
    }


class McpRegistry:
    def __init__(
        self,
        *,
        max_discovery_pages: int | None = None,
        max_capabilities: int | None = None,
    ) -> None:
        for limit in (max_discovery_pages, max_capabilities):
            if limit is not None and (
                isinstance(limit, bool)
                or not isinstance(limit, int)
                or not 0 < limit <= _MAX_SAFE_INTEGER
            ):
                raise ConfigurationError(
                    "MCP discovery limits must be positive integers"
                )
        self.max_discovery_pages = max_discovery_pages or DEFAULT_MAX_DISCOVERY_PAGES
        self.max_capabilities = max_capabilities or DEFAULT_MAX_CAPABILITIES
        self._clients: dict[str, McpClient] = {}

    def register(self, server: str, client: McpClient) -> Callable[[], bool]:
        """Add a server's client; returns `unregister()`. The client is not closed by either.

        The name must be an id (1 to 256 characters, wire.md section 1), or no request could name it.
        """
        try:
            identifier(server, "server")
        except ContractError as error:
            raise RegistrationError(error.message) from None
        if server in self._clients:
            raise RegistrationError(f"Duplicate MCP server: {server}")
        for method in ("list_tools", "call_tool"):
            # Checked now: a discover of all servers would otherwise fail for everyone at each request.
            if not is_coroutine_function(getattr(client, method, None)):
                raise RegistrationError(
                    f"Invalid MCP server {server}: its client's {method} must be an async method"
                )
        self._clients[server] = client

        def unregister() -> bool:
            if self._clients.get(server) is client:
                del self._clients[server]
                return True
            return False

        return unregister

    def servers(self) -> list[str]:
        return list(self._clients)

    def clients(self) -> list[McpClient]:
        return list(self._clients.values())

    def get(self, server: str) -> McpClient | None:
        return self._clients.get(server)

    def _client(self, server: str, sandbox: Sandbox) -> McpClient:
        try:
            identifier(server, "server")
        except ContractError as error:
            raise InvalidInput(error.message) from None
        sandbox.check("mcp", server)
        client = self._clients.get(server)
        if client is None:
            raise NotFound(f"Unknown MCP server: {server}")
        return client

    async def execute(
        self, value: object, sandbox: Sandbox
    ) -> McpDiscoverOutput | McpInvokeOutput:
        """Validate the input (all input errors come before any server is asked), then run it."""
        try:
            request = check.mcp_input(value)
        except ContractError as error:
            raise InvalidInput(error.message) from None
        if isinstance(request, McpInvokeInput):
            return await self.invoke(request, sandbox)
        return await self.discover(request, sandbox)

    async def invoke(
        self, request: McpInvokeInput, sandbox: Sandbox
    ) -> McpInvokeOutput:
        client = self._client(request.server, sandbox)
        call = request.call
        source = f"{request.server}:{call.name}"
        await side_effect_starts()
        try:
            response = await client.call_tool(call.name, dict(call.arguments))
        except McpUnavailable:
            outcome = _failure(
                "failed", "MCP_UNAVAILABLE", "MCP server is not connected", True
            )
            return McpInvokeOutput.trusted(
                operation="invoke", result=result_of(outcome, call.id, source, None)
            )
        except McpDenied as error:
            # Nothing ran (docs/configuration.md, "MCP servers behind OAuth"); signing in is up to
            # a person, so a retry as it is would fail the same way.
            outcome = _failure(
                "failed",
                McpUnauthorized.code,
                McpUnauthorized(error.message).message,
                False,
            )
            return McpInvokeOutput.trusted(
                operation="invoke", result=result_of(outcome, call.id, source, None)
            )
        except McpTimeout:
            outcome = _failure("timeout", "MCP_TIMEOUT", "MCP call timed out", False)
            return McpInvokeOutput.trusted(
                operation="invoke", result=result_of(outcome, call.id, source, None)
            )
        except McpConnectionLost:
            outcome = _failure(
                "unknown",
                "MCP_CONNECTION_LOST",
                "MCP connection lost during the call",
                False,
            )
            return McpInvokeOutput.trusted(
                operation="invoke", result=result_of(outcome, call.id, source, None)
            )
        except McpProtocolError:
            outcome = _failure(
                "failed", "MCP_ERROR", "MCP server returned an error", False
            )
            return McpInvokeOutput.trusted(
                operation="invoke", result=result_of(outcome, call.id, source, None)
            )
        fields = answer_fields(response)
        if fields is None:
            raise InvalidResult("Invalid MCP tool result")
        # `isError: null` is a value, not an absent key (wire.md section 1), as in the reference.
        is_error = fields.get("isError")
        if "isError" in fields and not isinstance(is_error, bool):
            raise InvalidResult("Invalid MCP isError")
        outcome = {"status": "failed" if is_error else "success"}
        for key in ("content", "structuredContent", "references", "error"):
            if key in fields:
                outcome[key] = fields[key]
        result = result_of(
            outcome, call.id, source, MCP_TOOL_ERROR if is_error else None
        )
        return McpInvokeOutput.trusted(operation="invoke", result=result)

    async def discover(
        self, request: McpDiscoverInput, sandbox: Sandbox
    ) -> McpDiscoverOutput:
        server = request.server if "server" in request.model_fields_set else None
        servers = [server] if server is not None else list(self._clients)
        budget = _Budget()
        capabilities: list[McpCapability] = []
        unavailable: list[str] = []
        for name in servers:
            client = self._client(name, sandbox)
            listed = budget.capabilities
            try:
                capabilities.extend(await self._discover(name, client, budget))
            except _Unanswered as failure:
                if server is not None or getattr(client, "required", True) is not False:
                    raise failure.error from None
                # Its pages were fetched and count; its tools are not in the reply, so they do not.
                budget.capabilities = listed
                unavailable.append(name)
        if unavailable:
            return McpDiscoverOutput.trusted(
                operation="discover", capabilities=capabilities, unavailable=unavailable
            )
        return McpDiscoverOutput.trusted(
            operation="discover", capabilities=capabilities
        )

    async def _discover(
        self, server: str, client: McpClient, budget: "_Budget"
    ) -> list[McpCapability]:
        """The server's tools, page after page.

        Raises:
            _Unanswered: the server did not answer, or answered what breaks the rules.
            InvalidResult: the request's limits were reached (they are not the server's failure).
        """
        found: list[McpCapability] = []
        seen: set[str] = set()
        cursor: str | None = None
        while True:
            if budget.pages >= self.max_discovery_pages:
                raise InvalidResult("MCP discovery page limit exceeded")
            try:
                page = await client.list_tools(cursor)
            except (McpUnavailable, McpConnectionLost):
                raise _Unanswered(
                    Unavailable(f"MCP server is not connected: {server}")
                ) from None
            except McpTimeout:
                raise _Unanswered(
                    Timeout(f"MCP discovery timed out: {server}")
                ) from None
            except McpDenied as error:
                raise _Unanswered(McpUnauthorized(error.message)) from None
            except McpProtocolError:
                raise _Unanswered(
                    InvalidResult("MCP server returned an error")
                ) from None
            except InvalidResult as error:  # a page the client itself could not read
                raise _Unanswered(error) from None
            budget.pages += 1
            try:
                tools, has_cursor, next_cursor = tool_page(page)
            except InvalidResult as error:
                raise _Unanswered(error) from None
            if budget.capabilities + len(tools) > self.max_capabilities:
                raise InvalidResult("MCP capability limit exceeded")
            budget.capabilities += len(tools)
            try:
                found.extend(capability(server, tool) for tool in tools)
                if not has_cursor:
                    return found
                cursor = nonempty(next_cursor, "MCP cursor")
            except ContractError as error:
                raise _Unanswered(InvalidResult(error.message)) from None
            if cursor in seen:
                raise _Unanswered(
                    InvalidResult("MCP server repeated a pagination cursor")
                )
            seen.add(cursor)


class _Unanswered(Exception):
    """A server that did not answer a discover: `error` is what it fails the request with, unless
    the server is optional and the discover is of all servers."""

    def __init__(self, error: InteractionWorkerError) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass
class _Budget:
    pages: int = 0
    capabilities: int = 0
