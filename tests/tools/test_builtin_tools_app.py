"""The built-in tools in the served application: the defaults, `tools.commands`, `tools.web_search`
with its key from the environment only, and the start-time check of command limits against the
server's max_payload (wire.md section 1)."""

import asyncio
from pathlib import Path
from typing import Any

import pytest

from interaction_worker import (
    ConfigurationError,
    InteractionWorker,
    Sandbox,
    ToolRegistry,
)
from interaction_worker.app import build_worker
from interaction_worker.config import parse_settings
from interaction_worker.errors import PermissionDenied
from interaction_worker.service import ServeOptions, serve
from interaction_worker.tools import (
    READ_ONLY_COMMANDS,
    BraveSearch,
    ReadOnlyCommandTool,
    SubprocessExecutor,
    WebSearchTool,
    check_command_limits,
    read_only_command_tools,
)

KEY_VARIABLE = "INTERACTION_BRAVE_API_KEY"


def worker(tmp_path: Path, data: Any, code: InteractionWorker | None = None) -> Any:
    return build_worker(parse_settings(data, base_dir=tmp_path), code)


def test_the_defaults_are_read_text_and_the_14_commands_with_an_executor(
    tmp_path: Path,
) -> None:
    built = worker(tmp_path, {})
    assert built.tools.names() == ["read_text", *READ_ONLY_COMMANDS]
    executor = built.sandbox.executor
    assert isinstance(executor, SubprocessExecutor)
    assert executor.timeout == 5.0
    assert (executor.max_output_bytes, executor.max_error_bytes) == (65536, 8192)
    assert executor.max_memory == 256 * 1024 * 1024
    assert executor.commands == frozenset(READ_ONLY_COMMANDS)
    assert built.sandbox.execute is True


