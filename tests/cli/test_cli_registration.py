"""`run module:worker` with a tool, MCP client or sink of the wrong shape in the file: one line naming
it and the attribute, exit 2, before anything starts."""

import sys
import uuid
from pathlib import Path

import pytest

from interaction_worker.cli import main

APP = """
from interaction_worker import InteractionWorker, Sandbox


class Lookup:
    name = "lookup"
    input_schema = {"type": "object"}

    async def validate(self, arguments):
        raise ValueError("never awaited")

    async def execute(self, arguments, context):
        return {"status": "success", "content": "ok"}


worker = InteractionWorker(tools=[Lookup()], sandbox=Sandbox(tools=["lookup"]))
"""


def test_run_refuses_a_tool_of_the_wrong_shape_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = f"app_{uuid.uuid4().hex}"
    (tmp_path / f"{module}.py").write_text(APP, encoding="utf-8")
    config = tmp_path / "worker.yaml"
    config.write_text("{}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # run puts the directory first

    # A server that is not there: were the tool accepted, the start would end in a connect error.
    unreachable = "nats://127.0.0.1:9"
    code = main(
        ["run", f"{module}:worker", "--config", str(config), "--nats-url", unreachable]
    )

    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [
        "interaction-worker: Invalid tool lookup: validate must be a plain method, not async"
    ]
