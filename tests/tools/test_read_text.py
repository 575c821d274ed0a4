"""read_text: the seed's example tool, called through a real ToolRegistry and Sandbox."""

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interaction_worker import (
    ExternalResult,
    Sandbox,
    ToolContext,
    ToolRegistry,
    observe_external_result,
)
from interaction_worker.contracts import js_trim
from interaction_worker.errors import (
    ConfigurationError,
    InvalidInput,
    PermissionDenied,
)
from interaction_worker.nodes import is_rerunnable, tool_definition
from interaction_worker.tools import ReadTextTool

RELATIVE = "path must be a workspace-relative POSIX path"
SINGLE_LINE = "path must be a nonempty single-line string"


def _sandbox(workspace: Path, *, read: bool = True) -> Sandbox:
    return Sandbox(tools=["read_text"], read=read, workspace=workspace)


async def _call(
    workspace: Path,
    arguments: dict[str, Any],
    *,
    tool: ReadTextTool | None = None,
    read: bool = True,
) -> ExternalResult:
    registry = ToolRegistry([tool or ReadTextTool()])
    call = {"id": "call-1", "name": "read_text", "arguments": arguments}
    return await registry.call(call, _sandbox(workspace, read=read))


def _error(result: ExternalResult) -> tuple[str, str]:
    assert result.status == "failed"
    assert result.error is not None
    return result.error.code, result.error.message


def test_definition_matches_the_seed() -> None:
    tool = ReadTextTool()
    definition = tool_definition(tool).to_wire()
    assert definition == {
        "name": "read_text",
        "inputSchema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "path": {
                    "type": "string",
                    "description": "The UTF-8 text file to read; relative to the "
                    "workspace, without `..`",
                }
            },
            "required": ["path"],
        },
        "description": "Read a workspace text file",
        "effects": ["read"],
        "requiresApproval": False,
    }
    assert tool.idempotent is True
    assert is_rerunnable(tool)


async def test_reads_a_workspace_file_as_a_success(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.txt").write_text("file text", encoding="utf-8")
    result = await _call(tmp_path, {"path": "docs/notes.txt"})
    assert result.to_wire() == {
        "callId": "call-1",
        "source": "read_text",
        "status": "success",
        "content": "file text",
    }


async def test_the_observation_is_the_plain_text(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("file text", encoding="utf-8")
    result = await _call(tmp_path, {"path": "notes.txt"})
    observation = observe_external_result(result)
    assert observation.message.to_wire() == {
        "role": "tool",
        "name": "read_text",
        "content": "file text",
    }


async def test_keeps_non_ascii_text(tmp_path: Path) -> None:
    (tmp_path / "é.txt").write_text("naïve 😀 текст", encoding="utf-8")
    result = await _call(tmp_path, {"path": "é.txt"})
    assert result.content == "naïve 😀 текст"


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("-rf", id="leading-dash"),
        pytest.param("./notes.txt", id="dot-segment"),
        pytest.param("C:foo", id="drive-without-separator"),
        pytest.param("a..b", id="dots-inside-a-name"),
        pytest.param(" spaced ", id="untrimmed"),
    ],
)
async def test_relative_paths_the_rule_allows_are_read(
    tmp_path: Path, path: str
) -> None:
    (tmp_path / path).write_text("ok", encoding="utf-8")
    result = await _call(tmp_path, {"path": path})
    assert (result.status, result.content) == ("success", "ok")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param("/etc/passwd", RELATIVE, id="absolute"),
        pytest.param("..", RELATIVE, id="dotdot-alone"),
        pytest.param("../x", RELATIVE, id="dotdot-first"),
        pytest.param("a/../x", RELATIVE, id="dotdot-middle"),
        pytest.param("a/..", RELATIVE, id="dotdot-last"),
        pytest.param("a\\b", RELATIVE, id="backslash"),
        pytest.param("\\x", RELATIVE, id="leading-backslash"),
        pytest.param("C:\\x", RELATIVE, id="drive-backslash"),
        pytest.param("C:/x", RELATIVE, id="drive-slash"),
        pytest.param("a//b", RELATIVE, id="empty-segment"),
        pytest.param("dir/", RELATIVE, id="trailing-slash"),
        pytest.param("a\0b", SINGLE_LINE, id="nul"),
        pytest.param("a\nb", SINGLE_LINE, id="newline"),
        pytest.param("a\rb", SINGLE_LINE, id="carriage-return"),
        pytest.param("", SINGLE_LINE, id="empty"),
        pytest.param("   ", SINGLE_LINE, id="blank"),
        pytest.param("a" * 1025, SINGLE_LINE, id="too-long"),
        pytest.param("😀" * 513, SINGLE_LINE, id="too-long-in-utf16-units"),
        pytest.param(7, SINGLE_LINE, id="not-a-string"),
        pytest.param(None, SINGLE_LINE, id="null"),
    ],
)
async def test_paths_outside_the_rule_are_invalid_input(
    tmp_path: Path, path: object, message: str
) -> None:
    with pytest.raises(InvalidInput) as raised:
        await _call(tmp_path, {"path": path})
    assert raised.value.message == message


async def test_a_path_of_1024_units_passes_the_rule(tmp_path: Path) -> None:
    result = await _call(tmp_path, {"path": "a/" * 511 + "ab"})
    assert _error(result)[0] == "FILE_NOT_FOUND"


