"""The ledger's stores on one contract: `MemoryStore` and `JetStreamStore` over a real nats-server
give the same answers to the same writes (revisions, conflicts, deletes, waiting for a change).
Then what only the JetStream bucket has: creating or binding it, its TTL, and a server that
cannot hold it."""

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import nats
import pytest
from nats.aio.client import Client

from interaction_worker.ledger.store import (
    Conflict,
    Entry,
    KeyValueStore,
    MemoryStore,
    StoreUnavailable,
)
from interaction_worker.subscribers.ledger_store import JetStreamStore
from interaction_worker.testing import NatsServerFactory

# The keys the ledger writes: a kind, then the call id encoded for a subject.
KEYS = ["tool.call-1", "mcp.a=2Eb", "output.=C3=A9"]


def unique_bucket() -> str:
    return f"ledger_{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def nats_client(nats_url: str) -> AsyncIterator[Client]:
    client = await nats.connect(nats_url, max_reconnect_attempts=1)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def buckets(nats_client: Client) -> AsyncIterator[list[str]]:
    """Names of buckets a test creates; each is deleted at teardown."""
    names: list[str] = []
    try:
        yield names
    finally:
        js = nats_client.jetstream()
        for name in names:
            try:
                await js.delete_key_value(name)
            except nats.js.errors.NotFoundError:
                pass


@pytest.fixture
def jetstream_store(
    nats_client: Client, buckets: list[str]
) -> Callable[..., JetStreamStore]:
    """`jetstream_store(ttl=…)`: a store on a bucket of its own (not opened: the first use opens it)."""

    def make(*, bucket: str | None = None, ttl: float = 60.0) -> JetStreamStore:
        name = bucket or unique_bucket()
        buckets.append(name)
        return JetStreamStore(nats_client, bucket=name, ttl=ttl, timeout=5.0)

    return make


@pytest.fixture(params=["memory", "jetstream"])
def store(
    request: pytest.FixtureRequest, jetstream_store: Callable[..., JetStreamStore]
) -> KeyValueStore:
    if request.param == "memory":
        return MemoryStore()
    return jetstream_store()


# --- The contract: both stores ---------------------------------------------------------------


@pytest.mark.parametrize("key", KEYS)
async def test_a_created_key_reads_back_at_its_revision(
    store: KeyValueStore, key: str
) -> None:
    assert await store.get(key) is None

    revision = await store.create(key, b'{"state":"claimed"}')

    assert revision >= 1
    assert await store.get(key) == Entry(b'{"state":"claimed"}', revision)


async def test_an_empty_value_is_a_value(store: KeyValueStore) -> None:
    revision = await store.create("tool.empty", b"")

    assert await store.get("tool.empty") == Entry(b"", revision)


async def test_a_second_create_conflicts_and_keeps_the_first_value(
    store: KeyValueStore,
) -> None:
    revision = await store.create("tool.c", b"first")

    with pytest.raises(Conflict):
        await store.create("tool.c", b"second")
    assert await store.get("tool.c") == Entry(b"first", revision)


async def test_of_concurrent_creates_exactly_one_wins(store: KeyValueStore) -> None:
    outcomes = await asyncio.gather(
        *(store.create("tool.race", f"{n}".encode()) for n in range(5)),
        return_exceptions=True,
    )

    won = [o for o in outcomes if isinstance(o, int)]
    assert len(won) == 1
    assert all(isinstance(o, Conflict) for o in outcomes if not isinstance(o, int))
    entry = await store.get("tool.race")
    assert entry is not None and entry.revision == won[0]


async def test_an_update_at_the_current_revision_writes_a_later_one(
    store: KeyValueStore,
) -> None:
    first = await store.create("tool.u", b"claimed")

    second = await store.update("tool.u", b"started", first)
    third = await store.update("tool.u", b"done", second)

    assert first < second < third
    assert await store.get("tool.u") == Entry(b"done", third)


