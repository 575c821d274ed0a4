"""The address space a command's process may map (`tools.commands.max_memory`, docs/configuration.md).

The 14 programs run in about 20 MB (`file` needs more than 16 MiB for its database), while one `uniq`,
`sort` or `tail` on a large sparse file or a device grows by gigabytes within its timeout. The limit is
`RLIMIT_AS`, set in the child before the program runs, without a shell:

- through util-linux's `prlimit`, found in the executor's path, which sets it and then executes the
  program under the name asked for (`prlimit --as=N -- cat …`). On asyncio's loop the child is then
  still started with `vfork`: measured on a loaded 2-core machine, 3 to 12 ms a command, where
- a `preexec_fn` (the fallback, where there is no `prlimit`) makes Python `fork` the whole worker:
  30 to 50 ms. Python documents `preexec_fn` as unsafe in a process with threads, for Python code
  that may wait on a lock another thread held at fork time; the one given here is a
  `functools.partial` of `resource.setrlimit`, only C. uvloop forks in both cases.

A lower hard limit the worker runs under is kept: the child may not raise it.
"""

import functools
import resource
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import ConfigurationError

DEFAULT_MAX_MEMORY = 256 * 1024 * 1024
MIN_MAX_MEMORY = 64 * 1024 * 1024
MAX_MAX_MEMORY = 1024**4


def check_max_memory(value: object) -> int | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not MIN_MAX_MEMORY <= value <= MAX_MAX_MEMORY
    ):
        raise ConfigurationError(
            f"max_memory must be an integer from {MIN_MAX_MEMORY} to {MAX_MAX_MEMORY} "
            "bytes, or None"
        )
    return value


@dataclass(frozen=True)
class Launch:
    """How to start a program: its argv, the file executed, and what the child runs before."""

    argv: list[str]
    program: str
    preexec_fn: Callable[[], None] | None = None


class MemoryLimit:
    """Starts commands under `max_memory` bytes of address space (None: no limit)."""

    def __init__(self, max_memory: int | None, path: str) -> None:
        self.max_memory = check_max_memory(max_memory)
        self._prlimit = shutil.which("prlimit", path=path)

    def launch(self, command: str, args: Sequence[str], program: str) -> Launch:
        """`program` (found for `command`) run as `command args…` under the limit."""
        if self.max_memory is None:
            return Launch([command, *args], program)
        limit = self.max_memory
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        if self._prlimit is not None:
            # It looks `command` up in the child's PATH, the executor's path: `program` again.
            argv = ["prlimit", f"--as={limit}", "--", command, *args]
            return Launch(argv, self._prlimit)
        limit_memory = functools.partial(
            resource.setrlimit, resource.RLIMIT_AS, (limit, limit)
        )
        return Launch([command, *args], program, limit_memory)
