"""The ledger's state machine (wire.md 8) over the in-memory store, which follows JetStream's
revision semantics (the same contract runs against a real bucket in tests/bus/test_ledger_store.py).
Leases are driven by an injected clock; entries left by a crashed worker are planted as such."""

import asyncio
import json
from typing import Any

import pytest

from interaction_worker.ledger import (
    Claim,
    Conflict,
    CorruptRecord,
    Encoded,
    Entry,
    FingerprintMismatch,
    Ledger,
    MemoryStore,
    Record,
    Recorded,
    StillRunning,
    StoreUnavailable,
    fingerprint,
)
from interaction_worker.ledger.records import State

KEY = "tool.call-1"
PRINT = fingerprint({"tool": "lookup", "arguments": {"q": "x"}})


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def ledger(store: Any, clock: Clock | None = None, **options: Any) -> Ledger:
    return Ledger(store, worker="w-1", clock=clock or Clock(), **options)


def document(store: MemoryStore, key: str = KEY) -> dict[str, Any]:
    """The record under `key` as JSON (read directly: the helper stays synchronous)."""
    loaded: dict[str, Any] = json.loads(store._entries[key].value)
    return loaded


async def plant(store: MemoryStore, state: State, lease_until: float) -> None:
    """The entry a crashed worker left."""
    record = Record(
        state=state, fingerprint=PRINT, worker="w-dead", at=0.0, lease_until=lease_until
    )
    await store.create(KEY, record.encode())


async def test_a_first_call_is_claimed_started_and_recorded() -> None:
    store = MemoryStore()
    clock = Clock()
    claim = await ledger(store, clock, lease=30).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(claim, Claim) and not claim.unknown
    assert document(store) == {
        "state": "claimed",
        "worker": "w-1",
        "at": "2027-01-15T08:00:00.000Z",
        "leaseUntil": "2027-01-15T08:00:30.000Z",
        "fingerprint": PRINT,
    }

    await claim.start()
    assert document(store)["state"] == "started"
    await claim.done({"result": {"callId": "call-1", "status": "success"}})

    assert document(store) == {
        "state": "done",
        "worker": "w-1",
        "at": "2027-01-15T08:00:00.000Z",
        "fingerprint": PRINT,
        "result": {"callId": "call-1", "status": "success"},
    }


async def test_a_call_that_may_run_again_is_claimed_started_in_one_write() -> None:
    store = MemoryStore()
    clock = Clock()
    claim = await ledger(store, clock, lease=0.3).begin(KEY, PRINT, rerunnable=True)
    assert isinstance(claim, Claim)
    assert document(store)["state"] == "started"
    claimed = store._entries[KEY].revision

    await claim.start()  # the store holds the mark already: nothing is written

    assert claim.started
    assert store._entries[KEY].revision == claimed
    clock.now += 10
    await asyncio.sleep(0.15)  # a renewal keeps it started
    assert store._entries[KEY].revision > claimed
    assert document(store)["state"] == "started"
    await claim.done({"result": {"status": "success"}})
    assert document(store)["state"] == "done"


async def test_a_recorded_call_is_found_not_claimed_again() -> None:
    store = MemoryStore()
    first = await ledger(store).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(first, Claim)
    await first.start()
    await first.done({"receipt": {"deliveryId": "d", "status": "accepted"}})
    revision = store._entries[KEY].revision

    again = await ledger(store).begin(KEY, PRINT, rerunnable=True)

    assert again == Recorded(
        {"receipt": {"deliveryId": "d", "status": "accepted"}}, at=Clock().now
    )
    assert store._entries[KEY].revision == revision


async def test_another_call_under_a_used_id_is_refused_and_the_record_untouched() -> (
    None
):
    store = MemoryStore()
    first = await ledger(store).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(first, Claim)
    await first.done({"result": {"status": "success"}})
    before = store._entries[KEY]

    with pytest.raises(FingerprintMismatch):
        await ledger(store).begin(KEY, fingerprint({"tool": "other"}), rerunnable=False)
    assert store._entries[KEY] == before


async def test_a_retry_waits_for_the_running_attempt_and_gets_its_outcome() -> None:
    store = MemoryStore()
    first = await ledger(store).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(first, Claim)
    retry = asyncio.create_task(
        ledger(store, wait=5).begin(KEY, PRINT, rerunnable=False)
    )
    await asyncio.sleep(0.05)
    assert not retry.done()

    await first.start()
    await asyncio.sleep(0.05)
    assert not retry.done()
    await first.done({"result": {"status": "success"}})

    assert await asyncio.wait_for(retry, 1) == Recorded(
        {"result": {"status": "success"}}
    )


