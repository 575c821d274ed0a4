"""Every reference to a document resolves to the project's own: a document named in a comment, a
docstring, a configuration file or a page (`docs/wire.md 7`, `configuration.md`, `[tools](tools.md)`,
`docs/operations.md, "Alerts"`) exists, and so do the section it cites (a numbered heading, or a
heading or run-in title of that name) and a link's anchor.

Python files are read through their comments and docstrings, where references live; their other
string literals are data (a file a test writes), except for a reference that cites a section or the
docs/ folder, which data never does.
"""

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SCANNED = ("src", "tests", "examples", "deploy", "bench", "docs")
TEXT_SUFFIXES = {".md", ".yaml", ".yml", ".toml", ".conf", ".html", ".js", ".css"}
# Data, not documentation: the workspace a recorded example reads, installed npm packages.
SKIPPED = (
    "examples/replay/workspace",
    "examples/ui/node_modules",
    "tests/mcp/npm",
    "tests/mcp/conformance/node_modules",
)

# A document: `docs/wire.md`, `../README.md`, `wire.md`, any relative path; not part of a URL.
_DOCUMENT = r"(?<![\w./:-])(?P<path>(?:[\w.-]+/)*[\w-]+\.md)(?![\w/])"
# What may follow it: an anchor (in a link), then a section: numbers (`7`, `1.1`, `sections 2
# and 9`, `3-4`, `§1`) or a quoted title (`, "Alerts"`).
_NUMBERS = r"\d+(?:\.\d+)*(?:(?:\s*[-–,]\s*|\s+and\s+)\d+(?:\.\d+)*)*"
_REFERENCE = re.compile(
    _DOCUMENT
    + r"(?P<anchor>#[\w-]+)?"
    + r"(?:\)?(?:,?\s+(?:sections?\s+|§\s*)?|\s*§\s*)(?P<numbers>"
    + _NUMBERS
    + r")(?![\w.])"
    + r'|\)?,\s*"(?P<title>[^"\n]{1,80})")?'
)
_NUMBER = re.compile(r"\d+(?:\.\d+)*")
_RANGE = re.compile(r"(\d+)\s*[-–]\s*(\d+)")
_HEADING = re.compile(r"^#{1,6}\s+(?P<text>.+?)\s*#*\s*$", re.MULTILINE)
_HEADING_NUMBER = re.compile(r"(\d+(?:\.\d+)*)\.?\s")
_RUN_IN = re.compile(r"\*\*(?P<text>[^*\n]+?)\.?\*\*")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Reference:
    where: str  # file:line
    path: str
    anchor: str | None
    numbers: str | None
    title: str | None


def references(
    text: str, where: str, *, qualified_only: bool = False
) -> Iterator[Reference]:
    """The document references in `text`; with `qualified_only`, only those that cite a section or
    the docs/ folder (how a string that is not documentation can still be checked)."""
    flat = re.sub(r"\s+", " ", text)
    for match in _REFERENCE.finditer(flat):
        reference = Reference(
            where,
            match["path"],
            match["anchor"],
            match["numbers"],
            match["title"],
        )
        if qualified_only and not (
            reference.numbers or reference.title or reference.path.startswith("docs/")
        ):
            continue
        yield reference


_OWN_SECTION = re.compile(
    r"(?:\bsections?\s+|§\s*)(?P<numbers>" + _NUMBERS + r")(?![\w.])"
)
_AFTER_DOCUMENT = re.compile(r"\.md(?:#[\w-]+)?\)?,?\s*$")


def own_sections(
    text: str, where: str, name: str, before: str = ""
) -> Iterator[Reference]:
    """In a page, `section 4` or `§2` without a document before it (in `text`, or in `before`, the
    text that precedes it) cites the page's own section."""
    before = re.sub(r"\s+", " ", before) + " "
    flat = before + re.sub(r"\s+", " ", text)
    for match in _OWN_SECTION.finditer(flat, len(before)):
        if _AFTER_DOCUMENT.search(flat, 0, match.start()) is None:
            yield Reference(where, name, None, match["numbers"], None)


@dataclass(frozen=True)
class Sections:
    numbers: frozenset[str]
    titles: frozenset[str]
    anchors: frozenset[str]


@cache
def sections(document: Path) -> Sections:
    text = _FENCE.sub("", document.read_text(encoding="utf-8"))
    numbers, titles, anchors = set(), set(), set()
    for heading in _HEADING.finditer(text):
        title = heading["text"]
        number = _HEADING_NUMBER.match(title)
        if number is not None:
            numbers.add(number[1])
            title = title[number.end() :]
        titles.add(title.strip().strip("`"))
        anchors.add(_slug(heading["text"]))
    titles.update(m["text"].strip() for m in _RUN_IN.finditer(text))
    return Sections(frozenset(numbers), frozenset(titles), frozenset(anchors))


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def resolve(path: str, source: Path) -> Path | None:
    """The file a reference in `source` names: beside it, else under docs/ (a bare name), else from
    the root."""
    if path.startswith("docs/"):
        candidates = [ROOT / path]
    elif "/" in path:
        candidates = [source.parent / path, ROOT / path]
    else:
        candidates = [source.parent / path, DOCS / path, ROOT / path]
    for candidate in candidates:
        # Exact case: a name that differs only in case is another document on Linux.
        if candidate.resolve().exists() and candidate.resolve().name == Path(path).name:
            return candidate.resolve()
    return None


