"""A sink that stores each delivery in a JetStream stream, acknowledged, for replay by late readers."""

import asyncio
import re
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext

from ..contracts import OutputRequest
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
    """

    def __init__(
        self,
        subject: str,
        *,
        stream: str | None = None,
        client: Client | None = None,
        name: str = "jetstream",
        timeout: float = DEFAULT_TIMEOUT,
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

    async def start(self, client: Client) -> None:
        """Publish on `client` (the worker's connection), unless the sink was given one."""
        self._connection.start(client)

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
