"""httpx's guard (`tests/test_exported_members.py`): `__all__` is the sorted list of public names.

"Sorted" is ruff's isort-style order (rule RUF022), the one our `__init__` files use: constants first
(`MAX_ID_LENGTH`), then classes, then functions, rather than httpx's case-folded order.
"""

import ast
import re
import types
from pathlib import Path

import pytest

import interaction_worker
import interaction_worker.client
import interaction_worker.commands
import interaction_worker.config
import interaction_worker.console
import interaction_worker.contracts
import interaction_worker.flows
import interaction_worker.mcp
import interaction_worker.nodes
import interaction_worker.recording
import interaction_worker.sinks
import interaction_worker.testing
import interaction_worker.tools

PACKAGES = [
    pytest.param(interaction_worker, id="interaction_worker"),
    pytest.param(interaction_worker.client, id="client"),
    pytest.param(interaction_worker.commands, id="commands"),
    pytest.param(interaction_worker.config, id="config"),
    pytest.param(interaction_worker.console, id="console"),
    pytest.param(interaction_worker.contracts, id="contracts"),
    pytest.param(interaction_worker.flows, id="flows"),
    pytest.param(interaction_worker.mcp, id="mcp"),
    pytest.param(interaction_worker.nodes, id="nodes"),
    pytest.param(interaction_worker.recording, id="recording"),
    pytest.param(interaction_worker.sinks, id="sinks"),
    pytest.param(interaction_worker.testing, id="testing"),
    pytest.param(interaction_worker.tools, id="tools"),
]


def _isort_key(name: str) -> tuple[int, list[int | str], str]:
    """Ruff's isort-style order (RUF022): CONSTANTS, then Classes, then the rest, each naturally sorted."""
    if len(name) > 1 and name.isupper():
        category = 0
    elif name[:1].isupper():
        category = 1
    else:
        category = 2
    # re.split with a group alternates text and digit runs, so equal prefixes compare like with like.
    chunks: list[int | str] = [
        int(chunk) if chunk.isdigit() else chunk
        for chunk in re.split(r"([0-9]+)", name)
    ]
    # The name itself breaks ties such as "x01" / "x1", as ruff does.
    return category, chunks, name


def test_isort_key_orders_constants_classes_then_the_rest() -> None:
    # The order `ruff check --select RUF022 --fix` gives these names.
    names = ["zeta", "Zeta", "ZETA", "Ab", "AB", "aB", "Item10", "Item2"]
    names += ["ObserveRequest", "Observation", "a_b", "aa", "A_B", "X", "x1", "x01"]
    assert sorted(names, key=_isort_key) == [
        "AB",
        "A_B",
        "ZETA",
        "Ab",
        "Item2",
        "Item10",
        "Observation",
        "ObserveRequest",
        "X",
        "Zeta",
        "aB",
        "a_b",
        "aa",
        "x01",
        "x1",
        "zeta",
    ]


@pytest.mark.parametrize(
    "package",
    [
        pytest.param(interaction_worker, id="interaction_worker"),
        pytest.param(interaction_worker.client, id="client"),
        pytest.param(interaction_worker.commands, id="commands"),
        pytest.param(interaction_worker.config, id="config"),
        pytest.param(interaction_worker.console, id="console"),
        pytest.param(interaction_worker.contracts, id="contracts"),
        pytest.param(interaction_worker.flows, id="flows"),
        pytest.param(interaction_worker.mcp, id="mcp"),
        pytest.param(interaction_worker.nodes, id="nodes"),
        pytest.param(interaction_worker.sinks, id="sinks"),
        pytest.param(interaction_worker.tools, id="tools"),
    ],
)
def test_all_is_sorted(package: types.ModuleType) -> None:
    assert package.__all__ == sorted(package.__all__, key=_isort_key)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_name_in_all_exists(package: types.ModuleType) -> None:
    missing = [name for name in package.__all__ if not hasattr(package, name)]
    assert missing == []
    assert len(set(package.__all__)) == len(package.__all__), "duplicates in __all__"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_attribute_is_exported(package: types.ModuleType) -> None:
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert sorted(public - set(package.__all__)) == []


def test_each_public_class_name_names_one_class_in_the_package() -> None:
    """A name that means two classes (two `Deliveries`, two `ToolOutcome`) makes a reader, an
    import and a traceback ambiguous: each public class is defined once across the package."""
    source = Path(interaction_worker.__file__).parent
    where: dict[str, list[str]] = {}
    for path in sorted(source.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(
                    path.relative_to(source).as_posix()
                )
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
