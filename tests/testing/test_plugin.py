"""The pytest plugin as its users meet it: a test file of theirs, with no conftest, run by a pytest
of its own (`pytester.runpytest_subprocess`), which loads the plugin through the package's `pytest11`
entry point as their pytest does.

Each run starts an interpreter, imports the package and starts a nats-server (2-4 s on two cores), so
the user's tests share one run: a file that must pass whole, and a file whose single test must fail
with the replay's differences.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

# A user's helper module: a served worker's traffic captured the way `interaction-worker record`
# writes it (one subscriber on P.>, each message a line of format.py), so the replays are tested on
# real traffic rather than on hand-written lines.
TRAFFIC = '''
import asyncio
from datetime import UTC, datetime

import anyio
import nats
import pytest

from interaction_worker.client import InteractionRequestError
from interaction_worker.recording.format import FORMAT, VERSION, RecordedMessage, encode_line

CONFIG = {"tools": {"read_text": {}}, "output": {"sinks": []}}
# Three requests (two read_text calls and a call of an unknown tool); two results, two
# observations and a dead letter.
MESSAGES = 8


def now():
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def record(serve_worker, nats_url, workspace, path):
    """Serve a worker on `workspace`, call it, and write what went over its prefix to `path`."""
    handle = await serve_worker(CONFIG, workspace=workspace)
    messages, changed = [], asyncio.Event()

    async def on_message(msg):
        messages.append(
            RecordedMessage(
                seq=len(messages) + 1,
                at=now(),
                subject=msg.subject,
                data=msg.data,
                headers=msg.headers or None,
                reply=bool(msg.reply),
            )
        )
        changed.set()

    nc = await nats.connect(nats_url)
    try:
        await nc.subscribe(f"{handle.prefix}.>", cb=on_message)
        await nc.flush()
        await nc.flush()
        await handle.client.call_tool("read_text", path="a.txt", call_id="c-1")
        await handle.client.call_tool("read_text", path="b.txt", call_id="c-2")
        with pytest.raises(InteractionRequestError):
            await handle.client.call_tool("no_such_tool", call_id="c-3")
        with anyio.fail_after(10):
            while len(messages) < MESSAGES:
                changed.clear()
                await changed.wait()
    finally:
        await nc.close()
    header = {
        "format": FORMAT,
        "version": VERSION,
        "prefix": handle.prefix,
        "startedAt": messages[0].at,
        "subjects": [f"{handle.prefix}.>"],
        "recorder": "a test",
    }
    lines = [header, *(message.to_wire() for message in messages)]
    path.write_bytes(b"".join(encode_line(line) for line in lines))
    return handle, messages
'''

USER_TESTS = """
import asyncio
import json
from pathlib import Path

import anyio
import httpx
import nats
import pytest
from traffic import CONFIG, record

from interaction_worker.client import InteractionClient, NoWorkerError

SERVED_PREFIXES = []


def workspace(root, text):
    root.mkdir()
    (root / "a.txt").write_text(text)
    (root / "b.txt").write_text("unchanged")
    return root


@pytest.mark.anyio
async def test_the_session_server_takes_connections(nats_server):
    Path("server.pid").write_text(str(nats_server.pid))
    nc = await nats.connect(nats_server.url)
    await nc.flush()
    await nc.close()


@pytest.mark.anyio
async def test_a_configured_worker_answers_read_text(serve_worker, tmp_path):
    (tmp_path / "a.txt").write_text("hello")
    handle = await serve_worker(CONFIG, workspace=tmp_path)
    SERVED_PREFIXES.append(handle.prefix)
    outcome = await handle.client.call_tool("read_text", path="a.txt")
    assert outcome.result.status == "success"
    assert "hello" in json.dumps(outcome.result.to_wire())


@pytest.mark.anyio
async def test_two_workers_in_one_test_serve_their_own_prefixes(serve_worker, tmp_path):
    first = await serve_worker(CONFIG, workspace=workspace(tmp_path / "1", "first"))
    second = await serve_worker(CONFIG, workspace=workspace(tmp_path / "2", "second"))
    SERVED_PREFIXES.extend([first.prefix, second.prefix])
    assert first.prefix != second.prefix
    one = await first.client.call_tool("read_text", path="a.txt")
    two = await second.client.call_tool("read_text", path="a.txt")
    assert "first" in json.dumps(one.result.to_wire())
    assert "second" in json.dumps(two.result.to_wire())