async def test_an_update_at_a_stale_revision_conflicts(store: KeyValueStore) -> None:
    first = await store.create("tool.u", b"claimed")
    second = await store.update("tool.u", b"started", first)

    with pytest.raises(Conflict):
        await store.update("tool.u", b"stolen", first)
    assert await store.get("tool.u") == Entry(b"started", second)


@pytest.mark.parametrize("revision", [0, -1, 1, 10_000])
async def test_an_update_of_an_absent_key_conflicts(
    store: KeyValueStore, revision: int
) -> None:
    # 0 would mean "only if absent" to nats-py: it must not make an update a create.
    with pytest.raises(Conflict):
        await store.update("tool.absent", b"x", revision)
    assert await store.get("tool.absent") is None


async def test_a_delete_at_the_current_revision_removes_the_key(
    store: KeyValueStore,
) -> None:
    revision = await store.create("tool.d", b"claimed")

    await store.delete("tool.d", revision)

    assert await store.get("tool.d") is None


async def test_a_delete_at_a_stale_revision_conflicts(store: KeyValueStore) -> None:
    first = await store.create("tool.d", b"claimed")
    second = await store.update("tool.d", b"started", first)

    with pytest.raises(Conflict):
        await store.delete("tool.d", first)
    assert await store.get("tool.d") == Entry(b"started", second)


@pytest.mark.parametrize("revision", [0, -1])
async def test_a_delete_at_no_revision_conflicts(
    store: KeyValueStore, revision: int
) -> None:
    # nats-py sends no expected revision for 0: the delete would be unconditional.
    current = await store.create("tool.d", b"claimed")

    with pytest.raises(Conflict):
        await store.delete("tool.d", revision)
    assert await store.get("tool.d") == Entry(b"claimed", current)


async def test_deleting_a_deleted_or_absent_key_conflicts(
    store: KeyValueStore,
) -> None:
    revision = await store.create("tool.d", b"claimed")
    await store.delete("tool.d", revision)

    with pytest.raises(Conflict):
        await store.delete("tool.d", revision)
    with pytest.raises(Conflict):
        await store.delete("tool.never", revision)


async def test_a_deleted_key_can_be_created_again_and_updated(
    store: KeyValueStore,
) -> None:
    first = await store.create("tool.again", b"one")
    await store.delete("tool.again", first)

    second = await store.create("tool.again", b"two")
    third = await store.update("tool.again", b"three", second)

    assert first < second < third
    assert await store.get("tool.again") == Entry(b"three", third)
    with pytest.raises(Conflict):
        await store.create("tool.again", b"four")


async def test_revisions_increase_across_the_whole_store(store: KeyValueStore) -> None:
    a = await store.create("tool.a", b"a")
    b = await store.create("tool.b", b"b")
    a2 = await store.update("tool.a", b"a2", a)
    await store.delete("tool.b", b)
    c = await store.create("tool.c", b"c")

    assert a < b < a2 < c


async def test_changed_returns_the_entry_another_task_wrote(
    store: KeyValueStore,
) -> None:
    revision = await store.create("tool.w", b"claimed")

    async def later() -> int:
        await asyncio.sleep(0.1)
        return await store.update("tool.w", b"done", revision)

    async with asyncio.TaskGroup() as tasks:
        waited = tasks.create_task(store.changed("tool.w", revision, 5.0))
        written = tasks.create_task(later())

    assert waited.result() == Entry(b"done", written.result())


async def test_changed_returns_none_when_another_task_deletes_the_key(
    store: KeyValueStore,
) -> None:
    revision = await store.create("tool.w", b"claimed")

    async def later() -> None:
        await asyncio.sleep(0.1)
        await store.delete("tool.w", revision)

    async with asyncio.TaskGroup() as tasks:
        waited = tasks.create_task(store.changed("tool.w", revision, 5.0))
        tasks.create_task(later())

    assert waited.result() is None


