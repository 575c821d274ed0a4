"""`CommandDispatcher`: a protocol with one handler bound to each command (docs/commands.md section 4)."""

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from ._calls import arity
from .errors import CommandDefinitionError
from .protocol import CommandProtocol

# `(value, context)`, `(value)` or `()`: a handler is called with what it takes (docs/commands.md 4).
Handler = Callable[..., Any]
_NOT_CALLABLE_SO = "must take zero, one or two parameters (value, context)"


class CommandDispatcher:
    """Validates a command, then runs the handler bound to its validated id; built by `Interaction.bind`.

    Only the id `receive` returns chooses the handler: nothing else in the command can name one.
    `receive` and `run` are separate so that a caller can decide between them (a permission, say).
    """

    def __init__(
        self, protocol: CommandProtocol, handlers: Mapping[str, Handler]
    ) -> None:
        if not isinstance(protocol, CommandProtocol):
            raise TypeError("bind takes a protocol made by Interaction.define")
        if not isinstance(handlers, Mapping):
            raise CommandDefinitionError(
                None, "handlers", "must be a mapping of command id to handler"
            )
        for command_id in protocol.ids:
            if command_id not in handlers:
                raise CommandDefinitionError(command_id, "handlers", "has no handler")
        for command_id, handler in handlers.items():
            if command_id not in protocol.ids:
                raise CommandDefinitionError(
                    command_id, "handlers", "is not a declared command"
                )
            if not callable(handler):
                raise CommandDefinitionError(command_id, "handlers", "must be callable")
        self.protocol = protocol
        self._handlers: dict[str, tuple[Handler, int]] = {
            command_id: (handler, _takes(command_id, handler))
            for command_id, handler in handlers.items()
        }

    @property
    def catalog(self) -> list[dict[str, Any]]:
        """The protocol's manifest."""
        return self.protocol.manifest()

    def receive(self, value: object) -> dict[str, Any]:
        """Validation alone, as `protocol.receive`: `{"id", "result"}` or `CommandRejected`."""
        return self.protocol.receive(value)

    async def run(
        self, received: Mapping[str, Any], context: Any = None
    ) -> dict[str, Any]:
        """Call the handler bound to `received["id"]` (what `receive` returned) with its result and `context`.

        A coroutine (any awaitable) the handler returns is awaited; its exceptions propagate unchanged.
        `{"id", "result": <the handler's return value>}`.
        """
        command_id = received.get("id")
        bound = self._handlers.get(command_id) if isinstance(command_id, str) else None
        if bound is None:
            raise ValueError(
                "run takes what receive returned: its id names no bound command"
            )
        handler, takes = bound
        if takes == 2:
            outcome = handler(received["result"], context)
        elif takes == 1:
            outcome = handler(received["result"])
        else:
            outcome = handler()
        if inspect.isawaitable(outcome):
            outcome = await outcome
        return {"id": command_id, "result": outcome}

    async def dispatch(self, value: object, context: Any = None) -> dict[str, Any]:
        """`run(receive(value), context)`: validate, then call the bound handler."""
        return await self.run(self.receive(value), context)

    def __repr__(self) -> str:
        return f"CommandDispatcher({self.protocol!r})"


def _takes(command_id: str, handler: Handler) -> int:
    """How many of `(value, context)` the handler is called with: the most it can take."""
    count = arity(handler, (2, 1, 0))
    if count is None:
        raise CommandDefinitionError(command_id, "handlers", _NOT_CALLABLE_SO)
    return count
