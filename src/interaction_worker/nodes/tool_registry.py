"""The tool registry: INTERACTION.ACT.TOOL without a bus (reference section 3)."""

import re
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from ..contracts import (
    ContractError,
    ExternalResult,
    ToolCall,
    ToolDefinition,
    json_object,
    json_value,
)
from ..contracts import validation as check
from ..errors import (
    InteractionWorkerError,
    InvalidInput,
    InvalidResult,
    NotFound,
    RegistrationError,
)
from .context import ToolContext
from .sandbox import Sandbox
from .side_effects import side_effect_starts, starting
from .tool_definition import checked_definition

T = TypeVar("T")

_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@runtime_checkable
class RegisteredTool(Protocol):
    """Any object of this shape is a tool.

    Optional attributes, read when present: `description`, `effects` (read / write / execute /
    network), `requires_approval`, `idempotent`, `bounds_own_time`. The attributes of the definition
    (name, input_schema, description, effects, requires_approval) are checked and read once, when
    the tool is registered (`tool_definition.py`).

    `bounds_own_time = True` says the tool ends every call in time by itself (as the read-only
    commands do, by `tools.commands.timeout`): the worker's `tool_timeout` does not cancel it. It is
    read once, when the tool is registered.
    """

    @property
    def name(self) -> str: ...

    # A read-only member, so that a class attribute `input_schema = {...}` (a dict) conforms.
    @property
    def input_schema(self) -> Mapping[str, Any]: ...

    def validate(self, arguments: dict[str, Any]) -> None:
        """Raise to reject the arguments; the message becomes the INVALID_INPUT error."""

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        """Return the ExternalResult fields minus callId and source (a mapping or a model)."""


def tool_definition(tool: RegisteredTool) -> ToolDefinition:
    """The wire definition of a tool; RegistrationError, naming the attribute, for one that is not a tool."""
    return checked_definition(tool, tool.name)


def is_rerunnable(tool: RegisteredTool) -> bool:
    """A tool a ledger may run again after a crash: declared idempotent, or read-only."""
    effects: Sequence[str] = getattr(tool, "effects", None) or ()
    return bool(getattr(tool, "idempotent", False)) or (
        bool(effects) and set(effects) == {"read"}
    )


class ToolRegistry:
    """Tools by name, in registration order; `call` runs one in the reference's exact order."""

    def __init__(self, tools: Sequence[RegisteredTool] = ()) -> None:
        self._tools: dict[str, RegisteredTool] = {}
        self._definitions: dict[str, ToolDefinition] = {}
        # Asked on every bus call before it runs: a set lookup, not a getattr on the tool.
        self._bounding_own_time: set[str] = set()
        for tool in tools:
            self.register(tool)

    def register(self, tool: RegisteredTool) -> Callable[[], bool]:
        """Add a tool; returns `unregister()`, true only the first time and only for this object."""
        name = getattr(tool, "name", None)
        if (
            not isinstance(name, str)
            or not _TOOL_NAME.fullmatch(name)
            or name in self._tools
        ):
            raise RegistrationError(f"Invalid or duplicate tool: {name}")
        self._definitions[name] = checked_definition(tool, name)
        self._tools[name] = tool
        if getattr(tool, "bounds_own_time", False) is True:
            self._bounding_own_time.add(name)

        def unregister() -> bool:
            if self._tools.get(name) is tool:
                del self._tools[name]
                del self._definitions[name]
                self._bounding_own_time.discard(name)
                return True
            return False

        return unregister

    def bounds_own_time(self, name: str) -> bool:
        """Whether the tool registered as `name` declared `bounds_own_time = True`; False for an unknown name."""
        return name in self._bounding_own_time

    def get(self, name: str) -> RegisteredTool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def list(self, sandbox: Sandbox) -> list[ToolDefinition]:
        """The definitions of the tools the sandbox allows."""
        return [
            definition
            for name, definition in self._definitions.items()
            if sandbox.allows("tools", name)
        ]

    def describe(self, name: str, sandbox: Sandbox) -> ToolDefinition:
        """The definition of one tool, checked as a call of it would be: permission, then existence."""
        sandbox.check("tools", name)
        definition = self._definitions.get(name)
        if definition is None:
            raise NotFound(f"Unknown tool: {name}")
        return definition

    async def call(
        self,
        call: Mapping[str, Any] | ToolCall,
        sandbox: Sandbox,
        *,
        context: ToolContext | None = None,
        trusted_json: bool = False,
    ) -> ExternalResult:
        """call.id → permission → existence → arguments → validate → execute → result validation.

        `trusted_json` skips the JSON-ness walk of the arguments, for bodies the strict parser produced.
        """
        return await self._execute(
            call, sandbox, context, trusted_json, check.external_result_of
        )

    def call_document(
        self,
        call: Mapping[str, Any] | ToolCall,
        sandbox: Sandbox,
        context: ToolContext | None = None,
        trusted_json: bool = False,
    ) -> Coroutine[Any, Any, dict[str, Any]]:
        """`call`, with the result as the wire document its model would serialise to (for the bus).

        The call itself, not a coroutine around it: one frame less per bus call. Its arguments may
        be given by position, which the worker does: keywords cost a bus call their matching."""
        return self._execute(
            call, sandbox, context, trusted_json, check.external_result_document
        )

    async def _execute(
        self,
        call: Mapping[str, Any] | ToolCall,
        sandbox: Sandbox,
        context: ToolContext | None,
        trusted_json: bool,
        validate: Callable[[dict[str, Any], str, str], T],
    ) -> T:
        if type(call) is dict:
            raw: object = call
        elif isinstance(call, ToolCall):
            raw = call.to_wire()
        else:
            raw = dict(call) if isinstance(call, Mapping) else call
        try:
            fields = check.tool_call(raw)
        except ContractError as error:
            raise InvalidInput(error.message) from None
        call_id: str = fields["id"]
        name: str = fields["name"]
        sandbox.check("tools", name)
        tool = self._tools.get(name)
        if tool is None:
            raise NotFound(f"Unknown tool: {name}")
        arguments = fields.get("arguments")
        if type(arguments) is not dict or not trusted_json:
            try:
                arguments = json_object(arguments, "call.arguments")
                if not trusted_json:
                    json_value(arguments, "call.arguments")
            except ContractError as error:
                raise InvalidInput(error.message) from None
        try:
            tool.validate(arguments)
        except InteractionWorkerError:
            raise
        except (
            Exception
        ) as error:  # a tool's validate may raise anything: its text is checked
            raise InvalidInput(str(error)) from None
        if starting.get() is not None:
            await side_effect_starts()
        outcome = await tool.execute(
            arguments, context or ToolContext(call_id, sandbox)
        )
        # `_validated`'s first case, inline: what tools return.
        if type(outcome) is dict:
            try:
                return validate(outcome, call_id, name)
            except ContractError as error:
                raise InvalidResult(error.message) from None
        return _validated(validate, outcome, call_id, name)


def _validated(
    validate: Callable[[dict[str, Any], str, str], T],
    outcome: object,
    call_id: str,
    source: str,
) -> T:
    if type(outcome) is dict:
        fields = outcome
    elif isinstance(outcome, BaseModel):
        fields = outcome.model_dump(mode="json", by_alias=True, exclude_unset=True)
    elif isinstance(outcome, Mapping):
        fields = dict(outcome)
    else:
        # The reference spreads whatever came back into `{...outcome, callId, source}`: a value that is
        # not an object adds no status, so the result fails as "Invalid external result status".
        fields = {}
    try:
        return validate(fields, call_id, source)
    except ContractError as error:
        raise InvalidResult(error.message) from None