def problems(reference: Reference, source: Path) -> list[str]:
    document = resolve(reference.path, source)
    if document is None:
        return [f"{reference.where}: {reference.path} does not exist"]
    # A document beside the checkout is not the project's: a clone elsewhere would not have it.
    if not document.is_relative_to(ROOT):
        return [f"{reference.where}: {reference.path} is outside the project"]
    found = sections(document)
    wrong = []
    if reference.numbers is not None:
        for number in _cited(reference.numbers):
            if number not in found.numbers:
                wrong.append(
                    f"{reference.where}: {reference.path} has no section {number}"
                )
    if reference.title is not None and reference.title not in found.titles:
        wrong.append(
            f"{reference.where}: {reference.path} has no section {reference.title!r}"
        )
    if reference.anchor is not None and reference.anchor[1:] not in found.anchors:
        wrong.append(
            f"{reference.where}: {reference.path} has no anchor {reference.anchor}"
        )
    return wrong


def _cited(numbers: str) -> list[str]:
    """`2 and 9` → 2, 9; `3-4` → 3, 4."""
    return _NUMBER.findall(_RANGE.sub(lambda m: _span(m[1], m[2]), numbers))


def _span(first: str, last: str) -> str:
    return " ".join(str(n) for n in range(int(first), int(last) + 1))


def scanned_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "Makefile", ROOT / "pyproject.toml"]
    files += sorted(path for path in (ROOT / ".ci").glob("*") if path.is_file())
    for folder in SCANNED:
        for directory, subdirectories, names in os.walk(ROOT / folder):
            relative = Path(directory).relative_to(ROOT).as_posix()
            if relative.startswith(SKIPPED):
                subdirectories.clear()
                continue
            files.extend(
                Path(directory, name)
                for name in sorted(names)
                if Path(name).suffix in TEXT_SUFFIXES | {".py"}
                or name.startswith("Dockerfile")
            )
    return files


def file_references(path: Path) -> Iterator[Reference]:
    relative = path.relative_to(ROOT).as_posix()
    text = path.read_text(encoding="utf-8")
    if ".md" not in text and path.suffix != ".md":
        return
    if path.suffix != ".py":
        lines = _lines(text)
        for number, line in enumerate(lines, start=1):
            following = lines[number] if number < len(lines) else ""
            joined = (
                f"{line} {following}"  # a reference cut by a line break, seen whole
            )
            if ".md" in joined:
                yield from references(joined, f"{relative}:{number}")
            if path.suffix == ".md":
                before = lines[number - 2] if number > 1 else ""
                yield from own_sections(
                    joined, f"{relative}:{number}", path.name, before
                )
        return
    yield from python_references(text, relative)


def python_references(text: str, relative: str) -> Iterator[Reference]:
    for documentation, value, offset in _python_texts(text):
        if ".md" in value:
            where = f"{relative}:{text.count(chr(10), 0, offset) + 1}"
            yield from references(value, where, qualified_only=not documentation)


def _lines(text: str) -> list[str]:
    """The lines without their comment markers (a reference seen in two joined lines is checked
    twice, harmlessly)."""
    return [re.sub(r"^\s*(#|//|\*)\s?", "", line) for line in text.splitlines()]


_TRIPLE = re.compile(r"(\"\"\"|''').*?\1", re.DOTALL)
_STRING = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'")


def _python_texts(text: str) -> Iterator[tuple[bool, str, int]]:
    """(documentation, text, offset): the triple-quoted strings (docstrings, in this code base) and
    the comments, consecutive comment lines joined, as documentation; the other string literals as
    data. Read with regular expressions, not the tokenizer, which would cost this test seconds."""
    last = 0
    for match in _TRIPLE.finditer(text):
        yield from _code_texts(text, last, match.start())
        yield True, match[0], match.start()
        last = match.end()
    yield from _code_texts(text, last, len(text))


def _code_texts(text: str, start: int, end: int) -> Iterator[tuple[bool, str, int]]:
    block: list[str] = []
    block_start = offset = start
    for line in text[start:end].splitlines(keepends=True):
        code, comment = _split_comment(line) if "#" in line else (line, None)
        if ".md" in code:
            for string in _STRING.finditer(code):
                yield False, string[0], offset + string.start()
        if block and (comment is None or code.strip()):
            yield True, " ".join(block), block_start
            block = []
        if comment is not None:
            if not block:
                block_start = offset
            block.append(comment.strip())
            if code.strip():  # a comment after code stands alone
                yield True, " ".join(block), block_start
                block = []
        offset += len(line)
    if block:
        yield True, " ".join(block), block_start


