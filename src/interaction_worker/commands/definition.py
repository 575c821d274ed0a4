"""Checking declarations when they are compiled (docs/commands.md section 1).

Every mistake is found here, before a command is received, and named by command and key; what comes
out is a normalised `CommandSpec` (fields as `FieldSpec`s, checks as `CheckSpec`s, tuples, copies),
so the validator and the schema never meet a raw declaration.
"""

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields as dataclass_fields
from types import MappingProxyType
from typing import Any

from ._calls import arity, is_async
from ._json import copy_json_object
from .errors import MAX_MESSAGE_LENGTH, CommandDefinitionError, CommandRejected
from .spec import (
    CATEGORIES,
    OPTIONAL_PRESENCES,
    CheckSpec,
    CommandSpec,
    Discriminator,
    FieldSpec,
)

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_LINE_BREAK = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")

NAME_RULE = "must be 1 to 64 characters of A-Z a-z 0-9 _ -"


def is_name(name: object) -> bool:
    """Whether `name` may be a command id or a field name."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def check_name(command: str | None, key: str, name: object) -> str:
    if not is_name(name):
        raise CommandDefinitionError(command, key, f"{_shown(name)} {NAME_RULE}")
    assert isinstance(name, str)
    return name


def normalise_set(
    commands: object, *, command_field: str | None, need_category: bool
) -> tuple[dict[str, CommandSpec], dict[str, str]]:
    """The specs of a set of commands in declaration order, and which command owns each owned field."""
    if not isinstance(commands, Mapping):
        raise CommandDefinitionError(
            None, "commands", "must be a mapping of command id to declaration"
        )
    if not commands:
        raise CommandDefinitionError(
            None, "commands", "must declare at least one command"
        )
    specs: dict[str, CommandSpec] = {}
    for command_id, raw in commands.items():
        check_name(None, "commands", command_id)
        specs[command_id] = normalise_command(
            command_id, raw, command_field=command_field, need_category=need_category
        )
    owners: dict[str, str] = {}
    for command_id, spec in specs.items():
        for name in spec.owned_fields:
            if name in owners:
                problem = f"{name!r} is already owned by command {owners[name]!r}"
                raise CommandDefinitionError(command_id, "owned_fields", problem)
            owners[name] = command_id
    for command_id, spec in specs.items():
        for name in spec.fields:
            owner = owners.get(name, command_id)
            if owner != command_id:
                problem = f"{name!r} is owned by command {owner!r}, so no other command may declare it"
                raise CommandDefinitionError(command_id, f"fields.{name}", problem)
    return specs, owners


def normalise_command(
    command: str, raw: object, *, command_field: str | None, need_category: bool
) -> CommandSpec:
    """`raw` (a mapping or a `CommandSpec`) checked and normalised.

    `command_field` is the protocol's, whose discriminator is generated; without one, a declared
    `discriminator` selects the command.
    """
    entries = _entries(raw, CommandSpec, command, "")
    category = entries.get("category")
    if category is None:
        if need_category:
            raise CommandDefinitionError(
                command, "category", f"is required: one of {', '.join(CATEGORIES)}"
            )
    elif category not in CATEGORIES:
        raise CommandDefinitionError(
            command,
            "category",
            f"{_shown(category)} is not one of {', '.join(CATEGORIES)}",
        )
    description = _optional_text(command, "description", entries.get("description"))

    discriminator = _discriminator(command, entries.get("discriminator"))
    if command_field is not None:
        if discriminator is not None:
            problem = "is generated from command_field; declare it only for define_command or compile_commands"
            raise CommandDefinitionError(command, "discriminator", problem)
        discriminator = Discriminator(command_field, command)
    selector = discriminator.field if discriminator is not None else None

    raw_fields = entries.get("fields", {})
    if not isinstance(raw_fields, Mapping):
        raise CommandDefinitionError(
            command, "fields", "must be a mapping of field name to declaration"
        )
    fields: dict[str, FieldSpec] = {}
    for name, raw_field in raw_fields.items():
        check_name(command, "fields", name)
        if name == selector:
            raise CommandDefinitionError(
                command, f"fields.{name}", "is the field that selects the command"
            )
        fields[name] = _field(command, name, raw_field)

    raw_checks = entries.get("checks", ())
    if not isinstance(raw_checks, Sequence) or isinstance(raw_checks, str | bytes):
        raise CommandDefinitionError(command, "checks", "must be a list of checks")
    checks = tuple(
        _check(command, index, raw_check) for index, raw_check in enumerate(raw_checks)
    )

    refine = entries.get("refine")
    if refine is not None:
        _check_function(command, "refine", refine)

    owned = entries.get("owned_fields", ())
    if not isinstance(owned, Sequence) or isinstance(owned, str | bytes):
        raise CommandDefinitionError(
            command, "owned_fields", "must be a list of field names"
        )
    for name in owned:
        if name not in fields:
            raise CommandDefinitionError(
                command, "owned_fields", f"{_shown(name)} is not a field of the command"
            )
    if len(set(owned)) != len(owned):
        raise CommandDefinitionError(command, "owned_fields", "lists a field twice")

    additional = entries.get("additional_properties", False)
    if not isinstance(additional, bool):
        raise CommandDefinitionError(
            command, "additional_properties", "must be true or false"
        )
    presence = entries.get("optional_presence", "own")
    if presence not in OPTIONAL_PRESENCES:
        raise CommandDefinitionError(
            command,
            "optional_presence",
            f"{_shown(presence)} is not 'own' or 'nullable'",
        )

    return CommandSpec(
        category=category,
        description=description,
        fields=MappingProxyType(fields),
        checks=checks,
        refine=refine,
        owned_fields=tuple(owned),
        additional_properties=additional,
        optional_presence=presence,
        discriminator=discriminator,
    )


def _entries(raw: object, kind: type[Any], command: str, key: str) -> dict[str, Any]:
    """The keys of a declaration, given as a mapping or as its dataclass."""
    if isinstance(raw, kind):
        given = {item.name: getattr(raw, item.name) for item in dataclass_fields(kind)}
        return {name: value for name, value in given.items() if value is not None}
    if not isinstance(raw, Mapping):
        raise CommandDefinitionError(
            command, key or "declaration", f"must be a mapping or a {kind.__name__}"
        )
    known = {item.name for item in dataclass_fields(kind)}
    for name in raw:
        if name not in known:
            where = f"{key}.{name}" if key else str(name)
            raise CommandDefinitionError(
                command,
                where,
                f"unknown key; expected one of {', '.join(sorted(known))}",
            )
    return {name: value for name, value in raw.items() if value is not None}


def _field(command: str, name: str, raw: object) -> FieldSpec:
    key = f"fields.{name}"
    entries = _entries(raw, FieldSpec, command, key)
    required = entries.get("required", False)
    if not isinstance(required, bool):
        raise CommandDefinitionError(
            command, f"{key}.required", "must be true or false"
        )
    schema = entries.get("json_schema", {})
    if not isinstance(schema, Mapping):
        raise CommandDefinitionError(
            command, f"{key}.json_schema", "must be a JSON object"
        )
    try:
        copied = copy_json_object(dict(schema))
    except CommandRejected as error:
        raise CommandDefinitionError(
            command, f"{key}.json_schema", f"must be JSON: {error.message}"
        ) from None
    description = _optional_text(
        command, f"{key}.description", entries.get("description")
    )
    return FieldSpec(required=required, json_schema=copied, description=description)


def _check_function(command: str, key: str, function: object) -> Callable[..., Any]:
    """A function called with the command, synchronously: checked here rather than at the first
    command, where an `async def` would return a coroutine (always true, never run)."""
    if not callable(function):
        raise CommandDefinitionError(command, key, "must be callable")
    if is_async(function):
        raise CommandDefinitionError(
            command, key, "must be a plain function, not async"
        )
    if arity(function, (1,)) is None:
        raise CommandDefinitionError(
            command, key, "must take one parameter (the command)"
        )
    return function


def _check(command: str, index: int, raw: object) -> CheckSpec:
    key = f"checks[{index}]"
    entries = _entries(raw, CheckSpec, command, key)
    occur = _check_function(command, f"{key}.occur", entries.get("occur"))
    when = entries.get("when")
    if when is not None:
        _check_function(command, f"{key}.when", when)
    error = entries.get("error")
    if not isinstance(error, str) or not error.strip():
        raise CommandDefinitionError(
            command, f"{key}.error", "must be a nonempty string"
        )
    if len(error) > MAX_MESSAGE_LENGTH or _LINE_BREAK.search(error):
        problem = f"must be one line of at most {MAX_MESSAGE_LENGTH} characters"
        raise CommandDefinitionError(command, f"{key}.error", problem)
    path = entries.get("path")
    if path is not None and (
        not isinstance(path, str) or (path and not path.startswith("/"))
    ):
        raise CommandDefinitionError(
            command, f"{key}.path", 'must be a JSON Pointer: "" or starting with "/"'
        )
    return CheckSpec(occur=occur, error=error, when=when, path=path)


def _discriminator(command: str, raw: object) -> Discriminator | None:
    if raw is None:
        return None
    entries = _entries(raw, Discriminator, command, "discriminator")
    name = check_name(command, "discriminator.field", entries.get("field"))
    value = entries.get("value")
    if not isinstance(value, str) or not value:
        raise CommandDefinitionError(
            command, "discriminator.value", "must be a nonempty string"
        )
    return Discriminator(name, value)


def _optional_text(command: str, key: str, value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise CommandDefinitionError(command, key, "must be a string")
    return value


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 64 else text[:63] + "…"
