"""Command declarations as dataclasses, equivalent to the mapping form (docs/commands.md section 1).

Either form is accepted wherever a declaration is; both are checked and normalised by the compiler
(`definition.py`), so these classes hold whatever they were given until then. `None` means "not given".
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Category = Literal["query", "action", "presentation", "input", "receipt"]
OptionalPresence = Literal["own", "nullable"]

CATEGORIES: Final[tuple[Category, ...]] = (
    "query",
    "action",
    "presentation",
    "input",
    "receipt",
)
OPTIONAL_PRESENCES: Final[tuple[OptionalPresence, ...]] = ("own", "nullable")

# What a check, `when` and `refine` are given: the validated command, a copy of the model's.
Predicate = Callable[[dict[str, Any]], object]
Refine = Callable[[dict[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True)
class FieldSpec:
    """One field: whether it must be present, and the JSON Schema that describes it to the model."""

    required: bool = False
    json_schema: Mapping[str, Any] = field(default_factory=dict)
    description: str | None = None


@dataclass(frozen=True)
class CheckSpec:
    """A failure predicate: when `when` holds (always, if not given) and `occur` holds, `error` rejects."""

    occur: Predicate
    error: str
    when: Predicate | None = None
    path: str | None = None


@dataclass(frozen=True)
class Discriminator:
    """The field and constant that select a command compiled without `Interaction`."""

    field: str
    value: str


@dataclass(frozen=True)
class CommandSpec:
    """One command's declaration; the keys of the mapping form, as attributes."""

    category: Category | None = None
    description: str | None = None
    fields: Mapping[str, FieldSpec | Mapping[str, Any]] = field(default_factory=dict)
    checks: Sequence[CheckSpec | Mapping[str, Any]] = ()
    refine: Refine | None = None
    owned_fields: Sequence[str] = ()
    additional_properties: bool = False
    optional_presence: OptionalPresence = "own"
    discriminator: Discriminator | Mapping[str, Any] | None = None