async def test_changed_ignores_writes_to_other_keys(store: KeyValueStore) -> None:
    revision = await store.create("tool.w", b"claimed")

    async def later() -> int:
        await asyncio.sleep(0.05)
        await store.create("tool.w2", b"other")
        await store.create("tool.w.x", b"below")  # a key under this one, for a subject
        await asyncio.sleep(0.1)
        return await store.update("tool.w", b"done", revision)

    async with asyncio.TaskGroup() as tasks:
        waited = tasks.create_task(store.changed("tool.w", revision, 5.0))
        written = tasks.create_task(later())

    assert waited.result() == Entry(b"done", written.result())


async def test_changed_returns_at_once_when_the_key_is_past_the_revision(
    store: KeyValueStore,
) -> None:
    first = await store.create("tool.w", b"claimed")
    second = await store.update("tool.w", b"done", first)

    started = time.monotonic()
    entry = await store.changed("tool.w", first, 5.0)

    assert entry == Entry(b"done", second)
    assert time.monotonic() - started < 1.0


async def test_changed_returns_none_at_once_for_a_deleted_or_absent_key(
    store: KeyValueStore,
) -> None:
    revision = await store.create("tool.w", b"claimed")
    await store.delete("tool.w", revision)

    started = time.monotonic()
    assert await store.changed("tool.w", revision, 5.0) is None
    assert await store.changed("tool.never", 1, 5.0) is None
    assert time.monotonic() - started < 2.0


async def test_changed_times_out_when_nothing_changes(store: KeyValueStore) -> None:
    revision = await store.create("tool.w", b"claimed")

    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await store.changed("tool.w", revision, 0.2)

    assert 0.2 <= time.monotonic() - started < 2.0
    assert await store.get("tool.w") == Entry(b"claimed", revision)


async def test_a_cancelled_wait_is_cancelled(store: KeyValueStore) -> None:
    revision = await store.create("tool.w", b"claimed")
    waiting = asyncio.create_task(store.changed("tool.w", revision, 5.0))
    await asyncio.sleep(0.1)

    waiting.cancel()

    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await store.update("tool.w", b"done", revision) > revision


# --- JetStream only ---------------------------------------------------------------------------


async def test_open_creates_the_bucket_once_however_often_it_is_called(
    jetstream_store: Callable[..., JetStreamStore], nats_client: Client
) -> None:
    store = jetstream_store(ttl=30.0)

    await asyncio.gather(*(store.open() for _ in range(5)))
    await store.open()
    revision = await store.create("tool.x", b"x")
    # A second store, as a second worker: it binds the bucket the first created.
    other = JetStreamStore(nats_client, bucket=store.bucket, ttl=30.0)
    await asyncio.gather(other.open(), other.open())

    assert await other.get("tool.x") == Entry(b"x", revision)
    status = await (await nats_client.jetstream().key_value(store.bucket)).status()
    assert (status.ttl, status.history) == (30.0, 1)


async def test_stores_opening_the_same_new_bucket_at_once_share_it(
    nats_client: Client, buckets: list[str]
) -> None:
    bucket = unique_bucket()
    buckets.append(bucket)
    stores = [
        JetStreamStore(nats_client, bucket=bucket, ttl=ttl) for ttl in (30, 30, 40)
    ]

    await asyncio.gather(*(s.open() for s in stores))

    revision = await stores[0].create("tool.x", b"x")
    assert all([await s.get("tool.x") == Entry(b"x", revision) for s in stores])


async def test_entries_expire_after_the_bucket_ttl(
    jetstream_store: Callable[..., JetStreamStore],
) -> None:
    store = jetstream_store(ttl=1.0)
    await store.create("tool.short", b"claimed")
    started = time.monotonic()

    while await store.get("tool.short") is not None:
        assert time.monotonic() - started < 5.0, "the entry outlived its TTL"
        await asyncio.sleep(0.1)

    assert time.monotonic() - started >= 0.5
    assert await store.create("tool.short", b"again") >= 1


