"""The kinds a worker may be told to serve (`serve:`, docs/configuration.md 1) and the request kinds
each one covers: `command` covers the command protocol's two subjects, the others one each. The one
place that maps the one onto the other."""

from collections.abc import Iterable

from .wire import WIRE, Kind

# A kind with a name of its own (the wire table's kinds not served with another).
ServeName = Kind
SERVE_NAMES: tuple[ServeName, ...] = tuple(
    kind for kind, row in WIRE.items() if row.served_with is None
)
# The kinds a name covers beyond its own.
_ALSO: dict[str, tuple[str, ...]] = {
    name: tuple(kind for kind, row in WIRE.items() if row.served_with == name)
    for name in SERVE_NAMES
}
SERVE_RULE = f"must be one of {', '.join(SERVE_NAMES)}"
SERVE_LIST_RULE = f"must be a list of kinds among {', '.join(SERVE_NAMES)}"
EMPTY_RULE = "must name at least one kind: a worker that serves nothing answers nothing"


def served_kinds(names: Iterable[str]) -> frozenset[str]:
    """The request kinds (`contracts/wire.py`) the serve names cover."""
    return frozenset(kind for name in names for kind in (name, *_ALSO.get(name, ())))


def serve_problem(names: object) -> str | None:
    """What is wrong with a list of serve names, said without echoing them; None when nothing is."""
    if isinstance(names, str) or not isinstance(names, Iterable):
        return SERVE_LIST_RULE
    given = list(names)
    if not given:
        return EMPTY_RULE
    if any(name not in SERVE_NAMES for name in given):
        return SERVE_LIST_RULE
    if len(set(given)) != len(given):
        return "names a kind twice"
    return None
