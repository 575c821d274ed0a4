"""What the commands print: JSON lines for scripts, a table for a person at a terminal."""

import json
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import Any


class UsageError(Exception):
    """Bad usage or configuration (exit code 2)."""


def emit(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False), flush=True)


def is_terminal() -> bool:
    return sys.stdout.isatty()


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell; the last one wrapped to the terminal's width."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    indent = sum(w + 2 for w in widths[:-1])
    room = max(shutil.get_terminal_size().columns - indent, 30)
    lines = []
    for row in (header, *rows):
        cells = [cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=False)]
        wrapped = textwrap.wrap(row[-1], room) or [""]
        lines.append("  ".join([*cells, wrapped[0]]).rstrip())
        lines.extend(" " * indent + more for more in wrapped[1:])
    return "\n".join(lines)
