"""Properties of the contracts: JSON values survive validation and the wire; safe means safe."""

import json
import re
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

import interaction_worker.contracts.validation as check
from interaction_worker.contracts import (
    is_safe_message,
    js_trim,
    parse_json,
    parse_json_object,
)
from interaction_worker.contracts._text import utf16_length
from interaction_worker.errors import ERROR_CLASSES, InteractionWorkerError

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(TEXT, children, max_size=5)
    ),
    max_leaves=30,
)


@settings(deadline=None, max_examples=200)
@given(content=JSON_VALUES, structured=JSON_VALUES, metadata=JSON_VALUES)
@example(content=None, structured=[], metadata={})
@example(content=-0.0, structured=10**300, metadata="😀\u2028\x00")
def test_json_values_survive_validation_and_the_wire(
    content: Any, structured: Any, metadata: Any
) -> None:
    value = {
        "callId": "call-1",
        "source": "lookup",
        "status": "success",
        "content": content,
        "structuredContent": structured,
        "metadata": metadata,
    }
    result = check.external_result(value)
    assert result.content == content
    assert result.structured_content == structured
    assert result.metadata == metadata

    decoded = json.loads(result.to_json())
    assert decoded == value
    assert result.to_wire() == value

    for ensure_ascii in (True, False):
        encoded = json.dumps(value, ensure_ascii=ensure_ascii).encode()
        assert parse_json(encoded) == value
        assert parse_json_object(encoded) == value
        assert check.external_result(parse_json_object(encoded)).to_wire() == value


@settings(deadline=None, max_examples=200)
@given(content=JSON_VALUES)
def test_json_values_survive_an_output_request(content: Any) -> None:
    value = {"deliveryId": "d-1", "message": {"role": "user", "content": content}}
    request = check.output_request(value)
    assert json.loads(request.to_json()) == value
    assert parse_json_object(request.to_json()) == value


FRAGMENTS = st.sampled_from(
    [
        "/etc/passwd",
        " /etc/passwd",
        "(/x)",
        "'/x'",
        '"/x"',
        "//x",
        "http://a/b",
        "C:\\x",
        " C:/x",
        "\\\\host\\share",
        "\n",
        "\r",
        "\t",
        "\x00",
        "\x1b",
        "\x7f",
        "\x85",
        "\u00a0",
        "\u2028",
        "\ufeff",
        " ",
        "at a.js:1",
        " at a.js:1 ",
        "at async f (a.mjs:1:2)",
        "at x.tsx:3",
        "at x.py:3",
        'File "x.py", line 3',
        "Bearer ",
        "bearer\t",
        "Bearer",
        "sk-x",
        "SK-1",
        "sk-",
        "12:30",
        "😀",
        "x" * 100,
    ]
)
TEXTS = st.lists(
    FRAGMENTS | st.text(max_size=8) | st.text("abc /:.-()'\"\\", max_size=8),
    max_size=12,
).map("".join)

_SIMPLE_PATH = re.compile(r"(?:^| )/[A-Za-z0-9._-]")
_SIMPLE_DRIVE = re.compile(r"(?:^| )[A-Za-z]:[\\/]")
_SIMPLE_FRAME = re.compile(r"(?:^| )at +[A-Za-z0-9_.-]+\.[cm]?[jt]sx?:[0-9]+(?: |$)")
_SIMPLE_CREDENTIAL = re.compile(r"Bearer |sk-[A-Za-z0-9]", re.IGNORECASE | re.ASCII)


def _looks_unsafe(text: str) -> bool:
    """A simple, obviously correct subset of the unsafe messages."""
    return bool(
        utf16_length(text) > 512
        or any(ord(ch) < 0x20 or ch == "\x7f" for ch in text)
        or _SIMPLE_PATH.search(text)
        or _SIMPLE_DRIVE.search(text)
        or _SIMPLE_FRAME.search(text)
        or _SIMPLE_CREDENTIAL.search(text)
        or 'File "x.py", line 3' in text
    )


@settings(deadline=None, max_examples=200)
@given(text=TEXTS)
@example(text="Retry at 12:30")
@example(text="/etc/passwd")
@example(text="x\x7f")
def test_a_safe_message_has_none_of_the_unsafe_shapes(text: str) -> None:
    if is_safe_message(text):
        assert "\n" not in text
        assert "\r" not in text
        assert "\x7f" not in text
        assert not any(ord(ch) < 0x20 for ch in text)
        assert not _looks_unsafe(text)
    if _looks_unsafe(text):
        assert not is_safe_message(text)


@settings(deadline=None, max_examples=200)
@given(text=TEXTS, error_class=st.sampled_from(ERROR_CLASSES))
@example(text="", error_class=ERROR_CLASSES[0])
@example(text="\u00a0\ufeff\u3000", error_class=ERROR_CLASSES[1])
@example(text="\x1c", error_class=ERROR_CLASSES[1])
@example(text="Permission denied: tools:lookup", error_class=ERROR_CLASSES[2])
def test_worker_errors_always_carry_a_safe_message(
    text: str, error_class: type[InteractionWorkerError]
) -> None:
    error = error_class(text)
    assert error.message in (text, error_class.default_message)
    assert is_safe_message(error.message)
    assert js_trim(error.message)
    assert str(error) == error.message
    if is_safe_message(text) and js_trim(text):
        assert error.message == text


def test_every_default_message_is_safe() -> None:
    for error_class in ERROR_CLASSES:
        assert is_safe_message(error_class.default_message)
        assert error_class().message == error_class.default_message
        assert error_class(None).message == error_class.default_message
