"""The 14 read-only commands as tools (reference section 7), run by the sandbox's executor.

Where the reference's executor throws, the result says what happened (docs/configuration.md,
`tools.commands`): a timeout is `status: "timeout"` with COMMAND_TIMEOUT, a program missing on the
machine is `failed` with COMMAND_UNAVAILABLE, and output the executor stopped at its limit is a
truncated `success` with `exitCode: null` (our own kill is never COMMAND_EXIT_NONZERO).

A command's time is bounded by its executor's timeout (`tools.commands.timeout`) alone: the tools
declare `bounds_own_time`, so the worker's `tool_timeout`, which governs the other tools
(docs/configuration.md 1), is not armed for them.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from ..nodes import CommandResult, ToolContext, ToolRegistry
from ._bounded import bounded
from ._read_only_specs import SPECS, ReadOnlyCommandSpec

READ_ONLY_COMMANDS: tuple[str, ...] = tuple(spec.name for spec in SPECS)


def _option(value: object, name: str, maximum: int) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= maximum
    ):
        raise ConfigurationError(f"{name} must be an integer from 1 to {maximum}")
    return value


@dataclass(frozen=True)
class CommandLimits:
    """How much of a command's output a result keeps (reference section 7.1)."""

    max_entries: int = 1_000
    max_output_bytes: int = 65_536
    max_error_bytes: int = 8_192

    def __post_init__(self) -> None:
        _option(self.max_entries, "max_entries", 10_000)
        _option(self.max_output_bytes, "max_output_bytes", 1_048_576)
        _option(self.max_error_bytes, "max_error_bytes", 65_536)


class ReadOnlyCommandTool:
    """One read-only command: its arguments become a fixed argv, run by the sandbox's executor.

    The workspace paths in the argv must resolve inside the workspace and be no protected path
    (PERMISSION_DENIED before anything runs, beyond the reference); a command that walks below them
    is told to skip the protected entries it would meet (docs/tools.md). Declared idempotent: a
    ledger may run it again.
    """

    effects = ("read", "execute")
    requires_approval = False
    idempotent = True
    bounds_own_time = True  # the executor's timeout ends every run (COMMAND_TIMEOUT)

    def __init__(self, spec: ReadOnlyCommandSpec, limits: CommandLimits) -> None:
        self.name = spec.name
        self.description = spec.description
        self.input_schema: Mapping[str, Any] = spec.input_schema
        self.limits = limits
        self._build = spec.build

    def __repr__(self) -> str:
        return f"ReadOnlyCommandTool({self.name!r}, {self.limits!r})"

    def validate(self, arguments: dict[str, Any]) -> None:
        self._build(arguments)

    async def execute(
        self, arguments: dict[str, Any], context: ToolContext
    ) -> dict[str, Any]:
        line = self._build(arguments)
        args = line.args
        if line.descent is not None:
            try:
                args = await context.sandbox.skip_protected(line.descent, args)
            except TimeoutError:
                result = CommandResult("", "", None, timed_out=True)
                return command_outcome(self.name, args, result, self.limits)
        result = await context.sandbox.run(self.name, args, paths=line.paths)
        return command_outcome(self.name, args, result, self.limits)


def read_only_command_tools(
    *,
    max_entries: int = 1_000,
    max_output_bytes: int = 65_536,
    max_error_bytes: int = 8_192,
) -> tuple[ReadOnlyCommandTool, ...]:
    """The 14 tools, in the reference's order: grep ls cat find head tail wc sort uniq cut stat
    file du pwd. They run only in a sandbox that grants `execute` and has an executor.

    Raises:
        ConfigurationError: a limit is out of its range (`max_entries` 1..10000,
            `max_output_bytes` 1..1048576, `max_error_bytes` 1..65536).
    """
    limits = CommandLimits(max_entries, max_output_bytes, max_error_bytes)
    return tuple(ReadOnlyCommandTool(spec, limits) for spec in SPECS)


def command_outcome(
    command: str, args: Sequence[str], result: CommandResult, limits: CommandLimits
) -> dict[str, Any]:
    """The tool's result: bounded output, `structuredContent`, and the status the ending gives."""
    stdout = bounded(result.stdout, limits.max_output_bytes, limits.max_entries)
    stderr = bounded(result.stderr, limits.max_error_bytes, limits.max_entries)
    structured = {
        "command": command,
        "args": list(args),
        "stdout": stdout.value,
        "stderr": stderr.value,
        "exitCode": result.exit_code,
        "truncated": stdout.truncated or stderr.truncated or result.truncated,
    }
    if result.unavailable:
        return {
            "status": "failed",
            "structuredContent": structured,
            "error": {
                "code": "COMMAND_UNAVAILABLE",
                "message": f"Command is not available on this machine: {command}",
            },
        }
    outcome: dict[str, Any] = {"content": stdout.value, "structuredContent": structured}
    if result.timed_out:
        error = {"code": "COMMAND_TIMEOUT", "message": "Command timed out"}
        return {"status": "timeout", **outcome, "error": error}
    if result.exit_code == 0 or (result.truncated and result.exit_code is None):
        return {"status": "success", **outcome}
    code = "null" if result.exit_code is None else result.exit_code
    error = {
        "code": "COMMAND_EXIT_NONZERO",
        "message": f"Command exited with code {code}",
    }
    return {"status": "failed", **outcome, "error": error}


def check_command_limits(registry: ToolRegistry, max_payload: int) -> None:
    """Refuse command limits whose results could never fit the server's `max_payload`
    (wire.md section 1), at start, naming the keys.

    A result carries stdout twice (`content` and `structuredContent.stdout`) and stderr once, so
    it may need at least 2 × max_output_bytes + max_error_bytes bytes; what is published is still
    checked at publish time (RESULT_TOO_LARGE).
    """
    seen = {
        tool.limits
        for tool in map(registry.get, registry.names())
        if isinstance(tool, ReadOnlyCommandTool)
    }
    for limits in sorted(seen, key=lambda item: item.max_output_bytes):
        needed = 2 * limits.max_output_bytes + limits.max_error_bytes
        if needed > max_payload:
            raise ConfigurationError(
                f"tools.commands.max_output_bytes ({limits.max_output_bytes}) and "
                f"tools.commands.max_error_bytes ({limits.max_error_bytes}) do not fit the "
                f"server's max_payload ({max_payload} bytes): a command result holds stdout "
                f"twice and stderr once, up to {needed} bytes"
            )
