"""The import rules of docs/architecture.md: a layer never imports a layer above it, the four kinds
of parts of one layer (subscribers, sinks, tools, mcp) never import each other, and the layers
below the bus bindings import no NATS client at all."""

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "interaction_worker"

# Bottom to top; a module may import its own top-level part and any part of a lower layer.
LAYERS: list[set[str]] = [
    {"contracts"},
    {"errors", "schema", "asyncapi"},
    {"config", "embedded", "event_loop"},
    {"nodes", "ledger", "commands"},
    {"subscribers", "sinks", "tools", "mcp"},
    {"tracing"},
    {"worker"},
    {"monitoring"},
    {"service"},
    {"app"},
    {"client"},
    {"flows", "console", "gateway"},
    {"recording"},
    {"testing"},
    {"cli"},
    {"__init__"},
]
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}
NO_NATS = {"contracts", "errors", "config", "nodes", "ledger", "commands"}
NATS_LIBRARIES = {"nats", "faststream"}


def part_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0].removesuffix(".py") if len(relative.parts) else "__init__"


def imports_of(path: Path) -> Iterator[tuple[int, str]]:
    """(line, what) for each import: our top-level part, or an outside library's top name."""
    relative = path.relative_to(PACKAGE).with_suffix("")
    package = list(relative.parts[:-1])  # the package this module is in, below ours
    if path.name == "__init__.py":
        package = list(relative.parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, _absolute(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                yield node.lineno, _absolute(node.module or "")
                continue
            base = package[: len(package) - node.level + 1]
            names = (node.module or "").split(".") if node.module else []
            target = [*base, *names]
            if target:
                yield node.lineno, target[0]
            else:  # `from . import x` at the top of the package
                for alias in node.names:
                    yield node.lineno, alias.name


def _absolute(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "interaction_worker":
        return parts[1] if len(parts) > 1 else "__init__"
    return "library:" + parts[0]


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_part_of_the_package_has_a_layer() -> None:
    parts = {part_of(path) for path in modules()}
    assert parts - set(RANK) == set(), (
        "add new parts to LAYERS and docs/architecture.md"
    )


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_imports_only_its_own_part_and_lower_layers(path: Path) -> None:
    part = part_of(path)
    wrong = []
    for line, target in imports_of(path):
        if target.startswith("library:"):
            if part in NO_NATS and target.removeprefix("library:") in NATS_LIBRARIES:
                wrong.append(
                    f"line {line}: {target.removeprefix('library:')} (no NATS below the bindings)"
                )
            continue
        if target == part or target not in RANK:
            continue
        if RANK[target] >= RANK[part]:
            wrong.append(
                f"line {line}: {target} (layer {RANK[target]}, this is {RANK[part]})"
            )
    assert wrong == [], f"{path.relative_to(PACKAGE)} imports above or beside itself"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_tracing_modules_import_opentelemetry(path: Path) -> None:
    """OpenTelemetry is an optional extra: the package must import without it, so only the modules
    of `tracing/` that a traced worker loads import it (`tracing/__init__.py` does not)."""
    relative = path.relative_to(PACKAGE)
    loaded_when_tracing = relative.parts[0] == "tracing" and path.name != "__init__.py"
    if loaded_when_tracing:
        return
    imports = [
        line for line, target in imports_of(path) if target == "library:opentelemetry"
    ]
    assert imports == [], f"{relative} imports opentelemetry (lines {imports})"


# The command protocol's own modules: its package and its request family on the bus.
COMMAND_PROTOCOL = {"commands", "subscribers/requests/command.py"}


def test_only_the_command_protocol_is_named_for_commands() -> None:
    """`Command` names the command protocol (docs/commands.md) alone: the 14 read-only commands'
    modules are named for what they are (`tools/read_only.py`), so a reader looking for the protocol
    finds only its modules."""
    elsewhere = [
        relative.as_posix()
        for path in modules()
        if "command" in path.stem
        and (relative := path.relative_to(PACKAGE)).parts[0] not in COMMAND_PROTOCOL
        and relative.as_posix() not in COMMAND_PROTOCOL
    ]
    assert elsewhere == []


MAX_LINES = 400


def test_no_module_is_over_400_lines() -> None:
    long = {
        path.relative_to(PACKAGE).as_posix(): lines
        for path in modules()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, "split each where it has two reasons to change"


def test_the_worker_imports_no_transport() -> None:
    """`InteractionWorker` is the worker without a transport: its bindings are built on the NATS
    side (`subscribers/bindings.py`), so neither NATS client is imported by the worker's modules."""
    paths = [path for path in modules() if part_of(path) == "worker"]
    assert paths, "the worker's modules moved: update this test"
    wrong = [
        f"{path.relative_to(PACKAGE)} line {line}: {target.removeprefix('library:')}"
        for path in paths
        for line, target in imports_of(path)
        if target.removeprefix("library:") in NATS_LIBRARIES
        and target.startswith("library:")
    ]
    assert wrong == [], "the worker imports a transport"
