"""Built-in tools."""

from .read_text import ReadTextTool

__all__ = ["ReadTextTool"]
