"""`examples/commands.py` runs as documented and prints what each step does."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "commands.py"


def test_the_example_prints_each_step() -> None:
    finished = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=30,
        check=True,
    )
    printed: list[tuple[str, Any]] = []
    for line in finished.stdout.splitlines():
        label, _, body = line.partition(": ")
        printed.append((label, json.loads(body)))
    text = "A plain object can implement an interface."
    assert [label for label, _ in printed] == [
        "receive",
        "rejected",
        "model schema",
        "dispatch",
        "dispatch",
        "catalog",
        "parse",
        "command schema",
        "manifest",
    ]
    values = [value for _, value in printed]
    assert values[0] == {"id": "reply", "result": {"type": "reply", "text": text}}
    assert values[1] == {
        "code": "CHECK_FAILED",
        "message": "text must be a string",
        "path": "",
    }
    assert values[2]["anyOf"][0]["properties"] == {
        "type": {"const": "reply"},
        "text": {"type": "string"},
    }
    assert values[3] == {"id": "reply", "result": "Explanation: " + text}
    assert values[4] == {
        "id": "unavailable",
        "result": "The material is temporarily unavailable",
    }
    assert [entry["id"] for entry in values[5]] == ["reply", "unavailable"]
    assert values[6] == {"text": "interface notes"}
    assert values[7]["title"] == "reply" and values[7]["required"] == ["text"]
    assert values[8] == [
        {"id": "reply", "fields": {"text": {"required": True, "json_schema": {}}}}
    ]
