"""FileSink: one whole JSON line per delivery, accepted only once fsynced, with group commit."""

import asyncio
import contextvars
import gc
import json
import stat
import threading
import weakref
from pathlib import Path
from typing import Any

import pytest

from interaction_worker import DeliveryContext, OutputRequest
from interaction_worker.nodes import deliver_output
from interaction_worker.sinks import FileSink
from interaction_worker.sinks import file as file_sink

WRITE_FAILED = {"code": "SINK_WRITE_FAILED", "message": "File sink write failed"}


def _request(delivery_id: str, text: str = "hello") -> OutputRequest:
    return OutputRequest.model_validate(
        {"deliveryId": delivery_id, "message": {"role": "assistant", "content": text}}
    )


async def _deliver(sink: FileSink, delivery_id: str, text: str = "hello") -> Any:
    return await sink.deliver(_request(delivery_id, text), DeliveryContext(delivery_id))


def _lines(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    return [json.loads(line) for line in raw.split(b"\n")[:-1]]


async def test_a_delivery_is_its_wire_json_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deliveries.jsonl"
    sink = FileSink(path)
    request = OutputRequest.model_validate(
        {
            "deliveryId": "d-1",
            "message": {"role": "assistant", "content": "two\\nlines ✓"},
            "artifacts": [{"name": "r", "reference": {"uri": "s3://b/r"}}],
        }
    )
    receipt = await deliver_output(request, sink)
    await sink.close()
    assert receipt.to_wire() == {"deliveryId": "d-1", "status": "accepted"}
    assert path.read_bytes() == request.to_json() + b"\n"
    assert _lines(path) == [request.to_wire()]
    assert sink.fsync_count == 1
    assert sink.name == "file"


async def test_the_file_is_created_0600_with_its_parents(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "deliveries.jsonl"
    sink = FileSink(path, name="audit")
    assert not path.exists()  # opened on the first delivery, not before
    await _deliver(sink, "d-1")
    await sink.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sink.name == "audit"


async def test_an_existing_file_is_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "deliveries.jsonl"
    path.write_bytes(b'{"old":1}\n')
    sink = FileSink(path)
    await _deliver(sink, "d-1")
    await sink.close()
    assert [line.get("deliveryId") for line in _lines(path)] == [None, "d-1"]


async def test_a_torn_last_line_is_ended_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "deliveries.jsonl"
    path.write_bytes(b'{"deliveryId":"d-0","mess')  # a crash in the middle of a line
    sink = FileSink(path)
    await _deliver(sink, "d-1")
    await sink.close()
    torn, line = path.read_bytes().split(b"\n")[:2]
    assert torn == b'{"deliveryId":"d-0","mess'
    assert json.loads(line)["deliveryId"] == "d-1"


async def test_a_thousand_concurrent_deliveries_share_few_fsyncs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "deliveries.jsonl"
    sink = FileSink(path)
    ids = [f"d-{n}" for n in range(1000)]
    receipts = await asyncio.gather(*(_deliver(sink, i, f"text {i}") for i in ids))
    await sink.close()
    assert all(r["status"] == "accepted" for r in receipts)
    assert [r["deliveryId"] for r in receipts] == ids
    lines = _lines(path)
    assert len(lines) == 1000
    assert sorted(line["deliveryId"] for line in lines) == sorted(ids)
    assert all(
        line["message"]["content"] == f"text {line['deliveryId']}" for line in lines
    )
    print(f"fsync_count for 1000 concurrent deliveries: {sink.fsync_count}")
    assert 1 <= sink.fsync_count < 1000


async def test_deliveries_arriving_while_a_batch_commits_share_the_next(
    tmp_path: Path,
) -> None:
    path = tmp_path / "deliveries.jsonl"
    sink = FileSink(path)
    first = asyncio.ensure_future(_deliver(sink, "d-first"))
    for _ in range(3):
        await asyncio.sleep(
            0
        )  # yields only: the first batch may or may not be in its thread
    rest = [asyncio.ensure_future(_deliver(sink, f"d-{n}")) for n in range(20)]
    receipts = await asyncio.gather(first, *rest)
    await sink.close()
    assert all(r["status"] == "accepted" for r in receipts)
    assert len(_lines(path)) == 21
    assert sink.fsync_count <= 2  # never one per late delivery


async def test_every_receipt_waits_for_an_fsync(tmp_path: Path) -> None:
    path = tmp_path / "deliveries.jsonl"
    sink = FileSink(path)
    for n in range(5):
        before = sink.fsync_count
        receipt = await _deliver(sink, f"d-{n}")
        assert receipt["status"] == "accepted"
        assert sink.fsync_count == before + 1
    await sink.close()


async def test_a_write_failure_is_unknown_without_the_path(tmp_path: Path) -> None:
    # The parent is a regular file: refused even to root, who ignores permission bits.
    blocker = tmp_path / "secret-dir"
    blocker.write_text("not a directory", encoding="utf-8")
    sink = FileSink(blocker / "deliveries.jsonl")
    receipts = await asyncio.gather(*(_deliver(sink, f"d-{n}") for n in range(3)))
    for n, receipt in enumerate(receipts):
        assert receipt == {
            "deliveryId": f"d-{n}",
            "status": "unknown",
            "error": WRITE_FAILED,
        }
        assert "secret-dir" not in json.dumps(receipt)
    assert sink.fsync_count == 0


async def test_a_failed_sink_recovers_once_the_cause_is_gone(tmp_path: Path) -> None:
    parent = tmp_path / "out"
    parent.write_text("in the way", encoding="utf-8")
    sink = FileSink(parent / "deliveries.jsonl")
    assert (await _deliver(sink, "d-1"))["status"] == "unknown"
    parent.unlink()
    assert (await _deliver(sink, "d-2"))["status"] == "accepted"
    await sink.close()
    assert [line["deliveryId"] for line in _lines(parent / "deliveries.jsonl")] == [
        "d-2"
    ]


async def test_through_deliver_output_a_failure_is_a_valid_unknown_receipt(
    tmp_path: Path,
) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    sink = FileSink(tmp_path / "file" / "deliveries.jsonl")
    body = {"deliveryId": "d-1", "message": {"role": "assistant", "content": "x"}}
    receipt = await deliver_output(body, sink)
    assert receipt.to_wire() == {
        "deliveryId": "d-1",
        "status": "unknown",
        "error": WRITE_FAILED,
    }


async def test_close_waits_for_pending_lines(tmp_path: Path) -> None:
    path = tmp_path / "deliveries.jsonl"
    sink = FileSink(path)
    pending = [asyncio.ensure_future(_deliver(sink, f"d-{n}")) for n in range(50)]
    await asyncio.sleep(0)
    await sink.close()
    assert all(task.done() for task in pending)
    assert len(_lines(path)) == 50
    await asyncio.gather(*pending)


async def test_a_delivery_after_close_reopens_the_file(tmp_path: Path) -> None:
    path = tmp_path / "deliveries.jsonl"
    sink = FileSink(path)
    await _deliver(sink, "d-1")
    await sink.close()
    await sink.close()  # closing twice is harmless
    assert (await _deliver(sink, "d-2"))["status"] == "accepted"
    await sink.close()
    assert [line["deliveryId"] for line in _lines(path)] == ["d-1", "d-2"]


async def test_a_cancelled_delivery_does_not_break_the_batch(tmp_path: Path) -> None:
    path = tmp_path / "deliveries.jsonl"
    sink = FileSink(path)
    cancelled = asyncio.ensure_future(_deliver(sink, "d-cancelled"))
    kept = asyncio.ensure_future(_deliver(sink, "d-kept"))
    await asyncio.sleep(0)
    cancelled.cancel()
    assert (await kept)["status"] == "accepted"
    await sink.close()
    assert cancelled.cancelled()
    # Its line was already queued: written, but its caller never learnt it (an unknown outcome).
    assert {line["deliveryId"] for line in _lines(path)} == {"d-cancelled", "d-kept"}


async def test_the_writer_keeps_nothing_of_the_delivery_that_started_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    committing, release = threading.Event(), threading.Event()
    commit = file_sink._commit

    def slow_commit(fd: int | None, path: Path, data: bytes) -> int:
        committing.set()
        release.wait(5)
        return commit(fd, path, data)

    monkeypatch.setattr(file_sink, "_commit", slow_commit)
    sink = FileSink(tmp_path / "deliveries.jsonl")
    alive: list[weakref.ref[Held]] = []

    async def first() -> Any:
        held = Held()  # what a delivery's context holds (its ledger claim, its trace)
        alive.append(weakref.ref(held))
        REQUEST.set(held)
        del held
        return await _deliver(sink, "d-first")

    delivery = asyncio.create_task(first())
    try:
        await asyncio.to_thread(committing.wait, 5)
        delivery.cancel()  # its caller gives up; the writer goes on with the batch
        await asyncio.gather(delivery, return_exceptions=True)
        del delivery
        for _ in range(3):  # the loop's callbacks of the ended task run and let it go
            await asyncio.sleep(0)
        gc.collect()
        assert alive[0]() is None
    finally:
        release.set()
        await sink.close()


class Held:
    pass


REQUEST: contextvars.ContextVar[Held] = contextvars.ContextVar("request")
