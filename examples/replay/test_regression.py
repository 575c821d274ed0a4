"""A regression test: the recorded session's requests sent again to the worker as it is now, each
outcome compared with the recorded one. `serve_worker` and `replay_requests` come from
interaction-worker's pytest plugin; a tool whose output changed fails this test with the difference."""

import shutil
from pathlib import Path

import pytest

from interaction_worker.testing.recorded import ReplayRequests
from interaction_worker.testing.served import ServeWorker

HERE = Path(__file__).parent
SESSION = HERE / "session.jsonl"


@pytest.mark.anyio
async def test_the_worker_still_answers_the_session_as_recorded(
    serve_worker: ServeWorker, replay_requests: ReplayRequests
) -> None:
    handle = await serve_worker(workspace=HERE / "workspace")

    report = await replay_requests(SESSION, handle)

    report.assert_identical()
    assert (report.identical, report.not_compared) == (6, 0)


@pytest.mark.anyio
async def test_a_changed_file_is_reported_with_the_calls_it_changed(
    serve_worker: ServeWorker, replay_requests: ReplayRequests, tmp_path: Path
) -> None:
    workspace = shutil.copytree(HERE / "workspace", tmp_path / "workspace")
    (workspace / "docs" / "orders.csv").write_text("order,status\n12,shipped\n")
    handle = await serve_worker(workspace=workspace)

    report = await replay_requests(SESSION, handle)

    changed = {(d.id, d.path) for d in report.differences}
    assert {call for call, _ in changed} == {"find-todo", "count-orders"}
    with pytest.raises(AssertionError, match="count-orders"):
        report.assert_identical()
