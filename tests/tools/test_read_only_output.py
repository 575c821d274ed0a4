"""Output bounds and result shapes of the read-only commands (reference section 7.4,
docs/configuration.md, `tools.commands`): the worked examples, multi-byte cuts, and every way a
command can end."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interaction_worker import ExternalResult, Sandbox, ToolRegistry
from interaction_worker.nodes import CommandResult, observe_external_result
from interaction_worker.tools import read_only_command_tools
from interaction_worker.tools._bounded import bounded, utf8_prefix


def structured_of(result: ExternalResult) -> dict[str, Any]:
    content = result.structured_content
    assert isinstance(content, dict)
    return content


class FixedExecutor:
    """Answers every run with one CommandResult."""

    def __init__(self, result: CommandResult) -> None:
        self.result = result

    async def run(
        self, command: str, args: Sequence[str], workspace: Path
    ) -> CommandResult:
        return self.result


async def run_cat(
    tmp_path: Path, result: CommandResult, **limits: int
) -> ExternalResult:
    sandbox = Sandbox(
        tools=["cat"], execute=True, workspace=tmp_path, executor=FixedExecutor(result)
    )
    registry = ToolRegistry(read_only_command_tools(**limits))
    call = {"id": "c-1", "name": "cat", "arguments": {"path": "a.txt"}}
    return await registry.call(call, sandbox)


def structured(**fields: Any) -> dict[str, Any]:
    base = {"command": "cat", "args": ["--", "a.txt"], "stdout": "", "stderr": ""}
    return {**base, "exitCode": 0, "truncated": False, **fields}


# --- the byte cut and the line limit ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "max_bytes", "expected", "truncated"),
    [
        pytest.param("😀😀😀😀", 12, "😀😀😀", True, id="emoji-at-a-boundary"),
        pytest.param("😀😀😀😀", 13, "😀😀😀", True, id="emoji-cut-inside"),
        pytest.param("😀😀😀😀", 15, "😀😀😀", True, id="emoji-cut-before-last-byte"),
        pytest.param("😀😀😀😀", 16, "😀😀😀😀", False, id="emoji-exact"),
        pytest.param("aé", 2, "a", True, id="two-byte-char-split"),
        pytest.param("a€", 3, "a", True, id="three-byte-char-split"),
        pytest.param("€", 2, "", True, id="nothing-fits"),
        pytest.param("abc", 3, "abc", False, id="exact-fit"),
        pytest.param("", 1, "", False, id="empty"),
        pytest.param("a\ud800b", 5, "", False, id="lone-surrogate-counts-3"),
    ],
)
def test_utf8_prefix_never_splits_a_character(
    value: str, max_bytes: int, expected: str, truncated: bool
) -> None:
    result = utf8_prefix(value, max_bytes)
    if not truncated:
        expected = value
    assert (result.value, result.truncated) == (expected, truncated)


def test_a_lone_surrogate_cut_becomes_a_replacement_character() -> None:
    assert utf8_prefix("a\ud800bc", 4) == ("a\ufffd", True)


@pytest.mark.parametrize(
    ("value", "max_bytes", "max_entries", "expected", "truncated"),
    [
        pytest.param(
            "one\ntwo\nthree\nfour\n", 12, 2, "one\ntwo\n", True, id="reference-stdout"
        ),
        pytest.param("warning-warning", 7, 2, "warning", True, id="reference-stderr"),
        pytest.param("a\nb\n", 100, 2, "a\nb\n", False, id="exactly-max-lines"),
        pytest.param("a\nb\nc", 100, 2, "a\nb\n", True, id="text-after-max-lines"),
        pytest.param("a\nb", 100, 1, "a\n", True, id="one-line"),
        pytest.param("no newline", 100, 1, "no newline", False, id="no-newline"),
        pytest.param("\n\n\n", 100, 2, "\n\n", True, id="empty-lines"),
        pytest.param("é\né\né\n", 5, 10, "é\né", True, id="bytes-before-lines"),
    ],
)
def test_bounded_cuts_bytes_then_lines(
    value: str, max_bytes: int, max_entries: int, expected: str, truncated: bool
) -> None:
    assert bounded(value, max_bytes, max_entries) == (expected, truncated)


@settings(deadline=None, max_examples=200)
@given(
    st.text(st.characters(exclude_categories=["Cs"])),
    st.integers(1, 64),
    st.integers(1, 8),
)
def test_bounded_is_a_prefix_within_both_limits(
    value: str, max_bytes: int, max_entries: int
) -> None:
    result = bounded(value, max_bytes, max_entries)
    assert value.startswith(result.value)
    assert len(result.value.encode()) <= max_bytes
    assert result.value.count("\n") <= max_entries
    assert result.truncated == (result.value != value)


# --- result shapes ----------------------------------------------------------------------------------


async def test_the_reference_worked_example_as_a_result(tmp_path: Path) -> None:
    result = await run_cat(
        tmp_path,
        CommandResult("one\ntwo\nthree\nfour\n", "warning-warning", 0),
        max_output_bytes=12,
        max_entries=2,
        max_error_bytes=7,
    )
    assert result.to_wire() == {
        "callId": "c-1",
        "source": "cat",
        "status": "success",
        "content": "one\ntwo\n",
        "structuredContent": structured(
            stdout="one\ntwo\n", stderr="warning", truncated=True
        ),
    }


async def test_a_multibyte_stdout_is_cut_on_a_character(tmp_path: Path) -> None:
    result = await run_cat(
        tmp_path, CommandResult("😀😀😀😀", "", 0), max_output_bytes=12
    )
    assert result.content == "😀😀😀"
    assert result.structured_content == structured(stdout="😀😀😀", truncated=True)


async def test_stderr_alone_can_truncate(tmp_path: Path) -> None:
    result = await run_cat(
        tmp_path, CommandResult("ok\n", "e1\ne2\ne3\n", 0), max_entries=2
    )
    assert result.structured_content == structured(
        stdout="ok\n", stderr="e1\ne2\n", truncated=True
    )


async def test_a_nonzero_exit_is_failed_with_its_output(tmp_path: Path) -> None:
    result = await run_cat(tmp_path, CommandResult("partial\n", "cat: nope\n", 2))
    assert result.to_wire() == {
        "callId": "c-1",
        "source": "cat",
        "status": "failed",
        "content": "partial\n",
        "structuredContent": structured(
            stdout="partial\n", stderr="cat: nope\n", exitCode=2
        ),
        "error": {
            "code": "COMMAND_EXIT_NONZERO",
            "message": "Command exited with code 2",
        },
    }
    observation = observe_external_result(result)
    assert observation.status == "failed"


async def test_a_signal_exit_is_nonzero(tmp_path: Path) -> None:
    result = await run_cat(tmp_path, CommandResult("", "", 137))
    assert result.error is not None
    assert result.error.message == "Command exited with code 137"


async def test_output_the_executor_stopped_is_a_truncated_success(
    tmp_path: Path,
) -> None:
    result = await run_cat(
        tmp_path, CommandResult("x" * 10, "", None, truncated=True), max_output_bytes=9
    )
    assert result.to_wire() == {
        "callId": "c-1",
        "source": "cat",
        "status": "success",
        "content": "x" * 9,
        "structuredContent": structured(stdout="x" * 9, exitCode=None, truncated=True),
    }


async def test_the_executor_truncated_flag_alone_marks_the_result(
    tmp_path: Path,
) -> None:
    # An executor with a smaller limit than the tool's: its own cut still shows.
    result = await run_cat(tmp_path, CommandResult("abc", "", None, truncated=True))
    assert result.status == "success"
    assert structured_of(result)["truncated"] is True


async def test_a_timeout_is_status_timeout_with_what_was_read(tmp_path: Path) -> None:
    result = await run_cat(tmp_path, CommandResult("early\n", "", None, timed_out=True))
    assert result.to_wire() == {
        "callId": "c-1",
        "source": "cat",
        "status": "timeout",
        "content": "early\n",
        "structuredContent": structured(stdout="early\n", exitCode=None),
        "error": {"code": "COMMAND_TIMEOUT", "message": "Command timed out"},
    }


async def test_a_missing_program_is_command_unavailable(tmp_path: Path) -> None:
    result = await run_cat(tmp_path, CommandResult("", "", None, unavailable=True))
    assert result.to_wire() == {
        "callId": "c-1",
        "source": "cat",
        "status": "failed",
        "structuredContent": structured(exitCode=None),
        "error": {
            "code": "COMMAND_UNAVAILABLE",
            "message": "Command is not available on this machine: cat",
        },
    }


async def test_no_exit_code_without_a_reason_is_a_failure(tmp_path: Path) -> None:
    result = await run_cat(tmp_path, CommandResult("", "", None))
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.message == "Command exited with code null"
