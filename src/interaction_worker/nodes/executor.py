"""What the sandbox's `run` hands a command to (`CommandExecutor`), and what it answers."""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class CommandResult:
    """What a command printed and how it ended.

    `exit_code` is None when the process did not exit by itself: the executor stopped it because
    stdout reached its limit (`truncated`) or it outlived its timeout (`timed_out`), or the program
    is not installed (`unavailable`). A process killed by a signal the executor did not send
    exits with 128 + the signal number, as in a shell.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    truncated: bool = False
    timed_out: bool = False
    unavailable: bool = False


class CommandExecutor(Protocol):
    """Runs one fixed program with separate arguments in the workspace, never through a shell.

    Cancellation (asyncio) must stop the program. A timeout, an output limit and a missing program
    are reported in the `CommandResult`, not raised.
    """

    async def run(
        self, command: str, args: Sequence[str], workspace: Path
    ) -> CommandResult: ...