async def test_a_bucket_with_another_ttl_is_updated_to_the_configured_one(
    jetstream_store: Callable[..., JetStreamStore],
    nats_client: Client,
    caplog: pytest.LogCaptureFixture,
) -> None:
    js = nats_client.jetstream()
    store = jetstream_store(ttl=30.0)
    old = await js.create_key_value(bucket=store.bucket, ttl=3600.0, history=1)
    revision = await old.put("tool.kept", b"kept")

    with caplog.at_level(logging.WARNING, logger="interaction_worker"):
        await store.open()

    info = await js.stream_info(f"KV_{store.bucket}")
    assert info.config.max_age == 30.0
    assert info.config.duplicate_window == 30.0  # within max_age, as the server wants
    assert await store.get("tool.kept") == Entry(b"kept", revision)
    assert [r.getMessage() for r in caplog.records] == [
        f"the idempotency ledger bucket {store.bucket} kept entries for 3600 s: "
        "updated to the configured 30 s"
    ]


async def test_a_bucket_without_expiry_is_given_the_ttl(
    jetstream_store: Callable[..., JetStreamStore], nats_client: Client
) -> None:
    js = nats_client.jetstream()
    store = jetstream_store(ttl=600.0)
    await js.create_key_value(bucket=store.bucket)

    await store.get("tool.x")

    info = await js.stream_info(f"KV_{store.bucket}")
    assert (info.config.max_age, info.config.duplicate_window) == (600.0, 120.0)


async def test_no_jetstream_on_the_server_is_store_unavailable(
    nats_server_factory: NatsServerFactory,
) -> None:
    server = nats_server_factory("-js=false")
    client = await nats.connect(server.url, max_reconnect_attempts=1)
    try:
        store = JetStreamStore(client, bucket="interaction_ledger", ttl=60.0)

        with pytest.raises(StoreUnavailable) as opening:
            await store.open()
        with pytest.raises(StoreUnavailable) as reading:
            await store.get("tool.x")  # opens first
    finally:
        await client.close()

    assert str(opening.value) == (
        "JetStream is not available on the server: "
        "cannot open the idempotency ledger bucket interaction_ledger"
    )
    assert isinstance(opening.value.__cause__, nats.js.errors.ServiceUnavailableError)
    assert str(reading.value) == str(opening.value)
    assert str(server.workdir) not in str(opening.value)


@pytest.mark.parametrize("opened", [False, True], ids=["unopened", "opened"])
async def test_a_closed_connection_is_store_unavailable(
    nats_url: str, buckets: list[str], opened: bool
) -> None:
    client = await nats.connect(nats_url)
    bucket = unique_bucket()
    buckets.append(bucket)
    store = JetStreamStore(client, bucket=bucket, ttl=60.0)
    if opened:
        revision = await store.create("tool.x", b"x")
    else:
        revision = 1
    await client.close()

    operations: list[Callable[[], Awaitable[object]]] = [
        lambda: store.get("tool.x"),
        lambda: store.create("tool.y", b"y"),
        lambda: store.update("tool.x", b"x2", revision),
        lambda: store.delete("tool.x", revision),
        lambda: store.changed("tool.x", revision, 1.0),
    ]
    for operation in operations:
        with pytest.raises(StoreUnavailable, match="the NATS connection is closed"):
            await operation()


async def test_settings_the_server_would_refuse_are_refused_at_once(
    nats_client: Client,
) -> None:
    for bad in ({"bucket": "a.b"}, {"ttl": 0.0}, {"replicas": 0}, {"timeout": -1.0}):
        settings: dict[str, object] = {"bucket": "ok", "ttl": 1.0, **bad}
        with pytest.raises(ValueError):
            JetStreamStore(nats_client, **settings)  # type: ignore[arg-type]
