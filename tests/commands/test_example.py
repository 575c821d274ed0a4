"""`examples/commands.py` runs as documented and prints what each step does; the README's protocol
and the example's served worker keep a command that breaks a field's `json_schema` from its handler
(the schema is not enforced: their checks are)."""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from interaction_worker import CommandRejected, InteractionWorker

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "commands.py"


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


def readme_command_worker() -> InteractionWorker:
    """The worker of the README's command-protocol example, run as written."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Commands a model may ask for", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None
    namespace: dict[str, Any] = {}
    exec(code[1], namespace)
    worker = namespace["worker"]
    assert isinstance(worker, InteractionWorker)
    return worker


def example_worker() -> InteractionWorker:
    spec = importlib.util.spec_from_file_location("commands_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    worker = module.worker
    assert isinstance(worker, InteractionWorker)
    return worker


@pytest.mark.parametrize("build", [readme_command_worker, example_worker])
async def test_a_text_that_is_not_a_string_never_reaches_the_handler(
    build: Any,
) -> None:
    dispatcher = build().commands
    assert dispatcher is not None

    with pytest.raises(CommandRejected) as rejected:
        await dispatcher.dispatch({"type": "reply", "text": 5})
    answered = await dispatcher.dispatch({"type": "reply", "text": "Hi"})

    assert (rejected.value.code, rejected.value.message) == (
        "CHECK_FAILED",
        "text must be a string",
    )
    assert answered == {"id": "reply", "result": "Explanation: Hi"}
