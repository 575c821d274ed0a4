"""Comparing a replayed outcome with the recorded one (replay.md 4).

Outcomes are compared as parsed JSON, leaf by leaf, so that a change is reported where it is
(`content.0.text`), once, rather than as two whole documents for a person to diff by eye. A value
present on one side only is reported at its own path with the other side left out (the wire's rule:
absent is omitted, never `null`, which is a value).

Volatile fields are left out of the comparison: the jetstream sink's `metadata.stream`,
`metadata.seq` and `metadata.duplicate`, at the root where that sink puts them (where a receipt was
stored, not what was delivered), and the caller's `--ignore` paths (dotted, `*` for any one key or
list index, from the root). Nothing else is: a key named `at` in a tool's result is the tool's
output, and a changed one is a difference (docs/replay.md). The worker's own outcomes carry no
timestamp; a dead letter's `receivedAt` never meets this comparison, a refusal being matched by its
code alone.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .report import MISSING

VOLATILE_PATHS: Final = ("metadata.stream", "metadata.seq", "metadata.duplicate")

NO_RECORDED_OUTCOME: Final = "no recorded outcome"


@dataclass(frozen=True, slots=True)
class Outcome:
    """One side of a comparison: a result document (a result, receipt or command reply), or a
    refusal with its error code (an error reply, or a recorded dead letter)."""

    document: Any
    error_code: str | None = None


Path = tuple[str, ...]
# One difference as the comparison finds it: its path, the two values, and a reason for a path "".
Found = tuple[str, Any, Any, str | None]


class Ignored:
    """The paths left out of a comparison: the volatile ones and the caller's.

    Raises:
        ValueError: a path with an empty part (`a..b`, `.a`, ``).
    """

    def __init__(self, paths: Iterable[str] = ()) -> None:
        patterns = []
        for text in (*VOLATILE_PATHS, *paths):
            tokens = tuple(text.split("."))
            if not all(tokens):
                raise ValueError(f"{text!r} is not a dotted path such as metadata.*.at")
            patterns.append(tokens)
        self._patterns = tuple(patterns)

    def __contains__(self, path: Path) -> bool:
        return any(
            len(pattern) == len(path)
            and all(p in ("*", token) for p, token in zip(pattern, path, strict=True))
            for pattern in self._patterns
        )


def compare(recorded: Outcome, replayed: Outcome, ignored: Ignored) -> list[Found]:
    """(path, recorded, replayed, reason) of each difference; none when the outcomes are the same.

    A recorded refusal is matched by its error code alone: the message of an error may be worded
    anew by a later version, the code is the contract."""
    if recorded.error_code is not None:
        if replayed.error_code == recorded.error_code:
            return []
        reason = (
            "refused with another code"
            if replayed.error_code is not None
            else "a result where the recording has a refusal"
        )
        return [_whole(recorded, replayed, ignored, reason)]
    if replayed.error_code is not None:
        reason = "a refusal where the recording has a result"
        return [_whole(recorded, replayed, ignored, reason)]
    found: list[Found] = []
    _walk(recorded.document, replayed.document, (), ignored, found)
    return found


def _whole(
    recorded: Outcome, replayed: Outcome, ignored: Ignored, reason: str
) -> Found:
    return (
        "",
        _pruned(recorded.document, (), ignored),
        _pruned(replayed.document, (), ignored),
        reason,
    )


def _walk(
    recorded: Any,
    replayed: Any,
    path: Path,
    ignored: Ignored,
    found: list[Found],
) -> None:
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        keys = [*recorded, *(k for k in replayed if k not in recorded)]
        children = [
            (key, recorded.get(key, MISSING), replayed.get(key, MISSING))
            for key in keys
        ]
    elif isinstance(recorded, list) and isinstance(replayed, list):
        longest = max(len(recorded), len(replayed))
        children = [
            (
                str(i),
                recorded[i] if i < len(recorded) else MISSING,
                replayed[i] if i < len(replayed) else MISSING,
            )
            for i in range(longest)
        ]
    else:
        if not _same(recorded, replayed):
            found.append(
                (
                    ".".join(path),
                    _pruned(recorded, path, ignored),
                    _pruned(replayed, path, ignored),
                    None,
                )
            )
        return
    for token, left, right in children:
        child = (*path, token)
        if child in ignored:
            continue
        if left is MISSING or right is MISSING:
            found.append(
                (
                    ".".join(child),
                    _pruned(left, child, ignored),
                    _pruned(right, child, ignored),
                    None,
                )
            )
        else:
            _walk(left, right, child, ignored, found)


def _same(left: Any, right: Any) -> bool:
    # JSON's true is not the number 1, though Python's True == 1; 1 and 1.0 are one JSON number.
    if isinstance(left, bool) or isinstance(right, bool):
        return left is right
    return bool(left == right)


def _pruned(value: Any, path: Path, ignored: Ignored) -> Any:
    """`value` as shown in a difference: without the ignored fields inside it."""
    if isinstance(value, dict):
        return {
            k: _pruned(v, (*path, k), ignored)
            for k, v in value.items()
            if (*path, k) not in ignored
        }
    if isinstance(value, list):
        return [
            _pruned(v, (*path, str(i)), ignored)
            for i, v in enumerate(value)
            if (*path, str(i)) not in ignored
        ]
    return value


def restore_ids(document: Any, ids: Mapping[str, str]) -> Any:
    """`document` with every string value that is a key of `ids` replaced by its value: a replayed
    outcome's suffixed ids put back to the recorded ones, so a worker that behaves the same compares
    identical. Keys are left alone; a value that merely contains an id is too."""
    if not ids:
        return document
    if isinstance(document, str):
        return ids.get(document, document)
    if isinstance(document, dict):
        return {k: restore_ids(v, ids) for k, v in document.items()}
    if isinstance(document, list):
        return [restore_ids(v, ids) for v in document]
    return document
