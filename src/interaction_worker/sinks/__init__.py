"""Output sinks: where deliveries go."""

from .console import ConsoleSink
from .file import FileSink

__all__ = ["ConsoleSink", "FileSink"]