def _split_comment(line: str) -> tuple[str, str | None]:
    """The code and the comment of a line: the first `#` not inside a one-line string."""
    index = line.find("#")
    while index != -1:
        if not (line.count('"', 0, index) % 2 or line.count("'", 0, index) % 2):
            return line[:index], line[index + 1 :]
        index = line.find("#", index + 1)
    return line, None


def test_every_reference_to_a_document_resolves_to_the_project_s_own() -> None:
    wrong = [
        problem
        for path in scanned_files()
        if path != Path(__file__).resolve()
        for reference in file_references(path)
        for problem in problems(reference, path)
    ]
    assert wrong == []


def test_every_markdown_link_to_a_local_file_resolves() -> None:
    link = re.compile(r"\]\((?P<target>[^)\s#]+)(?:#[^)\s]*)?\)")
    wrong = []
    for path in [
        ROOT / "README.md",
        *sorted(DOCS.glob("*.md")),
        *ROOT.glob("examples/**/*.md"),
    ]:
        if path.relative_to(ROOT).as_posix().startswith(SKIPPED):
            continue
        for match in link.finditer(path.read_text(encoding="utf-8")):
            target = match["target"]
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            if not (path.parent / target).exists():
                wrong.append(f"{path.relative_to(ROOT)}: {target}")
    assert wrong == []


@pytest.mark.parametrize(
    ("text", "found"),
    [
        pytest.param("(docs/wire.md 7)", [], id="section"),
        pytest.param("wire.md sections 2 and 9", [], id="sections"),
        pytest.param("replay.md 3-4", [], id="range"),
        pytest.param('docs/operations.md, "Alerts"', [], id="title"),
        pytest.param("[guarantees](guarantees.md)", [], id="link"),
        pytest.param("wire.md 12", ["has no section 12"], id="no-such-section"),
        pytest.param("wire.md 8.3", ["has no section 8.3"], id="no-such-subsection"),
        pytest.param("docs/flows.md 9", ["has no section 9"], id="unnumbered"),
        pytest.param(
            'docs/operations.md, "Nowhere"', ["has no section"], id="no-title"
        ),
        pytest.param("(operat" + "e.md 3)", ["does not exist"], id="spec-file"),
        pytest.param("docs/confi" + "g.md", ["does not exist"], id="no-such-doc"),
        pytest.param("[x](tools.md#nowhere)", ["has no anchor"], id="anchor"),
        pytest.param("examples/replay/README.md", [], id="relative-path"),
        pytest.param(
            "../elsewhere/confi" + "g.md 3", ["does not exist"], id="missing-outside"
        ),
    ],
)
def test_a_reference_is_checked_for_its_document_and_section(
    text: str, found: list[str]
) -> None:
    source = ROOT / "src" / "interaction_worker" / "worker.py"
    wrong = [
        problem
        for reference in references(text, "x")
        for problem in problems(reference, source)
    ]
    assert len(wrong) == len(found) and all(
        part in problem for part, problem in zip(found, wrong, strict=True)
    ), wrong


def test_a_document_outside_the_project_is_refused_even_when_it_exists(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "notes.md"
    outside.write_text("# 3. Somewhere\n", encoding="utf-8")
    source = ROOT / "src" / "interaction_worker" / "worker.py"
    relative = os.path.relpath(outside, source.parent)
    wrong = [
        problem
        for reference in references(f"{relative} 3", "x")
        for problem in problems(reference, source)
    ]
    assert len(wrong) == 1 and "is outside the project" in wrong[0], wrong


def test_a_python_string_is_data_and_a_docstring_or_comment_documentation() -> None:
    source = (
        '"""See confi' + 'g.md."""\n'
        'path = tmp / "notes.md"  # as in operat' + "e.md\n"
        "# wire.md\n# 12\n"
        'help = "docs/wire.md 7"\n'
    )
    found = sorted(
        (r.where, r.path, r.numbers) for r in python_references(source, "m.py")
    )
    assert found == [
        ("m.py:1", "confi" + "g.md", None),
        ("m.py:2", "operat" + "e.md", None),
        ("m.py:3", "wire.md", "12"),
        ("m.py:5", "docs/wire.md", "7"),
    ]


def test_a_page_s_section_without_a_document_is_its_own() -> None:
    page = DOCS / "wire.md"
    cited = list(own_sections("as in §2, and section 12", "x", "wire.md"))
    cut = list(own_sections("section 12", "x", "wire.md", before="see docs/flows.md"))

    assert [r.numbers for r in cited] == ["2", "12"]
    assert [problems(r, page) for r in cited] == [[], ["x: wire.md has no section 12"]]
    # The section of flows.md, cited on the line before.
    assert cut == []