@pytest.mark.anyio
async def test_recorded_events_are_published_as_recorded(
    serve_worker, recorded_events, nats_server, tmp_path
):
    path = tmp_path / "traffic.jsonl"
    handle, messages = await record(
        serve_worker, nats_server.url, workspace(tmp_path / "w", "hello"), path
    )
    SERVED_PREFIXES.append(handle.prefix)
    events = [m for m in messages if not m.subject.endswith(".tool.call")]
    received, changed = [], asyncio.Event()

    async def on_message(msg):
        received.append(msg)
        changed.set()

    nc = await nats.connect(nats_server.url)
    try:
        await nc.subscribe("downstream.>", cb=on_message)
        await nc.flush()
        await nc.flush()
        assert await recorded_events(path, prefix="downstream") == len(events)
        with anyio.fail_after(10):
            while len(received) < len(events):
                changed.clear()
                await changed.wait()
    finally:
        await nc.close()
    expected = [
        ("downstream" + m.subject.removeprefix(handle.prefix), m.data) for m in events
    ]
    assert [(m.subject, m.data) for m in received] == expected


@pytest.mark.anyio
async def test_an_unchanged_worker_replays_identically(
    serve_worker, replay_requests, nats_server, tmp_path
):
    path = tmp_path / "traffic.jsonl"
    root = workspace(tmp_path / "w", "hello")
    recorded, _ = await record(serve_worker, nats_server.url, root, path)
    again = await serve_worker(CONFIG, workspace=root)
    SERVED_PREFIXES.extend([recorded.prefix, again.prefix])
    report = await replay_requests(path, again)
    report.assert_identical()
    assert (report.identical, report.not_compared, report.errors) == (3, 0, [])


@pytest.mark.anyio
async def test_no_worker_or_client_outlives_its_test(nats_server):
    async with httpx.AsyncClient(trust_env=False) as http:
        with anyio.fail_after(10):
            while (await http.get(f"{nats_server.monitor_url}/connz")).json()[
                "num_connections"
            ]:
                await anyio.sleep(0.05)  # the server notices closed sockets on its own time
    nc = await nats.connect(nats_server.url)
    try:
        for prefix in SERVED_PREFIXES:
            client = InteractionClient(nc, prefix=prefix, timeout=5)
            with pytest.raises(NoWorkerError):
                await client.call_tool("read_text", path="a.txt")
            await client.close()
    finally:
        await nc.close()
"""

CHANGED_FILE_TEST = """
import pytest
from traffic import record


@pytest.mark.anyio
async def test_a_changed_file_is_reported(serve_worker, replay_requests, nats_server, tmp_path):
    root = tmp_path / "w"
    root.mkdir()
    (root / "a.txt").write_text("hello")
    (root / "b.txt").write_text("unchanged")
    path = tmp_path / "traffic.jsonl"
    handle, _ = await record(serve_worker, nats_server.url, root, path)
    (root / "a.txt").write_text("goodbye")
    report = await replay_requests(path, handle)
    report.assert_identical()
"""


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_users_tests_get_a_server_workers_and_replays_and_a_readable_diff(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        traffic=TRAFFIC, test_user=USER_TESTS, test_changed=CHANGED_FILE_TEST
    )
    # The user file relies on its order (a last test checks what the others left behind).
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=6, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*FAILED test_changed.py::test_a_changed_file_is_reported*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "E * replayed 3 requests: 2 identical, 1 different, 0 not compared, 0 errors",
            'E * seq 1 test-*.tool.call id "c-1" path content',
            "E *   recorded:",
            'E *     "hello"',
            "E *   replayed:",
            'E *     "goodbye"',
        ]
    )
    pid = int((pytester.path / "server.pid").read_text())
    assert not _process_exists(pid), "the session's nats-server outlived the session"


def test_loading_the_plugin_leaves_the_heavy_imports_to_the_fixtures() -> None:
    # Every pytest run of a project that installs the package pays for what the plugin imports.
    heavy = (
        "mcp",
        "httpx",
        "interaction_worker.app",
        "interaction_worker.testing.served",
        "interaction_worker.recording",
    )
    probe = (
        "import sys, interaction_worker.testing.plugin; "
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=Path(__file__).parent,
    )
    assert out.stdout.strip() == "[]"
