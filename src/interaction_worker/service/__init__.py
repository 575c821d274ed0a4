"""Serving a worker as a process: what it is told (`options`), its connection to NATS
(`connection`), and the serving itself, from start-up to graceful shutdown (`serving`)."""

from .connection import ConnectionStats, connect
from .options import ServeOptions
from .serving import GC_THRESHOLD, run, serve

__all__ = [
    "GC_THRESHOLD",
    "ConnectionStats",
    "ServeOptions",
    "connect",
    "run",
    "serve",
]
