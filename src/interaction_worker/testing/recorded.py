"""Recorded bus traffic as test input: the values of the `recorded_events` and `replay_requests`
fixtures (docs/replay.md 5).

A file made by `interaction-worker record` is the fixture file as it is: both read it with
`read_recording`, which checks the whole file before anything is sent, so a bad line fails the test
naming the file and line instead of half replaying it.
"""

import os
from collections.abc import Collection, Sequence
from pathlib import Path

import nats
from nats.aio.client import Client

from ..client import InteractionClient
from ..recording import ReplayReport
from ..recording.events import publish_events
from ..recording.format import read_recording
from ..recording.requests import replay_requests as replay
from .served import ServedWorker

# What a test names a recording with: `tmp_path / "x.jsonl"`, or a path relative to the current directory.
RecordingPath = str | os.PathLike[str]


class RecordedEvents:
    """`await recorded_events(path, prefix=None, speed=None, *, only=None) -> int`.

    Publishes the recording's events as the worker published them (replay.md 3), on one connection
    per test, opened at the first call, closed at teardown.
    """

    def __init__(self, nats_url: str) -> None:
        self.nats_url = nats_url
        self._nc: Client | None = None

    async def __call__(
        self,
        path: RecordingPath,
        prefix: str | None = None,
        speed: float | None = None,
        *,
        only: Collection[str] | None = None,
    ) -> int:
        """Publish them in `seq` order and return how many, once the server has them all.

        Args:
            prefix: publish under this prefix instead of the recording's (a `serve_worker`
                handle's, say).
            speed: keep the recorded gaps divided by `speed`; None publishes as fast as possible.
            only: the families to publish (`tool`, `mcp`, `output`, `command`, `dead`).

        Raises:
            RecordingError: the file is not a valid recording.
        """
        recording = read_recording(Path(path))
        if self._nc is None:
            self._nc = await nats.connect(
                self.nats_url, name="interaction-worker-test-events"
            )
        return await publish_events(
            self._nc, recording, prefix=prefix, speed=speed, only=only
        )

    async def aclose(self) -> None:
        if self._nc is not None:
            await self._nc.close()


class ReplayRequests:
    """`await replay_requests(path, handle, id_suffix=None, ignore=()) -> ReplayReport`.

    Sends the recording's requests to a worker (replay.md 4) with its outcomes compared to the
    recorded ones; `report.assert_identical()` fails the test with the differences.
    """

    async def __call__(
        self,
        path: RecordingPath,
        handle: ServedWorker | InteractionClient,
        id_suffix: str | None = None,
        ignore: Sequence[str] = (),
    ) -> ReplayReport:
        """Replay them and return the report.

        Args:
            handle: a `serve_worker` handle, or a client of a worker served elsewhere (its
                prefix is where the requests go).
            id_suffix: appended to every call id and delivery id, so that a worker with its
                ledger on runs them afresh.
            ignore: more volatile fields to leave out of the comparison (`metadata.*.at`).

        Raises:
            RecordingError: the file is not a valid recording.
        """
        recording = read_recording(Path(path))
        client = handle.client if isinstance(handle, ServedWorker) else handle
        return await replay(
            client, recording, compare=True, id_suffix=id_suffix, ignore=ignore
        )
