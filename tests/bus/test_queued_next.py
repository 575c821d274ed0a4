"""A durable consumer's fetch takes the messages of a batch queued already without a task each
(`subscribers/queued_next.py`), and returns what nats-py's own fetch returns."""

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.js import api

from interaction_worker.subscribers.queued_next import take_queued_first


@pytest.fixture
async def client(nats_url: str) -> AsyncIterator[Client]:
    connection = await nats.connect(nats_url)
    try:
        yield connection
    finally:
        await connection.close()


async def consumer(client: Client, messages: int) -> Any:
    """A stream holding `messages` messages and a pull subscription of a durable consumer on it."""
    name = f"Q_{uuid.uuid4().hex[:10]}"
    js = client.jetstream()
    await js.add_stream(api.StreamConfig(name=name, subjects=[f"{name}.>"]))
    for index in range(messages):
        await js.publish(f"{name}.m", f"m{index}".encode(), headers={"N": str(index)})
    await js.add_consumer(
        name,
        api.ConsumerConfig(durable_name="c", ack_policy=api.AckPolicy.EXPLICIT),
    )
    return await js.pull_subscribe_bind(durable="c", stream=name)


def counting_tasks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    made = [0]
    create_task = asyncio.create_task

    def counted(*args: Any, **kwargs: Any) -> Any:
        made[0] += 1
        return create_task(*args, **kwargs)

    monkeypatch.setattr(asyncio, "create_task", counted)
    return made


async def test_a_batch_queued_already_is_taken_without_a_task_per_message(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain, wrapped = await consumer(client, 6), await consumer(client, 6)
    take_queued_first(wrapped)
    made = counting_tasks(monkeypatch)

    expected = await plain.fetch(batch=6, timeout=2)
    by_nats_py = made[0]
    made[0] = 0
    got = await wrapped.fetch(batch=6, timeout=2)

    assert [(m.data, m.headers) for m in got] == [(m.data, m.headers) for m in expected]
    assert [m.metadata.sequence.stream for m in got] == [1, 2, 3, 4, 5, 6]
    assert wrapped._sub.pending_bytes == plain._sub.pending_bytes == 0
    # nats-py waits for each message with a task of its own; the first one only is waited for.
    assert by_nats_py >= 6
    assert made[0] <= 1


async def test_an_empty_queue_waits_and_times_out_as_nats_py_does(
    client: Client,
) -> None:
    wrapped = await consumer(client, 1)
    take_queued_first(wrapped)
    take_queued_first(wrapped)  # once is enough: not wrapped twice

    assert [m.data for m in await wrapped.fetch(batch=3, timeout=1)] == [b"m0"]
    with pytest.raises(nats.errors.TimeoutError):
        await wrapped.fetch(batch=2, timeout=0.3)


async def test_a_subscription_without_nats_py_s_queue_is_left_as_it_is() -> None:
    class Other:
        async def next_msg(self, *args: object) -> None:
            return None

    other = Other()
    take_queued_first(other)
    assert "next_msg" not in vars(other)
