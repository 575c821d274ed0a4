"""The package's public API is one table (`src/interaction_worker/__init__.py`): one line per name,
which type checkers read as a re-export and from which `__all__`, `dir()` and the lazy loader are
read, so that none of them can name what the others do not."""

import ast
import importlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import interaction_worker

SOURCE = Path(interaction_worker.__file__)


def table() -> list[tuple[str, str, str | None]]:
    """(module, name, alias) for each line of the `TYPE_CHECKING` block, as a type checker reads it."""
    lines: list[tuple[str, str, str | None]] = []
    for node in ast.parse(SOURCE.read_text(encoding="utf-8")).body:
        if (
            isinstance(node, ast.If)
            and ast.unparse(node.test) == "typing.TYPE_CHECKING"
        ):
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
                assert statement.level == 1, ast.unparse(statement)
                lines += [
                    (f".{statement.module}", alias.name, alias.asname)
                    for alias in statement.names
                ]
    return lines


def test_each_public_name_is_one_re_export_in_the_table() -> None:
    # `X as X` is what makes a type checker (mypy strict, pyright) export X from the package.
    assert [line for line in table() if line[1] != line[2]] == []
    names = [name for _, name, _ in table()]
    assert sorted({name for name in names if names.count(name) > 1}) == []


def test_all_dir_and_the_loader_serve_the_table_and_only_it() -> None:
    names = {name for _, name, _ in table()}
    assert len(interaction_worker.__all__) == len(names)
    assert set(interaction_worker.__all__) == names
    public = {name for name in dir(interaction_worker) if not name.startswith("_")}
    assert public == names
    with pytest.raises(AttributeError, match="has no attribute 'FlowStep'"):
        # Internal (interaction_worker.flows has it); mypy refuses the name as the loader does.
        interaction_worker.FlowStep  # type: ignore[attr-defined]  # noqa: B018


@pytest.mark.parametrize(("module", "name"), [line[:2] for line in table()])
def test_every_public_name_is_its_modules_own(module: str, name: str) -> None:
    defined = getattr(importlib.import_module(module, "interaction_worker"), name)
    assert getattr(interaction_worker, name) is defined


def test_importing_the_package_imports_none_of_its_modules() -> None:
    # Every `interaction_worker.*` import, the pytest plugin's and each CLI command's, pays for this.
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, interaction_worker; print(*sorted(m for m in sys.modules"
            " if m.partition('.')[0] in {'interaction_worker', 'ast', 'pydantic', 'nats'}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.split() == ["interaction_worker"]


def test_the_public_names_are_served_from_a_zip_import_too(tmp_path: Path) -> None:
    # A package imported from a zip has no file of its own to open: the table is read through it.
    archive = tmp_path / "package.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in SOURCE.parent.rglob("*.py"):
            zipped.write(path, path.relative_to(SOURCE.parent.parent).as_posix())
    served = subprocess.run(
        [
            sys.executable,
            "-c",
            "import interaction_worker as i; print(i.__file__); print(len(i.__all__), i.ToolCall.__name__)",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(archive)},
    )
    origin, names = served.stdout.splitlines()
    assert origin.startswith(str(archive))
    assert names == f"{len(table())} ToolCall"
