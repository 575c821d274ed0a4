"""The argument helpers of the reference's read-only commands (section 7.2), shared by the built-in tools.

`MISSING` stands for an absent key, which the reference tells apart from `null` (a value, mostly refused).
"""

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ..contracts import js_trim
from ..contracts._text import utf16_length
from ..errors import InvalidInput


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()

MAX_TEXT_LENGTH = 1024  # UTF-16 code units, as JavaScript's `.length`
MAX_PATHS = 16
# The rooted forms of Node's `path.win32.isAbsolute` (a drive needs its separator): not `ntpath.isabs`,
# whose answer for rooted paths without a drive changed in Python 3.13.
_DRIVE = re.compile(r"[A-Za-z]:[\\/]")


def exact_keys(
    arguments: Mapping[str, Any], allowed: Iterable[str], message: str
) -> None:
    """Refuse any key that is not allowed (checked first in every tool)."""
    keys = set(allowed)
    if any(key not in keys for key in arguments):
        raise InvalidInput(message)


def text(value: object, name: str, *, required: bool = False) -> str | None:
    """A nonempty single-line string of at most 1,024 UTF-16 units, returned untrimmed."""
    if value is MISSING and not required:
        return None
    if (
        not isinstance(value, str)
        or not js_trim(value)
        or utf16_length(value) > MAX_TEXT_LENGTH
        or any(ch in value for ch in "\0\r\n")
    ):
        raise InvalidInput(f"{name} must be a nonempty single-line string")
    return value


def flag(value: object, name: str) -> bool:
    if value is MISSING:
        return False
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be boolean")
    return value


def workspace_path(value: object, name: str) -> str:
    """A workspace-relative POSIX path: not absolute, no backslash, no `..` or empty segment."""
    path = text(value, name, required=True)
    assert path is not None
    if (
        path[0] in "/\\"
        or _DRIVE.match(path)
        or "\\" in path
        or any(segment in ("", "..") for segment in path.split("/"))
    ):
        raise InvalidInput(f"{name} must be a workspace-relative POSIX path")
    return path


def relative_path(value: object, name: str, fallback: str | None = None) -> str:
    """The reference's `relativePath`: `workspace_path`, and a leading `-` gets `./` so that a
    program never reads the name as an option. Absent without a fallback, it is not a path."""
    if value is MISSING:
        if fallback is None:
            raise InvalidInput(f"{name} must be a workspace-relative POSIX path")
        path = fallback
    else:
        path = workspace_path(value, name)
    return f"./{path}" if path.startswith("-") else path


def paths(value: object) -> list[str]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_PATHS:
        raise InvalidInput(f"paths must contain 1 to {MAX_PATHS} paths")
    return [relative_path(item, f"paths[{index}]") for index, item in enumerate(value)]


def integer(value: object, name: str, fallback: int, minimum: int, maximum: int) -> int:
    """An integer in range; `2.0` is one, as in JavaScript, and `true` is not."""
    if value is MISSING:
        return fallback
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not minimum <= value <= maximum
    ):
        raise InvalidInput(f"{name} must be an integer from {minimum} to {maximum}")
    return value


def delimiter(value: object) -> str | None:
    """One code point (an astral character is one), not NUL, CR or LF."""
    if value is MISSING:
        return None
    if not isinstance(value, str) or len(value) != 1 or value in "\0\r\n":
        raise InvalidInput("delimiter must be one character")
    return value