async def test_a_default_worker_runs_a_command_in_its_workspace(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    built = worker(tmp_path, {"workspace": str(tmp_path)})
    result = await built.call_tool(
        {"call": {"id": "c", "name": "cat", "arguments": {"path": "notes.txt"}}}
    )
    assert (result.status, result.content) == ("success", "hello\n")


def test_tools_commands_selects_the_tools_and_sets_the_limits(tmp_path: Path) -> None:
    built = worker(
        tmp_path,
        {
            "tools": {
                "commands": {
                    "enabled": ["cat", "grep"],
                    "max_entries": 10,
                    "max_output_bytes": 100,
                    "max_error_bytes": 50,
                    "timeout": "2s",
                    "max_memory": 2**30,
                }
            }
        },
    )
    assert built.tools.names() == ["grep", "cat"]  # the reference's order
    tool = built.tools.get("cat")
    assert isinstance(tool, ReadOnlyCommandTool)
    assert (tool.limits.max_entries, tool.limits.max_output_bytes) == (10, 100)
    executor = built.sandbox.executor
    assert isinstance(executor, SubprocessExecutor)
    assert (executor.timeout, executor.max_output_bytes, executor.max_error_bytes) == (
        2.0,
        100,
        50,
    )
    assert executor.max_memory == 2**30


def code_worker(tmp_path: Path, **sandbox: Any) -> InteractionWorker:
    """A worker built in code: its own sandbox over `tmp_path`, no tools."""
    return InteractionWorker(
        sandbox=Sandbox(tools=["*"], workspace=tmp_path, **sandbox)
    )


async def test_a_code_sandbox_granting_execute_runs_the_file_s_commands(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    settings = {"tools": {"commands": {"enabled": ["cat"], "timeout": "3s"}}}
    built = worker(tmp_path, settings, code_worker(tmp_path, execute=True))
    executor = built.sandbox.executor
    assert isinstance(executor, SubprocessExecutor)
    assert (executor.timeout, executor.commands) == (3.0, frozenset(READ_ONLY_COMMANDS))
    result = await built.call_tool(
        {"call": {"id": "c", "name": "cat", "arguments": {"path": "notes.txt"}}}
    )
    assert (result.status, result.content) == ("success", "hello\n")


async def test_a_code_sandbox_without_execute_still_refuses_the_commands(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    built = worker(tmp_path, {"tools": {"commands": {}}}, code_worker(tmp_path))
    with pytest.raises(PermissionDenied, match="requires an enabled SandboxExecutor"):
        await built.call_tool(
            {"call": {"id": "c", "name": "cat", "arguments": {"path": "notes.txt"}}}
        )


def test_a_code_sandbox_keeps_its_own_executor(tmp_path: Path) -> None:
    own = SubprocessExecutor(timeout=1, commands=["cat"])
    code = code_worker(tmp_path, execute=True, executor=own)
    assert worker(tmp_path, {"tools": {"commands": {}}}, code).sandbox.executor is own


@pytest.mark.parametrize(
    "tools",
    [
        pytest.param({"read_text": {}}, id="no-commands"),
        pytest.param({"commands": {"enabled": []}}, id="none-enabled"),
    ],
)
def test_a_code_sandbox_gets_no_executor_without_file_commands(
    tmp_path: Path, tools: dict[str, Any]
) -> None:
    code = code_worker(tmp_path, execute=True)
    assert worker(tmp_path, {"tools": tools}, code).sandbox.executor is None


def test_a_tools_block_without_commands_registers_none(tmp_path: Path) -> None:
    assert worker(tmp_path, {"tools": {"read_text": {}}}).tools.names() == ["read_text"]


def test_a_command_also_given_in_code_stops_the_start(tmp_path: Path) -> None:
    (cat,) = (t for t in read_only_command_tools() if t.name == "cat")
    with pytest.raises(ConfigurationError) as refused:
        worker(tmp_path, {"tools": {"commands": {}}}, InteractionWorker(tools=[cat]))
    assert str(refused.value) == "tools.commands: the tool cat is also given in code"


def test_web_search_without_its_key_stops_the_start_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    with pytest.raises(ConfigurationError) as refused:
        worker(tmp_path, {"tools": {"web_search": {}}})
    assert KEY_VARIABLE in str(refused.value)
    assert str(refused.value).startswith("tools.web_search: ")


def test_an_invalid_key_is_refused_without_showing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, "first-line\nsecond-line")
    with pytest.raises(ConfigurationError) as refused:
        worker(tmp_path, {"tools": {"web_search": {}}})
    assert "first-line" not in str(refused.value)
    assert KEY_VARIABLE in str(refused.value)


def test_web_search_with_its_key_is_registered_with_the_file_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, "key-123")
    built = worker(
        tmp_path,
        {
            "tools": {
                "read_text": {},
                "web_search": {"timeout": "7s", "max_response_bytes": 4096},
            }
        },
    )
    assert built.tools.names() == ["read_text", "web_search"]
    tool = built.tools.get("web_search")
    assert isinstance(tool, WebSearchTool)
    assert tool.origin == "https://api.search.brave.com"
    provider = tool.provider
    assert isinstance(provider, BraveSearch)
    assert (provider.timeout, provider.max_response_bytes) == (7.0, 4096)
    assert "key-123" not in repr(provider)


# --- the start-time check against max_payload -------------------------------------------------------


def test_command_limits_that_fit_pass() -> None:
    check_command_limits(ToolRegistry(read_only_command_tools()), 1_048_576)
    check_command_limits(ToolRegistry(), 1)
    half = read_only_command_tools(max_output_bytes=500_000, max_error_bytes=48_576)
    check_command_limits(ToolRegistry(half), 1_048_576)


def test_command_limits_that_cannot_fit_are_refused_naming_the_keys() -> None:
    tools = read_only_command_tools(max_output_bytes=524_288, max_error_bytes=8192)
    with pytest.raises(ConfigurationError) as refused:
        check_command_limits(ToolRegistry(tools), 1_048_576)
    message = str(refused.value)
    assert "tools.commands.max_output_bytes (524288)" in message
    assert "tools.commands.max_error_bytes (8192)" in message
    assert "max_payload (1048576 bytes)" in message


async def test_serve_refuses_limits_the_server_cannot_carry_before_subscribing(
    nats_url: str,
) -> None:
    big = InteractionWorker(tools=read_only_command_tools(max_output_bytes=1_048_576))
    ready: list[str] = []
    with pytest.raises(ConfigurationError, match="tools.commands.max_output_bytes"):
        async with asyncio.timeout(30):
            await serve(
                big,
                ServeOptions(url=nats_url),
                ready=ready.append,
                install_signal_handlers=False,
            )
    assert ready == []


async def test_serve_starts_with_the_default_limits(nats_url: str) -> None:
    stop = asyncio.Event()
    ready: list[str] = []

    def on_ready(url: str) -> None:
        ready.append(url)
        stop.set()

    async with asyncio.timeout(30):
        await serve(
            InteractionWorker(tools=read_only_command_tools()),
            ServeOptions(url=nats_url, prefix="t-limits-ok"),
            ready=on_ready,
            stop=stop,
            install_signal_handlers=False,
        )
    assert ready == [nats_url]
