"""A pull consumer's next message without a task when it is queued already (docs/wire.md 7).

nats-py's fetch takes each message of a batch after the first with `Subscription.next_msg`, which
makes a task, a uuid4 and an `asyncio.wait_for` (a second task) per message, even when the message
is on the subscription's queue already, as the rest of a batch is once its first has arrived. For
each durable consumer's subscription, `next_msg` is wrapped: a message queued already is taken at
once, with the bookkeeping nats-py does for it (the queue's `task_done`, the pending size); an
empty queue, a closed connection or a subscription with a callback go to nats-py's own, which waits
or raises as it always did. Without the non-public attributes (`_pending_queue`, `_pending_size`,
`_conn`, `_cb`) the subscription is left as it is. tests/bus/test_queued_next.py compares what a
fetch returns with and without it.
"""

from typing import Any

from nats.aio.msg import Msg


def take_queued_first(subscription: Any) -> None:
    """Wrap the `next_msg` of the nats-py subscription under `subscription` (a pull
    subscription's `_sub`, or a subscription itself)."""
    sub = getattr(subscription, "_sub", subscription)
    queue = getattr(sub, "_pending_queue", None)
    original = getattr(sub, "next_msg", None)
    if (
        queue is None
        or original is None
        or not hasattr(sub, "_pending_size")
        or not hasattr(sub, "_conn")
        or getattr(sub, "_cb", None) is not None
        or "next_msg" in vars(sub)  # wrapped already
    ):
        return

    # nats-py's signature, which its fetch calls.
    async def next_msg(timeout: float | None = 1.0) -> Msg:  # noqa: ASYNC109
        if queue.empty() or sub._conn.is_closed:
            msg: Msg = await original(timeout)
            return msg
        msg = queue.get_nowait()
        sub._pending_size -= len(msg.data)
        queue.task_done()
        return msg

    sub.next_msg = next_msg
