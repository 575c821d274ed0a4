"""`CommandProtocol`: a set of commands selected by one command field."""

import copy
from collections.abc import Mapping
from typing import Any

from . import schema
from ._json import copy_json_object
from .catalog import CommandCatalog
from .errors import CommandDefinitionError
from .validation import CompiledCommand, missing_command, unknown_command


class CommandProtocol:
    """What a model may ask for; built by `Interaction.define`.

    `receive` validates a command (docs/commands.md section 2) and returns `{"id", "result"}`;
    `model_json_schema` is the schema to give the model.
    """

    def __init__(
        self, command_field: str, commands: Mapping[str, CompiledCommand]
    ) -> None:
        for command_id, compiled in commands.items():
            discriminator = compiled.discriminator
            if discriminator is None or (discriminator.field, discriminator.value) != (
                command_field,
                command_id,
            ):
                raise CommandDefinitionError(
                    command_id,
                    "discriminator",
                    "must select the command by command_field",
                )
        self.command_field = command_field
        self.catalog = CommandCatalog(commands)
        self._commands = dict(commands)
        self._schema = schema.any_of(self._commands.items())

    @property
    def ids(self) -> tuple[str, ...]:
        """The command ids, in declaration order."""
        return tuple(self._commands)

    def receive(self, value: object) -> dict[str, Any]:
        """`{"id": <command id>, "result": <the validated command, a new object>}`.

        Raises:
            CommandRejected: the value is not a valid command; `.code` says which step refused it.
        """
        candidate = copy_json_object(value)
        if self.command_field not in candidate:
            raise missing_command(self.command_field)
        selected = candidate[self.command_field]
        compiled = self._commands.get(selected) if type(selected) is str else None
        if compiled is None:
            raise unknown_command(self.command_field, selected)
        return {"id": compiled.id, "result": compiled.validate(candidate)}

    def parse(self, value: object) -> dict[str, Any]:
        """The validated command alone: `receive(value)["result"]`."""
        result: dict[str, Any] = self.receive(value)["result"]
        return result

    @property
    def model_json_schema(self) -> dict[str, Any]:
        """`{"anyOf": [<one schema per command>]}`, a new copy each time."""
        return copy.deepcopy(self._schema)

    def model_json_schema_wrapped(self) -> dict[str, Any]:
        """The model schema under an object root: `{"type": "object", "properties": {"command": …}, …}`."""
        return schema.wrapped(self.model_json_schema)

    def manifest(self) -> list[dict[str, Any]]:
        """The catalog's manifest: one entry per command, in declaration order."""
        return self.catalog.manifest()

    def __repr__(self) -> str:
        return f"CommandProtocol(command_field={self.command_field!r}, ids={list(self._commands)!r})"
