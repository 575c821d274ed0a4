"""`Interaction`: the two entry points, declaring a protocol and binding its handlers."""

from collections.abc import Mapping
from typing import Any

from .definition import check_name, normalise_set
from .dispatch import CommandDispatcher, Handler
from .protocol import CommandProtocol
from .spec import CommandSpec
from .validation import CompiledCommand


class Interaction:
    """`Interaction.define(...)` compiles a protocol; `Interaction.bind(protocol, handlers)` dispatches it."""

    @staticmethod
    def define(
        *, command_field: str, commands: Mapping[str, CommandSpec | Mapping[str, Any]]
    ) -> CommandProtocol:
        """Compile `commands`, each selected by `command_field` equal to its id; `category` is required.

        Raises:
            CommandDefinitionError: a declaration is not valid (the message names command and key).
        """
        check_name(None, "command_field", command_field)
        specs, owners = normalise_set(
            commands, command_field=command_field, need_category=True
        )
        compiled = {
            command_id: CompiledCommand(command_id, spec, owners)
            for command_id, spec in specs.items()
        }
        return CommandProtocol(command_field, compiled)

    @staticmethod
    def bind(
        protocol: CommandProtocol, handlers: Mapping[str, Handler]
    ) -> CommandDispatcher:
        """Bind one handler to every command of `protocol`: `(result, context)`, `(result)` or `()`,
        returning a value (or a coroutine); it is called with the parameters it takes.

        Raises:
            CommandDefinitionError: a command has no handler, a handler names no command, or it
                cannot be called with zero, one or two arguments.
        """
        return CommandDispatcher(protocol, handlers)