async def test_missing_path_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=SINGLE_LINE):
        await _call(tmp_path, {})


async def test_unknown_keys_are_refused_before_the_path(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="^Unexpected read_text argument$"):
        await _call(tmp_path, {"path": "/abs", "lines": 5})


async def test_a_symlink_leading_outside_the_workspace_is_refused(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")
    (workspace / "link.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(PermissionDenied) as raised:
        await _call(workspace, {"path": "link.txt"})
    assert raised.value.message == "Permission denied: workspace path"


async def test_a_symlink_inside_the_workspace_is_followed(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("real", encoding="utf-8")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    result = await _call(tmp_path, {"path": "link.txt"})
    assert result.content == "real"


async def test_without_read_permission_nothing_is_looked_at(tmp_path: Path) -> None:
    # Even a missing file is refused: the answer must not tell whether it exists.
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    for path in ("notes.txt", "missing.txt"):
        with pytest.raises(PermissionDenied) as raised:
            await _call(tmp_path, {"path": path}, read=False)
        assert raised.value.message == "Permission denied: filesystem:read"


async def test_a_missing_file_is_a_failed_result(tmp_path: Path) -> None:
    result = await _call(tmp_path, {"path": "docs/missing.txt"})
    assert _error(result) == ("FILE_NOT_FOUND", "File not found: docs/missing.txt")


async def test_a_path_through_a_file_is_not_found(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    result = await _call(tmp_path, {"path": "notes.txt/inner"})
    assert _error(result)[0] == "FILE_NOT_FOUND"


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("a /b", id="looks-absolute"),
        pytest.param("sk-live1", id="looks-like-a-key"),
        pytest.param("x C:/y", id="looks-like-a-drive"),
    ],
)
async def test_an_unsafe_name_is_left_out_of_the_message(
    tmp_path: Path, path: str
) -> None:
    result = await _call(tmp_path, {"path": path})
    assert _error(result) == ("FILE_NOT_FOUND", "File not found")


@pytest.mark.parametrize("path", [".", "docs", "./docs"])
async def test_a_directory_is_not_a_file(tmp_path: Path, path: str) -> None:
    (tmp_path / "docs").mkdir()
    result = await _call(tmp_path, {"path": path})
    assert _error(result) == ("NOT_A_FILE", f"Not a file: {path}")


async def test_a_fifo_is_not_a_file_and_is_never_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")  # opening it would block until a writer came
    result = await _call(tmp_path, {"path": "pipe"})
    assert _error(result) == ("NOT_A_FILE", "Not a file: pipe")


async def test_bytes_that_are_not_utf8_are_a_failed_result(tmp_path: Path) -> None:
    (tmp_path / "image.bin").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    result = await _call(tmp_path, {"path": "image.bin"})
    assert _error(result) == ("NOT_UTF8", "File is not UTF-8 text")


async def test_a_file_over_max_bytes_is_a_failed_result(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_bytes(b"x" * 11)
    (tmp_path / "fits.txt").write_bytes(b"x" * 10)
    tool = ReadTextTool(max_bytes=10)
    result = await _call(tmp_path, {"path": "big.txt"}, tool=tool)
    assert _error(result) == ("FILE_TOO_LARGE", "File is larger than 10 bytes")
    fits = await _call(tmp_path, {"path": "fits.txt"}, tool=tool)
    assert fits.content == "x" * 10


async def test_the_default_limit_is_one_mebibyte(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_bytes(b"x" * (1_048_576 + 1))
    result = await _call(tmp_path, {"path": "big.txt"})
    assert _error(result) == ("FILE_TOO_LARGE", "File is larger than 1048576 bytes")


@pytest.mark.parametrize("max_bytes", [0, -1, True, 1.5])
def test_max_bytes_must_be_a_positive_integer(max_bytes: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_bytes must be a positive"):
        ReadTextTool(max_bytes=max_bytes)


async def test_execute_checks_the_path_even_when_called_directly(
    tmp_path: Path,
) -> None:
    context = ToolContext("call-1", _sandbox(tmp_path))
    with pytest.raises(InvalidInput, match=RELATIVE):
        await ReadTextTool().execute({"path": "../x"}, context)


_SEGMENT = st.text(
    st.characters(blacklist_characters="/\\\0\r\n", blacklist_categories=["Cs"]),
    min_size=1,
    max_size=8,
).filter(lambda s: s != "..")


@settings(deadline=None, max_examples=200)
@given(st.lists(_SEGMENT, min_size=1, max_size=6))
def test_joined_plain_segments_always_pass(segments: list[str]) -> None:
    path = "/".join(segments)
    if js_trim(path) and not (len(path) >= 2 and path[1] == ":" and path[0].isascii()):
        ReadTextTool().validate({"path": path})


@settings(deadline=None, max_examples=200)
@given(st.text(max_size=40))
def test_any_text_passes_or_fails_with_one_of_two_messages(path: str) -> None:
    try:
        ReadTextTool().validate({"path": path})
    except InvalidInput as error:
        assert error.message in (RELATIVE, SINGLE_LINE)
    else:
        assert ".." not in path.split("/") and "\\" not in path
        assert not path.startswith("/")
