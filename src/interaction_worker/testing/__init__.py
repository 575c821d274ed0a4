"""Testing with a real bus: the nats-server helpers here, the fixtures in the pytest plugin
(`testing.plugin`, loaded by pytest through the package's `pytest11` entry point).

Only the nats-server helpers are exported: they are cheap to import, and this package is imported
by every pytest run of a project that installs interaction-worker. The served worker and the
recording fixtures' types live in `testing.served` and `testing.recorded`.
"""

from .nats_server import (
    NatsServer,
    NatsServerFactory,
    start_nats_server,
    stop_process,
)

__all__ = [
    "NatsServer",
    "NatsServerFactory",
    "start_nats_server",
    "stop_process",
]
