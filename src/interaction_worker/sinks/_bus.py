"""What the NATS and JetStream sinks share: the connection, the subject template and the headers."""

import nats.errors
from nats.aio.client import Client

from ..contracts import OutputRequest
from ..contracts.keys import headers_size, is_safe_header_value, subject_key
from ..contracts.wire import DELIVERY_ID_HEADER, KEY_HEADER, MSG_ID_HEADER
from ..errors import ConfigurationError
from ._receipts import Receipt, rejected, unavailable

# Raised by nats-py's publish before anything is buffered: the message was certainly not sent.
NOT_SENT = (
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionDrainingError,
    nats.errors.OutboundBufferLimitError,
)


def check_subject(template: object) -> str:
    """Dot-separated nonempty tokens without wildcards or whitespace; `{key}` stands for the key."""
    rule = "subject must be subject tokens without wildcards; {key} stands for the delivery's key"
    if not isinstance(template, str):
        raise ConfigurationError(rule)
    plain = template.replace("{key}", "k")
    if (
        not plain
        or any(c.isspace() or c in "*>{}" or ord(c) < 0x20 for c in plain)
        or not all(plain.split("."))
    ):
        raise ConfigurationError(rule)
    return template


class Connection:
    """The client a sink publishes with: given to the sink, or the worker's, handed over by `start`."""

    def __init__(self, client: Client | None) -> None:
        self.client = client

    def start(self, client: Client) -> None:
        if self.client is None:
            self.client = client

    def get(self, sink: str) -> Client:
        if self.client is None:
            # A bug of the embedding code, not of the delivery: the bus turns it into INTERNAL and
            # a dead letter that keeps the delivery.
            raise RuntimeError(
                f"{sink} has no NATS connection: pass client= or call start(client) first"
            )
        return self.client


def delivery_headers(request: OutputRequest, msg_id_prefix: str) -> dict[str, str]:
    """Content type, the subject key, the raw id when it is safe in a header, and `Nats-Msg-Id`
    `<sink name>:<K>` (wire.md section 8), so a stream capturing the subject drops a duplicate."""
    key = subject_key(request.delivery_id)
    headers = {"Content-Type": "application/json", KEY_HEADER: key}
    if is_safe_header_value(request.delivery_id):
        headers[DELIVERY_ID_HEADER] = request.delivery_id
    headers[MSG_ID_HEADER] = f"{msg_id_prefix}:{key}"
    return headers


def subject_for(template: str, request: OutputRequest) -> str:
    return template.replace("{key}", subject_key(request.delivery_id))


def too_large(client: Client, payload: bytes, headers: dict[str, str]) -> bool:
    """The server closes a connection that sends more than its max_payload: check before sending."""
    return len(payload) + headers_size(headers) > client.max_payload


TOO_LARGE_MESSAGE = (
    "The delivery with its headers is larger than the server's max_payload"
)


def outgoing(
    connection: Connection,
    sink: str,
    request: OutputRequest,
    name: str,
    extra_headers: dict[str, str] | None = None,
) -> tuple[Client, bytes, dict[str, str]] | Receipt:
    """What a bus sink sends (its client, payload and headers), or the receipt that says nothing was
    sent: not connected (`rejected`, retryable), or too large for the server."""
    client = connection.get(sink)
    if not client.is_connected:
        return unavailable(request)
    payload = request.to_json()
    headers = delivery_headers(request, name)
    if extra_headers:
        headers.update(extra_headers)
    if too_large(client, payload, headers):
        return rejected(request, "PAYLOAD_TOO_LARGE", TOO_LARGE_MESSAGE)
    return client, payload, headers
