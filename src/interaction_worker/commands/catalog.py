"""`CommandCatalog`: compiled commands by id, and the manifest that describes them."""

import copy
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ._text import quote
from .definition import check_name
from .errors import CommandDefinitionError, CommandRejected
from .validation import CompiledCommand


class CommandCatalog:
    """Compiled commands in declaration order: `CommandCatalog(compile_commands({...}).items())`."""

    def __init__(
        self,
        entries: Iterable[tuple[str, CompiledCommand]] | Mapping[str, CompiledCommand],
    ) -> None:
        pairs = entries.items() if isinstance(entries, Mapping) else entries
        self._commands: dict[str, CompiledCommand] = {}
        for command_id, compiled in pairs:
            check_name(None, "entries", command_id)
            if not isinstance(compiled, CompiledCommand):
                raise CommandDefinitionError(
                    command_id, "entries", "must be a compiled command"
                )
            if command_id in self._commands:
                raise CommandDefinitionError(command_id, "entries", "is listed twice")
            self._commands[command_id] = compiled

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self._commands)

    def require(self, command_id: str) -> CompiledCommand:
        """The command `command_id`.

        Raises:
            CommandRejected: `UNKNOWN_COMMAND`, no such command.
        """
        compiled = (
            self._commands.get(command_id) if isinstance(command_id, str) else None
        )
        if compiled is None:
            shown = (
                quote(command_id) if isinstance(command_id, str) else "a non-string id"
            )
            raise CommandRejected(
                f"no declared command is named {shown}", code="UNKNOWN_COMMAND"
            )
        return compiled

    def manifest(self) -> list[dict[str, Any]]:
        """`[{"id", "category"?, "description"?, "fields": {name: {"required", "json_schema"}}}]`, a new list."""
        listed: list[dict[str, Any]] = []
        for command_id, compiled in self._commands.items():
            entry: dict[str, Any] = {"id": command_id}
            if compiled.category is not None:
                entry["category"] = compiled.category
            if compiled.description is not None:
                entry["description"] = compiled.description
            entry["fields"] = {
                name: {
                    "required": field.required,
                    "json_schema": copy.deepcopy(dict(field.json_schema)),
                }
                for name, field in compiled.fields.items()
            }
            listed.append(entry)
        return listed

    def __contains__(self, command_id: object) -> bool:
        return command_id in self._commands

    def __iter__(self) -> Iterator[tuple[str, CompiledCommand]]:
        return iter(self._commands.items())

    def __len__(self) -> int:
        return len(self._commands)

    def __repr__(self) -> str:
        return f"CommandCatalog({list(self._commands)!r})"
