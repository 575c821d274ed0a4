"""A sink that stores each delivery in a JetStream stream, acknowledged, for replay by late readers."""

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import StreamConfig

from ..contracts import OutputRequest
from ..contracts.keys import key_filter
from ..errors import ConfigurationError
from ..nodes import DeliveryContext
from ._bus import (
    NOT_SENT,
    Connection,
    check_subject,
    outgoing,
    subject_for,
)
from ._receipts import (
    DEFAULT_TIMEOUT,
    accepted,
    check_name,
    check_timeout,
    rejected,
    timed_out,
    unavailable,
)

_STREAM_NAME = re.compile(r"[A-Za-z0-9_-]{1,255}")
_STREAM_MISMATCH = 10060  # JSStreamNotMatchErr: the subject is stored by another stream
_LOGGER = logging.getLogger("interaction_worker.sinks.jetstream")


@dataclass(frozen=True)
class StreamTemplate:
    """The stream a sink creates at start when its `stream` does not exist yet: over the sink's
    subject (the `{key}` token as `*`), direct gets allowed, so that pages read its history without
    a consumer (docs/operations.md, "Browsers"); kept `max_age` seconds, with `replicas` and a
    `duplicate_window` for `Nats-Msg-Id`."""

    max_age: float
    replicas: int = 1
    duplicate_window: float = 120.0


class JetStreamSink:
    """Publishes each delivery to a stream and waits for its PubAck.

    `Nats-Msg-Id` is `<name>:<K>` (wire.md section 8): the stream drops the same delivery sent
    again within its duplicate window, and the second receipt says so. The PubAck is the receipt's
    metadata: `{"stream", "seq", "duplicate"}`.

    Receipts: PubAck → `accepted`; no stream captures the subject → `rejected` NO_STREAM; the
    subject belongs to another stream than `stream` → `rejected` STREAM_MISMATCH; any other refusal
    by the stream (full, message too large for it) → `rejected` STREAM_REJECTED with its JetStream
    error code; not connected (nothing sent) → `rejected` SINK_UNAVAILABLE, retryable; no PubAck
    within `timeout` → `unknown` SINK_TIMEOUT (the stream may have stored it).

    Args:
        subject: the subject template; `{key}` stands for the deliveryId's subject key.
        stream: the stream expected to store it (`Nats-Expected-Stream`); None accepts any.
        client: the connection to publish on; by default the worker's, handed over by
            `start(client)`. The sink never closes it.
        name: the sink's name in fan-out receipts and in `Nats-Msg-Id`.
        timeout: seconds to wait for the PubAck.
        create: with `stream`, how to create it when it is missing at start; None never creates
            one. A stream that exists is used as it is.
    """

    def __init__(
        self,
        subject: str,
        *,
        stream: str | None = None,
        client: Client | None = None,
        name: str = "jetstream",
        timeout: float = DEFAULT_TIMEOUT,
        create: StreamTemplate | None = None,
    ) -> None:
        if stream is not None and (
            not isinstance(stream, str) or not _STREAM_NAME.fullmatch(stream)
        ):
            raise ConfigurationError(
                "stream must be a stream name of letters, digits, - and _"
            )
        self.subject = check_subject(subject)
        self.stream = stream
        self.name = check_name(name)
        self.timeout = check_timeout(timeout)
        self._connection = Connection(client)
        self._js: tuple[Client, JetStreamContext] | None = None
        self.create = create

    async def start(self, client: Client) -> None:
        """Publish on `client` (the worker's connection), unless the sink was given one; create the
        stream when asked to and it is missing."""
        self._connection.start(client)
        if self.create is not None and self.stream is not None:
            await self._ensure_stream(self._connection.get(self.name), self.create)

    async def _ensure_stream(self, client: Client, template: StreamTemplate) -> None:
        """A failure is logged, not raised: the worker serves anyway, and this sink's receipts
        then say why it cannot store (NO_STREAM, STREAM_MISMATCH)."""
        assert self.stream is not None
        js = client.jetstream(timeout=self.timeout)
        try:
            await js.stream_info(self.stream)
            return
        except nats.js.errors.NotFoundError:
            pass
        except (nats.errors.Error, TimeoutError) as error:
            _LOGGER.warning(
                "sink %s: cannot look up its stream %s: %s",
                self.name,
                self.stream,
                error,
            )
            return
        config = StreamConfig(
            name=self.stream,
            subjects=[key_filter(self.subject)],
            max_age=template.max_age,
            num_replicas=template.replicas,
            duplicate_window=template.duplicate_window,
            allow_direct=True,
        )
        try:
            await js.add_stream(config)
        except (nats.errors.Error, TimeoutError) as error:
            _LOGGER.warning(
                "sink %s: cannot create its stream %s: %s",
                self.name,
                self.stream,
                error,
            )
        else:
            _LOGGER.info("sink %s: created its stream %s", self.name, self.stream)

    async def deliver(
        self, request: OutputRequest, context: DeliveryContext
    ) -> dict[str, Any]:
        # What nats-py's `stream=` would add; set here so that the size check counts it.
        expected = (
            {"Nats-Expected-Stream": self.stream} if self.stream is not None else None
        )
        prepared = outgoing(
            self._connection,
            f"JetStreamSink {self.name!r}",
            request,
            self.name,
            expected,
        )
        if isinstance(prepared, dict):
            return prepared
        client, payload, headers = prepared
        if self._js is None or self._js[0] is not client:
            self._js = (client, client.jetstream())
        try:
            # The outer bound also covers a publish that waits for room in the client's buffer.
            async with asyncio.timeout(self.timeout):
                ack = await self._js[1].publish(
                    subject_for(self.subject, request),
                    payload,
                    timeout=self.timeout,
                    headers=headers,
                )
        except (TimeoutError, nats.errors.TimeoutError):
            return timed_out(request, self.timeout)
        except nats.js.errors.NoStreamResponseError:
            return rejected(request, "NO_STREAM", "No stream stores the sink's subject")
        except nats.js.errors.APIError as error:
            if error.err_code == _STREAM_MISMATCH:
                return rejected(
                    request,
                    "STREAM_MISMATCH",
                    "The sink's subject is stored by another stream than the one expected",
                )
            # An error PubAck: the stream did not store it (full, a message too large for it, …).
            number = error.err_code or error.code
            detail = f" (JetStream error {number})" if isinstance(number, int) else ""
            return rejected(
                request, "STREAM_REJECTED", f"The stream refused the message{detail}"
            )
        except NOT_SENT:
            return unavailable(request)
        return accepted(
            request,
            {"stream": ack.stream, "seq": ack.seq, "duplicate": bool(ack.duplicate)},
        )
