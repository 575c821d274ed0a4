"""The command line: `interaction-worker run | call | tools | mcp | deliver | schema | check-config`.

Output is JSON, one object per line (a table for `tools` on a terminal). Exit codes: 0 success; 1 a
failed call (an error reply, or a result or receipt whose status is not success/accepted) or no
server; 2 bad usage or configuration; 141 when the reader of stdout went away. Errors are one line
on stderr, without a traceback unless `--debug`.
"""

from .main import main

__all__ = ["main"]
