"""`serve:` in the file and `serve=` in code (docs/configuration.md 1): the kinds a worker serves,
a clear error for a bad list in either, and the handler's kinds (what the bindings subscribe, the
calls stream captures, discovery and the metrics list) following the list."""

from pathlib import Path
from typing import Any

import pytest

from interaction_worker import InteractionWorker
from interaction_worker.app import build_worker
from interaction_worker.commands import Interaction
from interaction_worker.config import parse_settings
from interaction_worker.errors import ConfigurationError

EVERY_KIND = ("tool", "mcp", "observe", "output", "list")
KINDS_RULE = "must be a list of kinds among tool, mcp, observe, output, list, command"


def commanding(**options: Any) -> InteractionWorker:
    protocol = Interaction.define(
        command_field="type",
        commands={"note": {"category": "presentation", "fields": {}}},
    )
    dispatcher = Interaction.bind(protocol, {"note": lambda value, context: "noted"})
    return InteractionWorker(commands=dispatcher, **options)


def problems(data: object) -> list[str]:
    with pytest.raises(ConfigurationError) as raised:
        parse_settings(data, base_dir=Path("/srv"))
    return str(raised.value).splitlines()


def test_by_default_a_worker_serves_every_kind_it_can() -> None:
    assert InteractionWorker().message_handler().kinds == EVERY_KIND
    assert commanding().message_handler().kinds == (
        *EVERY_KIND,
        "command",
        "catalog",
    )


def test_a_worker_serves_only_the_kinds_it_is_told_to() -> None:
    assert InteractionWorker(serve=["tool"]).message_handler().kinds == ("tool",)
    assert InteractionWorker(serve=["list", "mcp"]).message_handler().kinds == (
        "mcp",
        "list",
    )
    assert commanding(serve=["command"]).message_handler().kinds == (
        "command",
        "catalog",
    )
    # Without a command protocol, `command` in the list is what the default list says: nothing more.
    assert InteractionWorker(serve=["tool", "command"]).message_handler().kinds == (
        "tool",
    )


@pytest.mark.parametrize(
    ("serve", "message"),
    [
        (["tool", "sk-secret /etc/passwd"], f"Worker serve {KINDS_RULE}"),
        ("tool", f"Worker serve {KINDS_RULE}"),
        ([], "Worker serve must name at least one kind"),
        (["tool", "tool"], "Worker serve names a kind twice"),
        (["command"], "serve names only command, which is served only with a command"),
    ],
)
def test_a_bad_serve_list_in_code_stops_the_construction(
    serve: Any, message: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        InteractionWorker(serve=serve)
    assert str(raised.value).startswith(message)
    assert "passwd" not in str(raised.value)


def test_a_bad_serve_list_in_the_file_is_a_problem_naming_its_key() -> None:
    assert problems({"serve": "tool"}) == [f"serve {KINDS_RULE}"]
    assert problems({"serve": []}) == [
        "serve must name at least one kind: a worker that serves nothing answers nothing"
    ]
    assert problems({"serve": ["tool", "sk-secret /etc/passwd", 3]}) == [
        "serve[1] must be one of tool, mcp, observe, output, list, command",
        "serve[2] must be one of tool, mcp, observe, output, list, command",
    ]
    assert problems({"serve": ["mcp", "mcp"]}) == ['serve[1] repeats "mcp"']


def test_the_file_says_what_run_serves_and_the_code_wins(tmp_path: Path) -> None:
    settings = parse_settings(
        {"serve": ["mcp", "tool"], "workspace": str(tmp_path)}, base_dir=tmp_path
    )
    assert settings.serve == ("tool", "mcp")
    assert settings.effective()["serve"] == ["tool", "mcp"]

    from_file = build_worker(settings)
    from_code = build_worker(settings, InteractionWorker(serve=["observe"]))

    assert from_file.message_handler().kinds == ("tool", "mcp")
    assert from_code.message_handler().kinds == ("observe",)


def test_a_file_that_serves_only_command_needs_a_command_protocol(
    tmp_path: Path,
) -> None:
    settings = parse_settings(
        {"serve": ["command"], "workspace": str(tmp_path)}, base_dir=tmp_path
    )
    with pytest.raises(ConfigurationError, match="^serve names only command"):
        build_worker(settings)
    assert build_worker(settings, commanding()).message_handler().kinds == (
        "command",
        "catalog",
    )


def test_the_faststream_router_subscribes_only_the_kinds_served() -> None:
    router = InteractionWorker(serve=["tool", "list"]).router(prefix="p")

    subjects = " ".join(repr(getattr(s, "subject", None)) for s in router.subscribers)
    assert len(router.subscribers) == 2
    assert "p.tool.call" in subjects and "p.tool.list" in subjects


def test_the_capabilities_are_the_nodes_a_worker_has_and_serves() -> None:
    worker = InteractionWorker(mcp={}, output=None, serve=["mcp", "output", "list"])

    assert worker.capabilities == ["INTERACTION.ACT.MCP"]