async def test_a_retry_that_waits_past_the_wait_is_still_running() -> None:
    store = MemoryStore()
    first = await ledger(store).begin(KEY, PRINT, rerunnable=True)
    assert isinstance(first, Claim)
    started = asyncio.get_running_loop().time()

    with pytest.raises(StillRunning):
        await ledger(store, wait=0.3).begin(KEY, PRINT, rerunnable=True)
    assert 0.3 <= asyncio.get_running_loop().time() - started < 1.0
    first.abandon()


async def test_a_retry_runs_the_call_once_a_claim_that_never_started_is_released() -> (
    None
):
    store = MemoryStore()
    first = await ledger(store).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(first, Claim)
    retry = asyncio.create_task(
        ledger(store, wait=5).begin(KEY, PRINT, rerunnable=False)
    )
    await asyncio.sleep(0.05)

    await first.release()

    second = await asyncio.wait_for(retry, 1)
    assert isinstance(second, Claim) and not second.unknown
    second.abandon()


@pytest.mark.parametrize(
    ("state", "rerunnable", "unknown"),
    [
        ("claimed", False, False),  # died before the side effect: run it
        ("started", True, False),  # an idempotent or read-only tool: run it again
        ("started", False, True),  # anything else: the outcome is unknown
    ],
)
async def test_a_stale_claim_is_taken_over_as_wire_md_8_3_says(
    state: State, rerunnable: bool, unknown: bool
) -> None:
    store = MemoryStore()
    clock = Clock()
    await plant(store, state, lease_until=clock.now - 1)
    found = ledger(store, clock, lease=30, wait=0)

    claim = await found.begin(KEY, PRINT, rerunnable=rerunnable)

    assert isinstance(claim, Claim) and claim.unknown is unknown
    # Taken over to say `unknown`, it stays started: a worker dying before that record must not
    # leave "never started" behind.
    # A call that may run again is taken over `started` at once, as it is first claimed.
    assert document(store)["state"] == (
        "started" if unknown or rerunnable else "claimed"
    )
    assert document(store)["worker"] == "w-1"
    claim.abandon()


async def test_a_started_claim_past_its_lease_is_unknown_only_once_unchanged_for_one_more() -> (
    None
):
    store = MemoryStore()
    clock = Clock()
    await plant(store, "started", lease_until=clock.now - 1)
    # Durable: its worker may be alive, reconnecting, writing its outcome (docs/wire.md 7).
    found = ledger(store, clock, lease=30, wait=0, persistent=True)
    with pytest.raises(StillRunning) as still:
        await found.begin(KEY, PRINT, rerunnable=False)
    assert still.value.lease_left == 30
    clock.now += 29
    with pytest.raises(StillRunning) as still:
        await found.begin(KEY, PRINT, rerunnable=False)
    assert still.value.lease_left == pytest.approx(1)

    # Its worker, back in time, records the outcome: nothing is taken over.
    entry = await store.get(KEY)
    assert entry is not None
    done = Record(
        state="done",
        fingerprint=PRINT,
        worker="w-dead",
        at=clock.now,
        outcome={"result": {}},
    )
    await store.update(KEY, done.encode(), entry.revision)
    clock.now += 5
    assert isinstance(await found.begin(KEY, PRINT, rerunnable=False), Recorded)


async def test_the_stale_claims_a_ledger_watches_are_bounded() -> None:
    clock = Clock()
    found = ledger(MemoryStore(), clock, lease=30)
    for index in range(20_000):
        found.stale_for(f"tool.k{index}", 1)
    assert len(found._stale) <= 10_000
    clock.now += 200  # all old: forgotten as the next one is watched
    found.stale_for("tool.new", 1)
    assert len(found._stale) == 1


async def test_a_live_claim_that_expires_during_the_wait_is_taken_over() -> None:
    store = MemoryStore()
    clock = Clock()
    loop = asyncio.get_running_loop()
    await plant(store, "started", lease_until=clock.now + 0.3)
    began = loop.time()

    waiting = asyncio.create_task(
        ledger(store, clock, wait=5, lease=0.3).begin(KEY, PRINT, rerunnable=False)
    )
    await asyncio.sleep(0.1)
    clock.now += 0.4  # the dead worker's lease runs out while the retry waits
    await asyncio.sleep(0.4)
    clock.now += 0.4  # and stays as it was for one more lease
    claim = await asyncio.wait_for(waiting, 2)

    assert isinstance(claim, Claim) and claim.unknown
    assert loop.time() - began < 1.5


