"""A worker served in-process for a test, as `interaction-worker run` would serve it.

The value of the `serve_worker` fixture. Each call builds the worker from the code's worker and the
configuration mapping exactly as `run module:attr --config FILE` does (`app.build_worker`), and serves
it with `service.serve` on the given server: the configuration's limits, durable mode and ledger
apply, MCP servers are started, and shutdown is the graceful one. A test therefore exercises what
production runs, not a hand-wired binding.
"""

import asyncio
import contextlib
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import nats

from ..app import build_worker, serve_options
from ..client import InteractionClient
from ..config import Settings, parse_settings
from ..service import ConnectionStats, serve
from ..worker import InteractionWorker

# Bounds a start that hangs (a required MCP server that never answers within its own, longer,
# connect_timeout): the test fails with a message instead of waiting forever.
START_TIMEOUT = 60.0


@dataclass(eq=False)
class ServedWorker:
    """A worker serving a prefix of the test's server, and a client bound to that prefix.

    Attributes:
        prefix: the subject prefix it serves: fresh for each call unless the configuration
            gives `subjects.prefix`.
        nats_url: the server it serves on.
        client: an `InteractionClient` on its own connection, bound to `prefix`.
        worker: the worker being served (built from the code's worker and the configuration).
        settings: the configuration it was built and served with.
        metrics_url: `http://HOST:PORT` of its metrics and health endpoints, when the
            configuration serves them (`metrics={"listen": "127.0.0.1:0"}`: a free port).
    """

    prefix: str
    nats_url: str
    client: InteractionClient
    worker: InteractionWorker
    settings: Settings
    _stop: asyncio.Event = field(repr=False)
    _task: asyncio.Task[ConnectionStats] = field(repr=False)
    _stopped: bool = field(default=False, repr=False)
    metrics_url: str | None = None

    async def stop(self) -> None:
        """Stop serving (the graceful shutdown of `run`), then close the client.

        Done at teardown anyway; call it to test what happens once the worker is gone, or to
        replace it by another. A worker that failed while serving raises its exception here.
        """
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        try:
            await asyncio.wait({self._task})
        finally:
            nc = self.client.nc
            await self.client.close()
            await nc.close()
        self._task.result()


class ServeWorker:
    """`await serve_worker(worker_or_config=None, **settings)`: serve a worker for one test.

    `worker_or_config` is an `InteractionWorker` (the `run module:attr` case) or a configuration
    mapping (worker.yaml's schema, docs/configuration.md); `settings` are top-level keys merged
    into that mapping, each replacing the key it names (`workspace=tmp_path`,
    `tools={"read_text": {}}`). Path objects are accepted where the file has paths; relative
    paths resolve against `base_dir`, as `run` resolves them against the current directory when
    there is no file. `nats.url` is always the test's server, and the environment's NATS
    credentials are not used.
    """

    def __init__(self, nats_url: str, *, base_dir: Path | None = None) -> None:
        self.nats_url = nats_url
        self.base_dir = Path.cwd() if base_dir is None else base_dir
        self.served: list[ServedWorker] = []

    async def __call__(
        self,
        worker_or_config: InteractionWorker | Mapping[str, Any] | None = None,
        /,
        **settings: Any,
    ) -> ServedWorker:
        """Serve it and return once it has subscribed.

        Raises:
            ConfigurationError: the configuration is invalid (one line per problem).
            ServeError: it cannot start (a required MCP server, the ledger's bucket).
            TimeoutError: it did not start within `START_TIMEOUT` seconds.
        """
        code: InteractionWorker | None = None
        config: dict[str, Any] = {}
        if isinstance(worker_or_config, InteractionWorker):
            code = worker_or_config
        elif worker_or_config is not None:
            config = dict(worker_or_config)
        config.update(settings)
        config = _strings_for_paths(config)
        parsed = parse_settings(config, base_dir=self.base_dir)
        prefix = (
            parsed.subjects.prefix
            if _prefix_given(config)
            else f"test-{uuid.uuid4().hex[:12]}"
        )
        parsed = replace(
            parsed,
            nats=replace(parsed.nats, url=self.nats_url),
            subjects=replace(parsed.subjects, prefix=prefix),
        )
        worker = build_worker(parsed, code)
        ready, stop = asyncio.Event(), asyncio.Event()
        metrics_urls: list[str] = []
        task = asyncio.create_task(
            serve(
                worker,
                serve_options(parsed, {}),
                ready=lambda url: ready.set(),
                stop=stop,
                install_signal_handlers=False,
                metrics_listening=metrics_urls.append,
            )
        )
        await _started(task, ready, stop)
        try:
            nc = await nats.connect(
                self.nats_url, name="interaction-worker-test-client"
            )
        except BaseException:
            stop.set()
            await asyncio.wait({task})
            raise
        client = InteractionClient(
            nc, prefix=prefix, inbox_prefix=parsed.nats.inbox_prefix
        )
        served = ServedWorker(
            prefix,
            self.nats_url,
            client,
            worker,
            parsed,
            stop,
            task,
            metrics_url=metrics_urls[0] if metrics_urls else None,
        )
        self.served.append(served)
        return served

    async def aclose(self) -> None:
        """Stop every worker served, the last first; a failure of one does not spare the others."""
        async with contextlib.AsyncExitStack() as stack:
            for served in self.served:
                stack.push_async_callback(served.stop)


async def _started(
    task: asyncio.Task[ConnectionStats], ready: asyncio.Event, stop: asyncio.Event
) -> None:
    waiting = asyncio.ensure_future(ready.wait())
    try:
        await asyncio.wait(
            {task, waiting},
            timeout=START_TIMEOUT,
            return_when=asyncio.FIRST_COMPLETED,
        )
    finally:
        waiting.cancel()
    if ready.is_set():
        return
    if task.done():
        task.result()  # the start's own error: ServeError, ConfigurationError, ...
        raise RuntimeError("the worker stopped before it was ready")
    stop.set()
    await asyncio.wait({task})
    raise TimeoutError(f"the worker did not start within {START_TIMEOUT:g} s")


def _prefix_given(config: Mapping[str, Any]) -> bool:
    subjects = config.get("subjects")
    return isinstance(subjects, Mapping) and "prefix" in subjects


def _strings_for_paths(value: Any) -> Any:
    """The mapping as YAML would give it: `Path` objects (a `tmp_path`) as strings."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        return {key: _strings_for_paths(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_strings_for_paths(item) for item in value]
    return value
