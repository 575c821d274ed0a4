"""The HTTP side of a served worker (docs/configuration.md, "Metrics and health"): `/metrics`,
`/healthz` and `/readyz` on Starlette and uvicorn, in the worker's own process and event loop,
started and stopped with the service.

In the same loop, so that a scrape reads the counters between two messages (no lock), and so that
`/healthz` answering at all proves the loop is turning. The listening socket is bound here, before
uvicorn gets it: a busy port fails the start at once, naming the key, and the bound address (`port 0`:
any free port) is known before anything serves.
"""

import asyncio
import logging

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.process_collector import ProcessCollector
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import ServeError
from .collector import WorkerCollector
from .http import CannotListen, LoopServer, listen, serving, url_of
from .state import ServiceState

_LOGGER = logging.getLogger("interaction_worker")
# Seconds a scrape still being answered may take once the worker has stopped everything else.
_GRACE = 2


def monitor_app(state: ServiceState, registry: CollectorRegistry) -> Starlette:
    """The three routes, over `state` and `registry`."""

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        reasons = state.not_ready()
        if reasons:
            return JSONResponse(
                {"status": "not ready", "reasons": reasons}, status_code=503
            )
        return JSONResponse({"status": "ready"})

    return Starlette(
        routes=[
            Route("/metrics", metrics),
            Route("/healthz", healthz),
            Route("/readyz", readyz),
        ]
    )


class _Server(LoopServer):
    """uvicorn's server, minus two things the worker does itself: signal handling (the worker's
    `serve` owns SIGTERM and SIGINT, and stops this server as part of its shutdown), and the main
    loop's wake-up every 0.1 s to see whether it should exit (it is told instead): an idle worker's
    loop gets no timer from its HTTP side. Without those ticks uvicorn adds no `date` or `server`
    header to the answers, which a scraper or a probe does not need."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.stopping = asyncio.Event()

    async def main_loop(self) -> None:
        await self.stopping.wait()


class Monitor:
    """The metrics and health endpoints of one served worker, with a Prometheus registry of its own
    (the worker's collector and the process collector), so two workers in one process do not meet.

    Attributes:
        state: what `service.serve` tells it as it goes.
        url: `http://HOST:PORT` once listening.
    """

    def __init__(self, state: ServiceState) -> None:
        self.state = state
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(WorkerCollector(state))
        ProcessCollector(registry=self.registry)
        self.url: str | None = None
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int) -> str:
        """Listen on `host:port` and serve; the URL it listens on.

        Raises:
            ServeError: the address cannot be listened on (in use, not this machine's).
        """
        try:
            sock = await listen(host, port)
        except CannotListen as error:
            raise ServeError(f"metrics.listen: {error}") from None
        config = uvicorn.Config(
            monitor_app(self.state, self.registry),
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=_GRACE,
        )
        server = self._server = _Server(config)
        task = self._task = await serving(server, sock)
        if not server.listening.is_set():
            task.result()  # uvicorn's own failure, if it raised one
            raise ServeError("metrics.listen: the HTTP server stopped as it started")
        self.url = url_of(sock)
        return self.url

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        self._server.stopping.set()
        await asyncio.wait({self._task})
