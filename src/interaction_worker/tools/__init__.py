"""Built-in tools: read_text, the 14 read-only commands and their executor, web search and Brave."""

from ._executor import SubprocessExecutor
from .brave import BraveSearch
from .read_only import (
    READ_ONLY_COMMANDS,
    CommandLimits,
    ReadOnlyCommandTool,
    check_command_limits,
    read_only_command_tools,
)
from .read_text import ReadTextTool
from .web_search import WebSearchError, WebSearchProvider, WebSearchTool

__all__ = [
    "READ_ONLY_COMMANDS",
    "BraveSearch",
    "CommandLimits",
    "ReadOnlyCommandTool",
    "ReadTextTool",
    "SubprocessExecutor",
    "WebSearchError",
    "WebSearchProvider",
    "WebSearchTool",
    "check_command_limits",
    "read_only_command_tools",
]
