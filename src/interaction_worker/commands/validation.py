"""Receiving one command, in the order of docs/commands.md section 2.

Steps 1 (a JSON object) and 2 (the selector) are done by the caller: `CompiledCommand.parse` for a
command used alone, `CommandProtocol.receive` for a protocol, which selects by its command field.
`CompiledCommand.validate` then runs steps 3 to 6 on the caller's copy.
"""

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ._json import copy_json_object
from ._text import json_type, pointer, quote
from .errors import CommandRejected
from .spec import (
    Category,
    CheckSpec,
    CommandSpec,
    Discriminator,
    FieldSpec,
    OptionalPresence,
    Refine,
)


class CompiledCommand:
    """One command, declared and checked: `parse` validates a value against it.

    Built by `define_command`, `compile_commands` and `Interaction.define`; `spec` is the declaration
    as normalised by the compiler.
    """

    def __init__(
        self, command_id: str, spec: CommandSpec, owners: Mapping[str, str]
    ) -> None:
        self.id = command_id
        self.spec = spec
        fields: dict[str, FieldSpec] = {}
        for name, field in spec.fields.items():
            assert isinstance(field, FieldSpec), "spec must come from the compiler"
            fields[name] = field
        checks: list[CheckSpec] = []
        for check in spec.checks:
            assert isinstance(check, CheckSpec), "spec must come from the compiler"
            checks.append(check)
        assert spec.discriminator is None or isinstance(
            spec.discriminator, Discriminator
        )
        self.fields: Mapping[str, FieldSpec] = MappingProxyType(fields)
        self.discriminator: Discriminator | None = spec.discriminator
        self._checks = tuple(checks)
        self._required = tuple(name for name, field in fields.items() if field.required)
        self._optional = tuple(
            name for name, field in fields.items() if not field.required
        )
        self._declared = frozenset(fields) | (
            {self.discriminator.field} if self.discriminator is not None else set()
        )
        self._foreign = {
            name: owner for name, owner in owners.items() if owner != command_id
        }
        self._nullable = spec.optional_presence == "nullable"
        self._refine: Refine | None = spec.refine

    @property
    def category(self) -> Category | None:
        return self.spec.category

    @property
    def description(self) -> str | None:
        return self.spec.description

    @property
    def additional_properties(self) -> bool:
        return self.spec.additional_properties

    @property
    def optional_presence(self) -> OptionalPresence:
        return self.spec.optional_presence

    @property
    def owned_fields(self) -> tuple[str, ...]:
        return tuple(self.spec.owned_fields)

    def parse(self, value: object) -> dict[str, Any]:
        """The validated command, a new object (steps 1, 2 when selected by a discriminator, 3 to 6).

        Raises:
            CommandRejected: the value is not this command.
        """
        candidate = copy_json_object(value)
        if self.discriminator is not None:
            field, expected = self.discriminator.field, self.discriminator.value
            if field not in candidate:
                raise missing_command(field)
            if type(candidate[field]) is not str or candidate[field] != expected:
                raise unknown_command(field, candidate[field])
        return self.validate(candidate)

    def validate(self, candidate: dict[str, Any]) -> dict[str, Any]:
        """Steps 3 to 6 on `candidate`, a copy the caller owns (it may be changed and returned)."""
        for name in self._required:
            if name not in candidate or (self._nullable and candidate[name] is None):
                message = f"command {quote(self.id)} requires the field {quote(name)}"
                raise CommandRejected(message, pointer(name), code="MISSING_FIELD")
        if not self.spec.additional_properties:
            for key in candidate:
                if key not in self._declared:
                    message = f"command {quote(self.id)} has no field {quote(key)}"
                    raise CommandRejected(message, pointer(key), code="UNKNOWN_FIELD")
        if self._foreign:
            for key in candidate:
                owner = self._foreign.get(key)
                if owner is not None:
                    message = f"the field {quote(key)} belongs to command {quote(owner)}, not {quote(self.id)}"
                    raise CommandRejected(message, pointer(key), code="FOREIGN_FIELD")
        if self._nullable:
            # A strict structured-output mode must send every field; null stands for "absent".
            for name in self._optional:
                if name in candidate and candidate[name] is None:
                    del candidate[name]
        for check in self._checks:
            # Any other exception from a check is a bug in the declaration, not the model's doing.
            try:
                failed = (check.when is None or check.when(candidate)) and check.occur(
                    candidate
                )
            except CommandRejected as rejected:
                raise CommandRejected(rejected.message, rejected.path) from rejected
            if failed:
                raise CommandRejected(check.error, check.path)
        if self._refine is None:
            return candidate
        try:
            refined = self._refine(candidate)
        except CommandRejected as rejected:
            raise CommandRejected(rejected.message, rejected.path) from rejected
        if not isinstance(refined, Mapping):
            kind = type(refined).__name__
            raise TypeError(
                f"refine of command {self.id!r} returned {kind}, not a mapping"
            )
        return dict(refined)

    def __repr__(self) -> str:
        return f"CompiledCommand({self.id!r}, fields={list(self.fields)!r})"


def missing_command(field: str) -> CommandRejected:
    message = f"the command field {quote(field)} is missing"
    return CommandRejected(message, pointer(field), code="MISSING_COMMAND")


def unknown_command(field: str, selected: object) -> CommandRejected:
    if isinstance(selected, str):
        message = f"{quote(field)} names no declared command: {quote(selected)}"
    else:
        message = f"{quote(field)} must be a string naming a command, not {json_type(selected)}"
    return CommandRejected(message, pointer(field), code="UNKNOWN_COMMAND")
