"""examples/ui_fanout.py against the session's nats-server, as a user runs it."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BOUND = (
    60  # seconds: a Python process start plus a few round trips, on a loaded CI machine
)


def test_two_live_uis_and_a_late_one_see_every_delivery(nats_url: str) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("INTERACTION_")
    }
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "ui_fanout.py"),
            "--nats-url",
            nats_url,
            "--count",
            "4",
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    receipts = [line["receipt"] for line in lines[:4]]
    ids = [receipt["deliveryId"] for receipt in receipts]
    assert len(set(ids)) == 4
    for receipt in receipts:
        assert receipt["status"] == "accepted"
        assert receipt["metadata"] == {
            "sinks": {
                "chat": {"status": "accepted"},
                "log": {"status": "accepted"},
                "history": {"status": "accepted"},
            }
        }
    assert lines[4:] == [
        {"ui": "chat", "received": ids},
        {"ui": "log", "received": ids},
        {"ui": "late", "replayed": ids},
    ]
