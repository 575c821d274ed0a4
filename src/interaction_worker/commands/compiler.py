"""Compiling declarations without a protocol: `define_command` and `compile_commands`."""

from collections.abc import Mapping
from typing import Any

from .definition import check_name, normalise_command, normalise_set
from .spec import CommandSpec
from .validation import CompiledCommand


def define_command(
    spec: CommandSpec | Mapping[str, Any], *, id: str = "command"
) -> CompiledCommand:
    """Compile one command; `id` names it in errors and is its schema's title.

    A declared `discriminator` selects it (`parse` checks that field first); without one, any object
    is a candidate. `category` is optional here.

    Raises:
        CommandDefinitionError: the declaration is not valid.
    """
    check_name(id, "id", id)
    return CompiledCommand(
        id, normalise_command(id, spec, command_field=None, need_category=False), {}
    )


def compile_commands(
    commands: Mapping[str, CommandSpec | Mapping[str, Any]],
) -> dict[str, CompiledCommand]:
    """Compile a set of commands, in order: ids to compiled commands, for `CommandCatalog`.

    There is no command field: each command is selected by its own `discriminator`, if any. Owned
    fields are shared across the set (another command's owned field is `FOREIGN_FIELD`).

    Raises:
        CommandDefinitionError: a declaration is not valid, or the set is empty.
    """
    specs, owners = normalise_set(commands, command_field=None, need_category=False)
    return {
        command_id: CompiledCommand(command_id, spec, owners)
        for command_id, spec in specs.items()
    }
