"""What durable mode reads of a JetStream message's reply subject: its delivery count and stream
sequence (docs/wire.md 7).

nats-py's `Msg.metadata` parses every token of the subject into a dataclass, a timestamp included,
for two integers the worker needs per message; here they are read straight from the subject's
tokens in the form the server writes without a domain (`$JS.ACK.<stream>.<consumer>.<delivered>.
<stream seq>.<consumer seq>.<time>.<pending>`). Any other form goes through `Msg.metadata`.
"""

from nats.aio.msg import Msg

# The tokens of an acknowledgement subject without a domain, and where the two numbers are.
_V1_TOKENS = 9
_DELIVERED = 4
_STREAM_SEQUENCE = 5


def delivered(msg: Msg) -> tuple[int, int]:
    """How many times `msg` has been delivered (at least 1), and its sequence in the stream.

    Raises:
        nats.errors.NotJSMessageError: `msg` is not a JetStream message.
    """
    tokens = (msg.reply or "").split(".")
    if len(tokens) == _V1_TOKENS and tokens[0] == "$JS" and tokens[1] == "ACK":
        number, sequence = tokens[_DELIVERED], tokens[_STREAM_SEQUENCE]
        if number.isdigit() and sequence.isdigit():
            return int(number) or 1, int(sequence)
    meta = msg.metadata
    return meta.num_delivered or 1, meta.sequence.stream