async def test_the_lease_is_renewed_every_third_of_it_until_the_outcome() -> None:
    store = MemoryStore()
    clock = Clock()
    claim = await ledger(store, clock, lease=0.3).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(claim, Claim)
    await claim.start()
    first = store._entries[KEY].revision
    clock.now += 10
    await asyncio.sleep(0.25)  # two renewals

    renewed = store._entries[KEY]
    assert renewed.revision >= first + 2
    assert document(store)["state"] == "started"
    assert document(store)["leaseUntil"] == "2027-01-15T08:00:10.300Z"
    await claim.done({"result": {}})
    done = store._entries[KEY].revision
    await asyncio.sleep(0.25)
    assert store._entries[KEY].revision == done


class Flaky(MemoryStore):
    """A store that is away for the next `outage` writes, or slow to write."""

    def __init__(self) -> None:
        super().__init__()
        self.outage = 0
        self.delay = 0.0

    async def update(self, key: str, value: bytes, revision: int) -> int:
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.outage:
            self.outage -= 1
            raise StoreUnavailable("away")
        return await super().update(key, value, revision)


async def test_an_outcome_is_recorded_once_the_store_is_back() -> None:
    store = Flaky()
    claim = await ledger(store).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(claim, Claim)
    await claim.start()
    store.outage = 3

    await claim.done({"result": {"status": "success"}})

    assert document(store)["state"] == "done"


async def test_an_outcome_the_store_never_takes_leaves_the_claim_started_and_does_not_raise() -> (
    None
):
    store = Flaky()
    claim = await ledger(store, lease=0.3).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(claim, Claim)
    await claim.start()
    store.outage = 10_000

    await asyncio.wait_for(claim.done({"result": {}}), 2)

    assert document(store)["state"] == "started"


async def test_a_start_the_store_does_not_take_raises_before_the_side_effect() -> None:
    store = Flaky()
    claim = await ledger(store, lease=0.3).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(claim, Claim)
    store.outage = 10_000

    with pytest.raises(StoreUnavailable):
        await claim.start()
    assert not claim.started
    store.outage = 0
    await claim.release()
    assert KEY not in store._entries


async def test_a_start_the_store_takes_again_after_a_short_outage_marks_the_call_started() -> (
    None
):
    store = Flaky()
    claim = await ledger(store).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(claim, Claim)
    store.outage = 2  # a leader election: the next two writes fail

    await claim.start()

    assert claim.started
    assert document(store)["state"] == "started"
    claim.abandon()


async def test_a_persistent_outcome_is_written_until_stored_and_counted_while_it_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Flaky()
    found = ledger(store, lease=0.1, persistent=True)
    claim = await found.begin(KEY, PRINT, rerunnable=False)
    assert isinstance(claim, Claim)
    await claim.start()
    store.outage = 10_000
    recording = asyncio.create_task(claim.done({"result": {"status": "success"}}))
    await asyncio.sleep(0.5)  # five leases: a non-persistent claim would have given up
    assert not recording.done()
    assert found.waiting.count == 1 and found.waiting.oldest() > 0.3
    assert "waited" not in caplog.text  # nothing logged while a short outage lasts

    store.outage = 0
    assert await asyncio.wait_for(recording, 2)

    assert document(store)["state"] == "done"
    assert found.waiting.count == 0
    lines = [r.getMessage() for r in caplog.records if "waited" in r.getMessage()]
    assert len(lines) == 1 and "all stored" in lines[0], lines


async def test_an_outcome_recorded_while_a_renewal_is_writing_waits_for_it() -> None:
    store = Flaky()
    claim = await ledger(store, lease=0.15).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(claim, Claim)
    store.delay = 0.1
    await asyncio.sleep(0.07)  # the renewal is now writing, slowly

    await claim.done({"result": {"status": "success"}})

    assert document(store)["state"] == "done"
    assert not claim.lost


async def test_an_unreachable_store_refuses_the_claim() -> None:
    class Away(MemoryStore):
        async def create(self, key: str, value: bytes) -> int:
            raise StoreUnavailable("away")

    with pytest.raises(StoreUnavailable):
        await ledger(Away()).begin(KEY, PRINT, rerunnable=False)


async def test_a_value_that_is_not_a_record_is_reported_as_such() -> None:
    store = MemoryStore()
    await store.create(KEY, b"not json")

    with pytest.raises(CorruptRecord):
        await ledger(store).begin(KEY, PRINT, rerunnable=False)


