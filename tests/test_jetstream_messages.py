"""A JetStream message's delivery count and stream sequence, read from its reply subject as
nats-py's `Msg.metadata` reads them."""

import pytest
from nats.aio.msg import Msg
from nats.errors import NotJSMessageError

from interaction_worker.subscribers.jetstream_messages import delivered


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.CALLS.workers-tool.1.42.40.1800000000000000000.0",
        "$JS.ACK.CALLS.workers-tool.7.9001.3.1800000000000000000.12",
        "$JS.ACK.CALLS.workers-tool.0.5.5.1800000000000000000.0",
        # With a domain and an account hash: nats-py's reading.
        "$JS.ACK.hub.ACCHASH.CALLS.workers-tool.3.77.70.1800000000000000000.0.rand",
    ],
)
def test_the_numbers_are_those_of_nats_py_metadata(reply: str) -> None:
    meta = Msg(None, reply=reply).metadata  # type: ignore[arg-type]

    assert delivered(Msg(None, reply=reply)) == (  # type: ignore[arg-type]
        meta.num_delivered or 1,
        meta.sequence.stream,
    )


def test_a_message_that_is_not_jetstreams_is_refused_as_nats_py_refuses_it() -> None:
    with pytest.raises(NotJSMessageError):
        delivered(Msg(None, reply="_INBOX.abc.1"))  # type: ignore[arg-type]
