"""The report of a replay of requests (replay.md 4): its counts, its differences, and the
readable diff `assert_identical` fails a test with."""

import json
from dataclasses import dataclass, field
from typing import Any, Final

__tracebackhide__ = (
    True  # pytest shows the test's line, not this module's, when a replay differs
)


class _Missing:
    """The side of a difference where the value is absent."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


@dataclass(frozen=True, slots=True)
class Difference:
    """Where a replayed outcome differs from the recorded one.

    `path` is dotted with list indexes as numbers (`content.0.text`); `""` when the whole outcome
    differs in kind (`reason` then says how). `recorded` or `replayed` is `MISSING` where that side
    has no value."""

    seq: int
    subject: str
    id: str | None
    path: str
    recorded: Any = MISSING
    replayed: Any = MISSING
    reason: str | None = None

    def to_wire(self) -> dict[str, Any]:
        line: dict[str, Any] = {
            "seq": self.seq,
            "subject": self.subject,
            "id": self.id,
            "path": self.path,
        }
        if self.recorded is not MISSING:
            line["recorded"] = self.recorded
        if self.replayed is not MISSING:
            line["replayed"] = self.replayed
        if self.reason is not None:
            line["reason"] = self.reason
        return line


@dataclass(frozen=True, slots=True)
class FailedRequest:
    """A request that got no outcome (no reply in time, no worker): an error of the replay, not a
    difference of the worker."""

    seq: int
    subject: str
    id: str | None
    message: str


@dataclass(slots=True)
class ReplayReport:
    """What a replay of requests found; filled as the outcomes come in."""

    total: int
    identical: int = 0
    different: int = 0
    not_compared: int = 0
    differences: list[Difference] = field(default_factory=list)
    errors: list[FailedRequest] = field(default_factory=list)

    @property
    def done(self) -> int:
        """Requests finished so far, whatever their outcome."""
        return self.identical + self.different + self.not_compared + len(self.errors)

    @property
    def exit_code(self) -> int:
        return 0 if not self.differences and not self.errors else 1

    def summary(self) -> str:
        return (
            f"replayed {self.total} requests: {self.identical} identical, "
            f"{self.different} different, {self.not_compared} not compared, "
            f"{len(self.errors)} errors"
        )

    def assert_identical(self) -> None:
        """Raise `AssertionError` with every difference and error, one block each.

        Raises:
            AssertionError: the replay found a difference or an error.
        """
        if self.exit_code == 0:
            return
        blocks = [self.summary()]
        blocks.extend(_difference_block(d) for d in self.differences)
        blocks.extend(
            f"seq {e.seq} {e.subject} id {json.dumps(e.id)}: error: {e.message}"
            for e in self.errors
        )
        raise AssertionError("\n\n".join(blocks))


def _difference_block(difference: Difference) -> str:
    lines = [
        f"seq {difference.seq} {difference.subject} id {json.dumps(difference.id)} "
        f"path {difference.path or '(the whole outcome)'}"
        + (f": {difference.reason}" if difference.reason else "")
    ]
    for side, value in (
        ("recorded", difference.recorded),
        ("replayed", difference.replayed),
    ):
        if value is MISSING:
            lines.append(f"  {side}: (absent)")
            continue
        text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
        lines.append(f"  {side}:")
        lines.extend(f"    {line}" for line in text.splitlines())
    return "\n".join(lines)