@pytest.mark.parametrize(
    "value",
    [
        b'{"stream":"INTERACTION_EVENTS","seq":7}',  # a stream's PubAck
        b"[" * 100_000,  # deeper than the recursion limit
        b"\xff\xfe",
        b'{"state":"done","worker":"w","at":"2026-01-01T00:00:00.000Z",'
        b'"fingerprint":"f","result":"not an object"}',
    ],
    ids=["puback", "nested", "not-utf8", "outcome-not-an-object"],
)
async def test_an_entry_no_worker_wrote_is_corrupt_and_reported_once_without_its_content(
    value: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    await store.create(KEY, value)
    books = ledger(store)

    with caplog.at_level("WARNING", logger="interaction_worker"):
        for _ in range(3):
            with pytest.raises(CorruptRecord):
                await books.begin(KEY, PRINT, rerunnable=False)
        with pytest.raises(CorruptRecord):
            await books.lookup(KEY)

    assert books.invalid_entries == 1
    assert [r.getMessage() for r in caplog.records] == [
        f"ledger {KEY}: the entry is not a ledger record; requests with its id are "
        "refused until it expires"
    ]
    assert document_of(store) == value  # never overwritten


async def test_a_claim_overwritten_by_an_entry_no_worker_wrote_records_nothing_and_never_raises() -> (
    None
):
    store = MemoryStore()
    books = ledger(store)
    claim = await books.begin(KEY, PRINT, rerunnable=False)
    assert isinstance(claim, Claim)
    await claim.start()
    await store.update(KEY, b"not a record", claim.revision)

    recorded = await claim.done({"result": {"status": "success"}})
    await claim.release()

    assert recorded is False
    assert books.invalid_entries == 1
    assert document_of(store) == b"not a record"


def document_of(store: MemoryStore, key: str = KEY) -> bytes:
    return store._entries[key].value


def test_the_keys_reported_are_bounded_and_each_is_counted_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("interaction_worker.ledger.ledger._REPORTED_KEYS", 2)
    books = ledger(MemoryStore())

    for key in ("tool.a", "tool.b", "tool.a", "tool.c", "tool.c", "tool.a"):
        books.invalid(key)

    # `a` was forgotten once `c` came, so it is counted again; memory stays at two keys.
    assert books.invalid_entries == 4
    assert list(books._reported) == ["tool.c", "tool.a"]


def test_the_fingerprint_is_the_sha256_of_the_canonical_json() -> None:
    import hashlib

    value = {"tool": "t", "arguments": {"b": [1, 2.5, None], "a": "é"}}
    canonical = '{"arguments":{"a":"é","b":[1,2.5,null]},"tool":"t"}'
    assert fingerprint(value) == hashlib.sha256(canonical.encode()).hexdigest()
    assert fingerprint({"arguments": value["arguments"], "tool": "t"}) == fingerprint(
        value
    )
    assert fingerprint({"tool": "t", "arguments": {"n": 1}}) != fingerprint(
        {"tool": "t", "arguments": {"n": 1.0}}
    )


async def test_the_memory_store_follows_revision_semantics() -> None:
    store = MemoryStore()
    first = await store.create("k", b"1")
    with pytest.raises(Conflict):
        await store.create("k", b"2")
    second = await store.update("k", b"2", first)
    with pytest.raises(Conflict):
        await store.update("k", b"3", first)
    assert await store.get("k") == Entry(b"2", second)
    await store.delete("k", second)
    assert await store.get("k") is None
    assert await store.create("k", b"4") > second


class Late(MemoryStore):
    """Applies the next update, then reports it timed out (a write buffered while the client
    reconnected)."""

    late = False

    async def update(self, key: str, value: bytes, revision: int) -> int:
        written = await super().update(key, value, revision)
        if self.late:
            self.late = False
            raise StoreUnavailable("no answer in time")
        return written


async def test_an_outcome_write_that_timed_out_but_landed_is_not_taken_for_a_lost_claim(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Late()
    claim = await ledger(store).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(claim, Claim)
    await claim.start()
    store.late = True

    await claim.done({"result": {"status": "success"}})

    assert document(store)["state"] == "done"
    assert "taken over" not in caplog.text


async def test_a_renewal_due_while_the_outcome_is_written_never_overwrites_it() -> None:
    store = Flaky()
    claim = await ledger(store, lease=0.15).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(claim, Claim)
    await asyncio.sleep(0.03)
    store.delay = 0.1  # the outcome's write is slow; the renewal falls due meanwhile

    await claim.done({"result": {"status": "success"}})
    store.delay = 0.0
    await asyncio.sleep(0.2)

    assert document(store)["state"] == "done"


async def test_a_renewal_due_while_the_start_is_written_keeps_the_claim_started() -> (
    None
):
    store = Flaky()
    claim = await ledger(store, lease=0.15).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(claim, Claim)
    await asyncio.sleep(0.03)
    store.delay = 0.05

    await claim.start()
    await asyncio.sleep(0.1)  # the renewal written after the start

    assert document(store)["state"] == "started"
    assert store._entries[KEY].revision >= 3
    claim.abandon()


async def test_a_start_mark_that_timed_out_but_landed_is_taken_for_the_start_it_is() -> (
    None
):
    store = Late()
    claim = await ledger(store).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(claim, Claim)
    store.late = True

    await claim.start()  # its write is retried, refused, and the key found holding it

    assert claim.started
    entry = await store.get(KEY)
    assert entry is not None and claim.revision == entry.revision
    await claim.done({"result": {}})
    assert document(store)["state"] == "done"


async def test_a_claim_whose_write_landed_unseen_is_released_at_the_revision_it_holds() -> (
    None
):
    store = MemoryStore()
    claim = await ledger(store).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(claim, Claim)
    entry = await store.get(KEY)
    assert entry is not None
    # A renewal (or a start) that timed out but landed: the key is past the claim's revision.
    await store.update(KEY, claim.ledger.claim_record(PRINT, "started"), entry.revision)

    await claim.release()

    assert await store.get(KEY) is None
    retry = await ledger(store).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(retry, Claim) and not retry.unknown
    retry.abandon()


async def test_a_claim_taken_over_by_another_worker_is_never_released_by_the_first() -> (
    None
):
    store = MemoryStore()
    claim = await ledger(store).begin(KEY, PRINT, rerunnable=False)
    assert isinstance(claim, Claim)
    entry = await store.get(KEY)
    assert entry is not None
    other = Ledger(store, worker="w-2", clock=Clock())
    taken = other.claim_record(PRINT, "started")
    await store.update(
        KEY, taken, entry.revision
    )  # its lease ran out; w-2 took the key

    await claim.release()

    assert document(store)["worker"] == "w-2"


def test_an_outcome_encoded_already_is_written_with_its_own_bytes() -> None:
    result = {"callId": "c-1", "status": "success", "content": "é"}
    # The reply's JSON, as `outgoing` encoded it: a record writes these bytes, not its own.
    reply_json = '{"callId":"c-1","status":"success","content":"é"}'.encode()
    record = Record(
        state="done",
        fingerprint=PRINT,
        worker="w-1",
        at=0.0,
        outcome={"result": Encoded(result, reply_json)},
    )

    value = record.encode()

    assert value == (
        b'{"state":"done","worker":"w-1","at":"1970-01-01T00:00:00.000Z","fingerprint":"'
        + PRINT.encode()
        + b'","result":'
        + reply_json
        + b"}"
    )
    assert Record.decode(value).outcome == {"result": result}
    # Encoded as a dict is, byte for byte.
    assert (
        value
        == json.dumps(
            {**json.loads(value), "result": result},
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
    )


def test_a_tool_call_s_done_record_carries_the_result_as_its_reply_does() -> None:
    from interaction_worker.subscribers import Subjects
    from interaction_worker.subscribers.outgoing import Outgoing
    from interaction_worker.subscribers.requests.ledgered import ToolTerms

    result = {"callId": "c-1", "source": "t", "status": "success", "content": "x"}
    outgoing = Outgoing(Subjects("interaction"))
    recorded = ToolTerms(None, outgoing).record(result)  # type: ignore[arg-type]

    assert recorded is not None
    _, result_json, _ = outgoing.fit_result(result, None)
    assert type(recorded["result"]) is Encoded
    assert recorded["result"].json == result_json
    assert recorded["result"] == result


@pytest.mark.parametrize(
    "value",
    [
        {"tool": "t", "arguments": {"b": [1, 2.5, None, True], "a": "é\u2028\x01"}},
        {"z": {"y": [1e16, -0.0, 3.141592653589793]}, "a": []},
        {"server": "s", "tool": "\U0001f600", "arguments": {"n": 10**30}},
    ],
)
def test_records_and_fingerprints_are_the_json_dumps_writes(value: Any) -> None:
    import hashlib

    canonical = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert fingerprint(value) == hashlib.sha256(canonical.encode()).hexdigest()
    record = Record(
        state="done", fingerprint="f", worker="w-é", at=0.0, outcome={"result": value}
    )
    assert (
        record.encode()
        == json.dumps(
            {
                "state": "done",
                "worker": "w-é",
                "at": "1970-01-01T00:00:00.000Z",
                "fingerprint": "f",
                "result": value,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
    )
