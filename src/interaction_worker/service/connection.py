"""The connection to NATS that `serve` holds: connecting within a bound, giving up when stopped, and
saying why in one line without credentials; the connection's events as counters and log lines."""

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import nats
from nats.aio.client import Client
from nats.errors import SlowConsumerError

from ..errors import ServeError
from .options import ServeOptions

_LOGGER = logging.getLogger("interaction_worker")


@dataclass
class ConnectionStats:
    """What the connection went through, as `serve` returns it."""

    slow_consumers: int = 0
    disconnects: int = 0
    closing: bool = False  # our own drain disconnects too: not worth a warning
    connected: bool = False
    # Before the first connection, failed attempts are only remembered: the start either succeeds
    # or fails with one line that names the last of them.
    first_error: Exception | None = None


async def connect(url: str, options: ServeOptions, stats: ConnectionStats) -> Client:
    """Connect, bounded: nats-py retries the first connect until its attempts run out."""

    async def error_cb(error: Exception) -> None:
        if isinstance(error, SlowConsumerError):
            stats.slow_consumers += 1
            _LOGGER.warning(
                "slow consumer on %s: the client dropped a message", error.subject
            )
        elif not stats.connected:
            stats.first_error = stats.first_error or error
            _LOGGER.debug("NATS connection attempt failed: %s", type(error).__name__)
        else:
            _LOGGER.warning("NATS connection error: %s", type(error).__name__)

    async def disconnected_cb() -> None:
        if stats.closing:
            return
        stats.disconnects += 1
        _LOGGER.warning("disconnected from NATS; reconnecting")

    async def reconnected_cb() -> None:
        _LOGGER.info("reconnected to NATS")

    async with asyncio.timeout(options.connect_timeout):
        client = await nats.connect(
            url,
            name=options.name,
            error_cb=error_cb,
            disconnected_cb=disconnected_cb,
            reconnected_cb=reconnected_cb,
            max_reconnect_attempts=-1,
            reconnect_time_wait=1,
            connect_timeout=2,
            # Every subject this connection publishes on is checked before: configured prefixes and
            # sink subjects at start-up, keys by construction, Interaction-Reply-To per message, and
            # reply subjects come from the server. nats-py's own check (a regex per publish) is skipped.
            skip_subject_validation=True,
            **options.connect_options,
        )
    stats.connected = True
    return client


def _without_credentials(url: str) -> str:
    """The URL without user information (a `--nats-url` flag is not checked for it)."""
    try:
        parts = urlsplit(url)
        if parts.username is None and parts.password is None:
            return url
        host = parts.hostname or ""
        netloc = host if parts.port is None else f"{host}:{parts.port}"
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return "the configured URL"


async def connect_unless_stopped(
    url: str, options: ServeOptions, stats: ConnectionStats, stop: asyncio.Event
) -> Client | None:
    """Connect, or give up (None) as soon as `stop` is set: a signal while the server is
    unreachable stops the worker at once instead of after `connect_timeout`.

    Raises:
        ServeError: the connection failed, in one line without credentials, not a traceback.
    """
    connecting = asyncio.ensure_future(connect(url, options, stats))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({connecting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not connecting.done():
            connecting.cancel()
            await asyncio.wait({connecting})
    if connecting.cancelled():
        return None
    try:
        return connecting.result()
    except Exception as error:
        reason = (
            f"no connection within {options.connect_timeout:g} s"
            if isinstance(error, TimeoutError)
            else type(error).__name__
        )
        if stats.first_error is not None:
            reason += f" ({_connect_failure(stats.first_error)})"
        raise ServeError(
            f"cannot connect to NATS at {_without_credentials(url)}: {reason}"
        ) from None


def _connect_failure(error: Exception) -> str:
    text = str(error).lower()
    if "authorization" in text:
        return "the server refused the credentials"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    return type(error).__name__


def with_connect_options(
    options: ServeOptions, connect_options: dict[str, Any]
) -> ServeOptions:
    return ServeOptions(**{**options.__dict__, "connect_options": connect_options})


async def close(client: Client, stats: ConnectionStats) -> None:
    # On every way out, a failed start included: the drain's own disconnect is not news.
    stats.closing = True
    with contextlib.suppress(Exception):
        await client.drain()
