"""The two exceptions of the command protocol.

`CommandRejected` is the model's fault: a command that failed validation (its `code` says which step,
docs/commands.md section 2). `CommandDefinitionError` is the programmer's: a declaration or a binding
that cannot be compiled, raised before any command is received.
"""

from typing import Any, Final, Literal

from ._text import one_line

RejectionCode = Literal[
    "INVALID_COMMAND",
    "MISSING_COMMAND",
    "UNKNOWN_COMMAND",
    "MISSING_FIELD",
    "UNKNOWN_FIELD",
    "FOREIGN_FIELD",
    "CHECK_FAILED",
]

# In the order `receive` checks them: a value failing two steps reports the earlier one.
REJECTION_CODES: Final[tuple[RejectionCode, ...]] = (
    "INVALID_COMMAND",
    "MISSING_COMMAND",
    "UNKNOWN_COMMAND",
    "MISSING_FIELD",
    "UNKNOWN_FIELD",
    "FOREIGN_FIELD",
    "CHECK_FAILED",
)

MAX_MESSAGE_LENGTH: Final = 512


class CommandRejected(Exception):
    """A command failed validation.

    `message` is safe to show the model or send over the wire: one line, at most 512 characters, never
    a repr of the command. `path` is a JSON Pointer into the command (`""` for the whole command).
    Raised by a check or `refine`, it rejects the command as `CHECK_FAILED`.
    """

    def __init__(
        self,
        message: str,
        path: str | None = None,
        *,
        code: RejectionCode = "CHECK_FAILED",
    ) -> None:
        safe = one_line(str(message), MAX_MESSAGE_LENGTH)
        super().__init__(safe)
        self.code: RejectionCode = code
        self.message = safe
        self.path = "" if path is None else str(path)

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle as `cls(*args)`, which would drop the code and the path.
        return (type(self), (self.message, self.path), {"code": self.code})

    def __repr__(self) -> str:
        return f"CommandRejected(code={self.code!r}, message={self.message!r}, path={self.path!r})"


class CommandDefinitionError(ValueError):
    """A declaration or binding that cannot be compiled; the message names the command and the key."""

    def __init__(self, command: str | None, key: str, problem: str) -> None:
        where = f"command {command!r}: {key}" if command is not None else key
        super().__init__(f"{where}: {problem}")
        self.command = command
        self.key = key
        self.problem = problem

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.command, self.key, self.problem))
