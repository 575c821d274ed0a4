"""The HTTP side of a served worker (operate.md 2): `/metrics`, `/healthz` and `/readyz` on Starlette
and uvicorn, in the worker's own process and event loop, started and stopped with the service.

In the same loop, so that a scrape reads the counters between two messages (no lock), and so that
`/healthz` answering at all proves the loop is turning. The listening socket is bound here, before
uvicorn gets it: a busy port fails the start at once, naming the key, and the bound address (`port 0`:
any free port) is known before anything serves.
"""

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.process_collector import ProcessCollector
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import ServeError
from .collector import WorkerCollector
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


class _Server(uvicorn.Server):
    """uvicorn's server, minus two things the worker does itself: signal handling (the worker's
    `serve` owns SIGTERM and SIGINT, and stops this server as part of its shutdown), and the main
    loop's wake-up every 0.1 s to see whether it should exit (it is told instead): an idle worker's
    loop gets no timer from its HTTP side. Without those ticks uvicorn adds no `date` or `server`
    header to the answers, which a scraper or a probe does not need."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()
        self.stopping = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.listening.set()

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
        sock = await _listen(host, port)
        bound_host, bound_port = sock.getsockname()[:2]
        config = uvicorn.Config(
            monitor_app(self.state, self.registry),
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=_GRACE,
        )
        server = self._server = _Server(config)
        task = self._task = asyncio.create_task(server.serve(sockets=[sock]))
        listening = asyncio.ensure_future(server.listening.wait())
        try:
            await asyncio.wait({task, listening}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            listening.cancel()
        if not server.listening.is_set():
            task.result()  # uvicorn's own failure, if it raised one
            raise ServeError("metrics.listen: the HTTP server stopped as it started")
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        self.url = f"http://{shown}:{bound_port}"
        return self.url

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        self._server.stopping.set()
        await asyncio.wait({self._task})


async def _listen(host: str, port: int) -> socket.socket:
    where = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    loop = asyncio.get_running_loop()
    try:
        found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return socket.create_server((host, port), family=found[0][0])
    except OSError as error:
        reason = (error.strerror or type(error).__name__).lower()
        raise ServeError(
            f"metrics.listen: cannot listen on {where}: {reason}"
        ) from None
