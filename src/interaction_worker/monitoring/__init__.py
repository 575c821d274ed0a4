"""Metrics and health over HTTP (docs/configuration.md, "Metrics and health"): the worker's
Prometheus metrics, read from its own counters at scrape time, and `/healthz` and `/readyz`, served
by Starlette and uvicorn in the worker's process and loop while `service.serve` runs.

`service` imports this part only when metrics are on: Starlette, uvicorn and prometheus_client take
about 0.3 s to import, which every other command of the CLI would pay.
"""

from .collector import OUTCOMES, WorkerCollector
from .server import Monitor, monitor_app
from .state import McpServerState, ServiceState

__all__ = [
    "OUTCOMES",
    "McpServerState",
    "Monitor",
    "ServiceState",
    "WorkerCollector",
    "monitor_app",
]
