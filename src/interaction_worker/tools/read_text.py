"""`read_text`: the seed's example tool, one workspace-relative UTF-8 text file under the sandbox's `read`."""

import asyncio
import os
import stat
from collections.abc import Mapping
from typing import Any

from ..contracts import is_safe_message
from ..errors import ConfigurationError, PermissionDenied
from ..nodes import Sandbox, ToolContext
from ._arguments import MISSING, exact_keys, workspace_path


def _failed(code: str, message: str, fallback: str | None = None) -> dict[str, Any]:
    # The path is validated and relative, yet a name such as `a /b` or `sk-1` would still read as a
    # path or a secret: such a message falls back to one without it.
    if fallback is not None and not is_safe_message(message):
        message = fallback
    return {"status": "failed", "error": {"code": code, "message": message}}


def _not_found(path: str) -> dict[str, Any]:
    return _failed("FILE_NOT_FOUND", f"File not found: {path}", "File not found")


def _not_a_file(path: str) -> dict[str, Any]:
    return _failed("NOT_A_FILE", f"Not a file: {path}", "Not a file")


def _read_failed() -> dict[str, Any]:
    # The OS refused it (when not root) or the disk failed: never the exception's text.
    return _failed("READ_FAILED", "File could not be read")


def _stat(sandbox: Sandbox, path: str) -> os.stat_result | None:
    """The file's status, or None when it does not exist; the sandbox refuses paths outside."""
    target = sandbox.resolve(path)
    try:
        return os.stat(target)
    except (FileNotFoundError, NotADirectoryError):
        return None


class ReadTextTool:
    """Read one workspace text file: a relative POSIX path, UTF-8, at most `max_bytes` bytes.

    The sandbox grants `read` and refuses paths (symlinks included) that lead outside the workspace;
    a missing file, a directory, a large file or bytes that are not UTF-8 are failed results.
    """

    name = "read_text"
    description = "Read a workspace text file"
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "path": {
                "type": "string",
                "description": "The UTF-8 text file to read; relative to the workspace, "
                "without `..`",
            }
        },
        "required": ["path"],
    }
    effects = ("read",)
    requires_approval = False
    idempotent = True

    def __init__(self, *, max_bytes: int = 1_048_576) -> None:
        if (
            isinstance(max_bytes, bool)
            or not isinstance(max_bytes, int)
            or max_bytes < 1
        ):
            raise ConfigurationError("read_text max_bytes must be a positive integer")
        self.max_bytes = max_bytes

    def validate(self, arguments: dict[str, Any]) -> None:
        self._path(arguments)

    async def execute(
        self, arguments: dict[str, Any], context: ToolContext
    ) -> dict[str, Any]:
        path = self._path(arguments)
        sandbox = context.sandbox
        # Asked before the file is looked at, as the sandbox's own `read_text` does: without `read`,
        # a failed result would still tell whether the file exists.
        if not sandbox.read:
            raise PermissionDenied("Permission denied: filesystem:read")
        try:
            info = await asyncio.to_thread(_stat, sandbox, path)
        except OSError:
            return _read_failed()
        if info is None:
            return _not_found(path)
        if not stat.S_ISREG(info.st_mode):
            return _not_a_file(path)
        if info.st_size > self.max_bytes:
            return self._too_large()
        try:
            text = await sandbox.read_text(path)
        except (FileNotFoundError, NotADirectoryError):
            return _not_found(path)  # removed since it was looked at
        except IsADirectoryError:
            return _not_a_file(path)
        except UnicodeDecodeError:
            return _failed("NOT_UTF8", "File is not UTF-8 text")
        except OSError:
            return _read_failed()
        # The file may have grown since it was looked at.
        if len(text.encode("utf-8")) > self.max_bytes:
            return self._too_large()
        return {"status": "success", "content": text}

    def _too_large(self) -> dict[str, Any]:
        return _failed("FILE_TOO_LARGE", f"File is larger than {self.max_bytes} bytes")

    @staticmethod
    def _path(arguments: dict[str, Any]) -> str:
        exact_keys(arguments, ("path",), "Unexpected read_text argument")
        return workspace_path(arguments.get("path", MISSING), "path")
