"""NATS services discovery (wire.md 9): the worker answers `$SRV.PING`, `$SRV.INFO` and
`$SRV.STATS` as the services protocol (ADR-32) says, so `nats micro ls|info|stats` list it.

Each verb is subscribed three times: for every service (`$SRV.PING`), for this service's name
(`$SRV.PING.<name>`) and for this instance (`$SRV.PING.<name>.<id>`), without a queue group, so that
every instance answers. The answers are built from the endpoints' counters (`endpoints.Endpoint`) at
the moment of the request: nothing on the request path knows about discovery.

nats-py ships a services framework (`nats.micro`), but its endpoints run their own handler per
message and keep their own counters; the worker's subjects are served by its bindings (the
dispatcher's bounds, durable consumers), so only the protocol's answers are written here, in the
shape `nats.micro`'s types read (the tests hold them to it).
"""

import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata as package_metadata

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.nuid import NUID

from ..config import defaults
from .endpoints import Endpoint
from .incoming import own_prefixes

_LOGGER = logging.getLogger("interaction_worker")

PING_RESPONSE = "io.nats.micro.v1.ping_response"
INFO_RESPONSE = "io.nats.micro.v1.info_response"
STATS_RESPONSE = "io.nats.micro.v1.stats_response"
VERBS = ("PING", "INFO", "STATS")
# What the protocol allows in a service's (and an endpoint's) name.
SERVICE_NAME = re.compile(r"[A-Za-z0-9_-]+")
DESCRIPTION = "Tool calls, MCP requests, observations and deliveries over NATS"


def package_version() -> str:
    """The installed package's version; `0.0.0` for a source tree that is not installed (the
    protocol wants a semantic version)."""
    try:
        return package_metadata.version("interaction-worker")
    except package_metadata.PackageNotFoundError:
        return "0.0.0"


@dataclass(frozen=True)
class ServedEndpoint:
    """One request subject as discovery lists it: its counters, its queue group, and metadata
    (how a durable subject is consumed)."""

    endpoint: Endpoint
    queue_group: str
    metadata: Mapping[str, str] = field(default_factory=dict)


class Discovery:
    """Answers the services protocol's requests on `client` for one worker process.

    Args:
        name: the service name (`nats.name`), letters, digits, `-` and `_`.
        endpoints: the request subjects served.
        metadata: the service's metadata (the metrics address, when they are served).
        instance: this process's id; a fresh NUID by default, as nats-py's services use.
        reply_prefixes: `subjects.reply_prefixes`: a request is answered only there, or on a
            subject the server remapped (docs/wire.md 7). `nats micro` asks from `_INBOX.` unless
            given `--inbox-prefix`.

    Raises:
        ValueError: `name` is not a name the protocol allows.
    """

    def __init__(
        self,
        client: Client,
        *,
        name: str,
        endpoints: Sequence[ServedEndpoint],
        version: str | None = None,
        metadata: Mapping[str, str] | None = None,
        instance: str | None = None,
        reply_prefixes: tuple[str, ...] = defaults.REPLY_PREFIXES,
    ) -> None:
        if SERVICE_NAME.fullmatch(name) is None:
            raise ValueError(
                f"a service name is letters, digits, - and _, not {name!r}"
            )
        self.client = client
        self.name = name
        self.id = instance or NUID().next().decode()
        self.version = version or package_version()
        self.endpoints = tuple(endpoints)
        self.metadata = dict(metadata or {})
        self.started = datetime.now(UTC)
        self.own_prefixes = own_prefixes(reply_prefixes)
        # Requests left unanswered for their reply subject: a count and a debug line each, no dead
        # letter (a discovery request carries nothing to keep, and every worker sees each one).
        self.refused = 0
        self._subscriptions: list[Subscription] = []

    def subjects(self, verb: str) -> tuple[str, str, str]:
        return (
            f"$SRV.{verb}",
            f"$SRV.{verb}.{self.name}",
            f"$SRV.{verb}.{self.name}.{self.id}",
        )

    async def start(self) -> None:
        answers = {"PING": self.ping, "INFO": self.info, "STATS": self.stats}
        for verb in VERBS:
            callback = self._responder(answers[verb])
            for subject in self.subjects(verb):
                self._subscriptions.append(
                    await self.client.subscribe(subject, cb=callback)
                )
        await self.client.flush()

    async def stop(self) -> None:
        """Stop answering: a worker that is shutting down is no longer listed."""
        subscriptions, self._subscriptions = self._subscriptions, []
        for subscription in subscriptions:
            try:
                await subscription.unsubscribe()
            except Exception:  # a closed connection has nothing left to unsubscribe
                _LOGGER.debug("unsubscribing %s failed", subscription.subject)

    def _identity(self, kind: str) -> dict[str, object]:
        return {
            "type": kind,
            "name": self.name,
            "id": self.id,
            "version": self.version,
            "metadata": self.metadata,
        }

    def ping(self) -> dict[str, object]:
        return self._identity(PING_RESPONSE)

    def info(self) -> dict[str, object]:
        answer = self._identity(INFO_RESPONSE)
        answer["description"] = DESCRIPTION
        answer["endpoints"] = [
            {
                "name": served.endpoint.kind,
                "subject": served.endpoint.subject,
                "queue_group": served.queue_group,
                "metadata": dict(served.metadata),
            }
            for served in self.endpoints
        ]
        return answer

    def stats(self) -> dict[str, object]:
        answer = self._identity(STATS_RESPONSE)
        # Microseconds at most: nats.micro reads `started` with strptime's %f.
        answer["started"] = self.started.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        answer["endpoints"] = [
            {
                "name": (endpoint := served.endpoint).kind,
                "subject": endpoint.subject,
                "queue_group": served.queue_group,
                "num_requests": endpoint.requests,
                "num_errors": endpoint.errors,
                "last_error": endpoint.last_error,
                "processing_time": endpoint.processing_ns,
                "average_processing_time": endpoint.average_processing_ns,
                "data": None,
            }
            for served in self.endpoints
        ]
        return answer

    def _responder(
        self, answer: Callable[[], dict[str, object]]
    ) -> Callable[[Msg], Awaitable[None]]:
        publish = self.client.publish
        allowed = self.own_prefixes

        async def respond(msg: Msg) -> None:
            if not msg.reply:
                return
            if not msg.reply.startswith(allowed):
                self.refused += 1
                _LOGGER.debug(
                    "not answering %s: its reply subject is under no reply prefix",
                    msg.subject,
                )
                return
            try:
                await publish(msg.reply, json.dumps(answer()).encode())
            except (
                Exception
            ):  # the connection is away: the asker times out and asks again
                _LOGGER.debug("answering %s failed", msg.subject, exc_info=True)

        return respond
