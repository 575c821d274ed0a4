"""The directories a configuration names that must already exist: checked when `run` starts and by
`check-config`, not at the first call that needs them (docs/configuration.md 1).

The workspace is where every file tool and command runs, and an MCP server's `cwd` where its command
starts; neither is created (a typo would otherwise serve an empty directory). The data directory and
a file sink's directory are created when missing, so they are not checked here.
"""

import errno
from pathlib import Path

from .model import Settings


def directory_problem(key: str, path: Path | None) -> str | None:
    """One line naming `key` when `path` is not a directory that can be entered; None when it is
    (or when nothing is configured). The path itself is not in the line: `check-config` prints it."""
    if path is None:
        return None
    try:
        is_directory = path.is_dir()
        if is_directory:
            next(
                path.iterdir(), None
            )  # a directory that cannot be listed is no workspace either
    except PermissionError:
        return f"{key} must be a directory the worker can read: permission denied"
    except OSError as error:
        if error.errno == errno.ENOTDIR:
            is_directory = False
        else:
            reason = (error.strerror or type(error).__name__).lower()
            return f"{key} must be a directory the worker can read: {reason}"
    if is_directory:
        return None
    if path.exists():
        return f"{key} must be a directory, not a file"
    return f"{key} must be an existing directory: nothing is there"


def directory_problems(workspace: Path | None, settings: Settings) -> list[str]:
    """The problems of the workspace served (the file's, or a code sandbox's) and of every MCP
    server's `cwd`, one line each."""
    problems = [directory_problem("workspace", workspace)]
    for name, server in settings.mcp.servers.items():
        problems.append(directory_problem(f"mcp.servers.{name}.cwd", server.cwd))
    return [problem for problem in problems if problem is not None]
