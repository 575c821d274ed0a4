"""Where a client finds the worker's NATS server, by the command line's precedence (docs/cli.md,
"Finding the worker").

The client commands work from any directory of a project: with no `--config`, the nearest
`worker.yaml` in the current directory or its parents is the configuration (the same search as
`run`'s, `config.find_upwards`, with its bounds), and with no file at all the nearest
`.interaction/` is the embedded server's data directory, the way git finds `.git`.
"""

import asyncio
import errno
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import nats
from nats.aio.client import Client

from ..config import (
    CONFIG_ENV,
    NATS_URL_ENV,
    SearchBounds,
    Settings,
    config_path,
    find_upwards,
    load_settings,
    nats_connect_options,
)
from ..embedded import read_embedded_credentials, token_path, worker_credentials

DEFAULT_URL = "nats://127.0.0.1:4222"
DATA_DIR_NAME = ".interaction"
_LOOPBACK = frozenset(("127.0.0.1", "localhost", "::1"))
_CREDENTIAL_NAMES = ("token", "user", "password", "user_credentials", "nkeys_seed")


class ConnectError(Exception):
    """The server could not be reached: one line saying what was tried and what to do."""


@dataclass(frozen=True)
class Target:
    """A NATS server to dial: its URL, `nats.connect` options and subject prefix, and for messages,
    where the URL and the credentials came from."""

    url: str
    options: dict[str, Any]
    prefix: str
    url_origin: str
    credentials: str


@dataclass(frozen=True)
class Project:
    """The configuration a client reads and the data directory where an embedded server records itself."""

    settings: Settings
    data_dir: Path


def find_project(
    config: Path | None,
    *,
    env: Mapping[str, str],
    data_dir: Path | None = None,
    cwd: Path | None = None,
    bounds: SearchBounds | None = None,
) -> Project:
    """`--config`, else `INTERACTION_CONFIG`, else the nearest `worker.yaml`; `--data-dir`, else the
    file's `data_dir`, else the nearest `.interaction/`, else `./.interaction`. Both searches are
    `run`'s, within `bounds` (this process's user and home by default).

    Raises:
        ConfigurationError: the file cannot be read or is invalid, or what a search found is not
            safe to use (`UnsafeFile`).
    """
    cwd = Path.cwd() if cwd is None else cwd
    found = config_path(config, env=env, cwd=cwd, bounds=bounds)
    settings = load_settings(found, env=env, cwd=cwd)
    if data_dir is not None:
        return Project(settings, cwd / data_dir)
    if found is not None or env.get(CONFIG_ENV):
        return Project(settings, settings.data_dir)
    nearest = find_upwards(DATA_DIR_NAME, cwd, directory=True, bounds=bounds)
    return Project(settings, nearest or cwd / DATA_DIR_NAME)


def resolve_target(
    project: Project,
    env: Mapping[str, str],
    *,
    nats_url: str | None = None,
    prefix: str | None = None,
) -> Target:
    """`nats_url` (`--nats-url`), else `INTERACTION_NATS_URL`, else the file's `nats.url`, else the
    embedded server recorded in the data directory, else `nats://127.0.0.1:4222`.

    Credentials come from the environment; without any, a URL that is the recorded embedded server's
    connects as its `worker` user, whose password is the data directory's token, so `--nats-url`
    naming that server works as the default does."""
    prefix = prefix or project.settings.subjects.prefix
    options = nats_connect_options(env)
    if nats_url:
        url, origin = nats_url, "--nats-url"
    elif env.get(NATS_URL_ENV):
        url, origin = env[NATS_URL_ENV], NATS_URL_ENV
    elif project.settings.nats.url:
        url, origin = project.settings.nats.url, "nats.url of the configuration"
    else:
        url, origin = None, ""
    token_file = token_path(project.data_dir)
    if any(name in options for name in _CREDENTIAL_NAMES):
        return Target(
            url or DEFAULT_URL,
            options,
            prefix,
            origin or "the default",
            _env_credentials(env),
        )
    embedded = read_embedded_credentials(project.data_dir)
    if embedded is not None and (url is None or _same_server(url, embedded[0])):
        if url is None:
            url, origin = (
                embedded[0],
                f"the embedded server recorded in {project.data_dir}",
            )
        return Target(
            url,
            {**options, **worker_credentials(embedded[1])},
            prefix,
            origin,
            f"token from {token_file}",
        )
    if embedded is None:
        credentials = f"no token: no embedded server recorded in {project.data_dir}"
    else:
        credentials = (
            f"no token: {project.data_dir} records another server, {embedded[0]}"
        )
    return Target(
        url or DEFAULT_URL, options, prefix, origin or "the default", credentials
    )


def _env_credentials(env: Mapping[str, str]) -> str:
    names = sorted(
        name
        for name, value in env.items()
        if value
        and name.startswith("INTERACTION_NATS_")
        and name != NATS_URL_ENV
        and not name.startswith("INTERACTION_NATS_TLS_")
    )
    return f"credentials from {', '.join(names)}"


def _same_server(url: str, recorded: str) -> bool:
    a, b = urlsplit(url), urlsplit(recorded)
    try:
        ports = (a.port or 4222, b.port or 4222)
    except ValueError:
        return False
    return ports[0] == ports[1] and {a.hostname, b.hostname} <= _LOOPBACK


ErrorCallback = Callable[[Exception], Awaitable[None]]
Callback = Callable[[], Awaitable[None]]


async def connect(
    target: Target,
    *,
    name: str,
    wait: float = 5.0,
    error_cb: ErrorCallback | None = None,
    disconnected_cb: Callback | None = None,
) -> Client:
    """Connect once, without reconnecting; a failure is a `ConnectError` of one line.

    `error_cb` also hears the connection's errors once it is up (a slow consumer, for one), and
    `disconnected_cb` that it is gone: it does not come back."""
    seen: list[Exception] = []

    async def remember(error: Exception) -> None:
        # nats-py's default logs every failed attempt with a traceback; the one line below says it
        # all, and the error seen here says why (the exception raised is only "no servers").
        seen[:] = [error]
        if error_cb is not None:
            await error_cb(error)

    callbacks = {} if disconnected_cb is None else {"disconnected_cb": disconnected_cb}

    try:
        async with asyncio.timeout(wait):
            return await nats.connect(
                target.url,
                name=name,
                allow_reconnect=False,
                max_reconnect_attempts=1,
                # nats-py waits this long before its one retry of a refused first connect.
                reconnect_time_wait=0.1,
                connect_timeout=min(2.0, wait),
                error_cb=remember,
                **callbacks,
                **target.options,
            )
    except Exception as error:
        raise ConnectError(
            f"cannot connect to NATS at {target.url} ({_reason(seen[-1] if seen else error)}; "
            f"URL from {target.url_origin}; {target.credentials}): start a worker with "
            "`interaction-worker run`, or name a server with --nats-url or "
            f"{NATS_URL_ENV}, or the data directory of a running one with --data-dir"
        ) from None


def _reason(error: BaseException) -> str:
    text = str(error).lower()
    if "authorization" in text or "authentication" in text:
        return "the server refused the credentials"
    if (
        isinstance(error, ConnectionRefusedError)
        or getattr(error, "errno", None) == errno.ECONNREFUSED
    ):
        return "connection refused"
    if isinstance(error, TimeoutError | asyncio.TimeoutError):
        return "no answer in time"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return type(error).__name__
