"""The command protocol (docs/commands.md): declare what a model may ask for, validate what it sends,
and dispatch it to handlers bound in code. Pure Python: no bus, nothing else of the package."""

from .catalog import CommandCatalog
from .compiler import compile_commands, define_command
from .dispatch import CommandDispatcher, Handler
from .errors import (
    REJECTION_CODES,
    CommandDefinitionError,
    CommandRejected,
    RejectionCode,
)
from .interaction import Interaction
from .protocol import CommandProtocol
from .schema import command_schema
from .spec import (
    CATEGORIES,
    Category,
    CheckSpec,
    CommandSpec,
    Discriminator,
    FieldSpec,
    OptionalPresence,
)
from .validation import CompiledCommand

__all__ = [
    "CATEGORIES",
    "REJECTION_CODES",
    "Category",
    "CheckSpec",
    "CommandCatalog",
    "CommandDefinitionError",
    "CommandDispatcher",
    "CommandProtocol",
    "CommandRejected",
    "CommandSpec",
    "CompiledCommand",
    "Discriminator",
    "FieldSpec",
    "Handler",
    "Interaction",
    "OptionalPresence",
    "RejectionCode",
    "command_schema",
    "compile_commands",
    "define_command",
]
