"""JavaScript text semantics: `String.prototype.trim` and `.length` (reference section 2.1, 2.4)."""

import pytest

from interaction_worker.contracts import ContractError, js_trim, nonempty
from interaction_worker.contracts._text import (
    JS_WHITESPACE,
    has_lone_surrogate,
    utf16_length,
)

# Every character JavaScript's trim() removes: ECMAScript WhiteSpace (incl. every Zs) + LineTerminator.
JS_TRIMMED = [
    "\t",
    "\n",
    "\x0b",
    "\x0c",
    "\r",
    " ",
    "\u00a0",
    "\u1680",
    *(chr(c) for c in range(0x2000, 0x200B)),
    "\u2028",
    "\u2029",
    "\u202f",
    "\u205f",
    "\u3000",
    "\ufeff",
]

# Characters Python's str.strip()/isspace() treats as whitespace, or look like spaces, that JS keeps.
JS_KEPT = [
    pytest.param("\x1c", id="U+001C-file-separator"),
    pytest.param("\x1d", id="U+001D-group-separator"),
    pytest.param("\x1e", id="U+001E-record-separator"),
    pytest.param("\x1f", id="U+001F-unit-separator"),
    pytest.param("\x85", id="U+0085-NEL"),
    pytest.param("\u200b", id="U+200B-zero-width-space"),
    pytest.param("\u180e", id="U+180E-mongolian-vowel-separator"),
    pytest.param("\u200c", id="U+200C-ZWNJ"),
    pytest.param("\u2060", id="U+2060-word-joiner"),
    pytest.param("\x00", id="NUL"),
]


def test_js_whitespace_set_is_exactly_the_ecmascript_set() -> None:
    assert set(JS_WHITESPACE) == set(JS_TRIMMED)
    assert len(JS_WHITESPACE) == len(set(JS_WHITESPACE))


@pytest.mark.parametrize(
    "char", [pytest.param(c, id=f"U+{ord(c):04X}") for c in JS_TRIMMED]
)
def test_js_trim_removes_every_js_whitespace(char: str) -> None:
    assert js_trim(char) == ""
    assert js_trim(f"{char}{char}x{char}y{char}") == f"x{char}y"


@pytest.mark.parametrize("char", JS_KEPT)
def test_js_trim_keeps_characters_that_are_not_js_whitespace(char: str) -> None:
    assert js_trim(char) == char
    assert js_trim(f" {char} ") == char
    assert nonempty(char, "x") == char


@pytest.mark.parametrize(
    ("text", "js", "python"),
    [
        pytest.param("\u00a0x\u00a0", "x", "x", id="nbsp-both-trim"),
        pytest.param("\ufeffx\ufeff", "x", "\ufeffx\ufeff", id="bom-js-only"),
        pytest.param("\u2028x\u2029", "x", "x", id="line-separators"),
        pytest.param("\x1cx\x1c", "\x1cx\x1c", "x", id="U+001C-python-only"),
        pytest.param("\x85x\x85", "\x85x\x85", "x", id="NEL-python-only"),
        pytest.param("\u200bx", "\u200bx", "\u200bx", id="zwsp-neither"),
        pytest.param("  a b  ", "a b", "a b", id="inner-space-kept"),
        pytest.param("\t\r\nx\x0b\x0c", "x", "x", id="ascii"),
    ],
)
def test_js_trim_versus_python_strip(text: str, js: str, python: str) -> None:
    assert js_trim(text) == js
    assert text.strip() == python


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("\x1c", id="U+001C"),
        pytest.param("\x85", id="U+0085"),
        pytest.param("\u200b", id="U+200B"),
        pytest.param(" a ", id="padded"),
        pytest.param("0", id="zero"),
    ],
)
def test_nonempty_accepts_and_returns_untrimmed(value: str) -> None:
    assert nonempty(value, "field") is value


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty"),
        pytest.param(" ", id="space"),
        pytest.param("\u00a0", id="nbsp"),
        pytest.param("\u2028", id="U+2028"),
        pytest.param("\ufeff", id="bom"),
        pytest.param("\u3000\t\n", id="mixed"),
        pytest.param(None, id="null"),
        pytest.param(1, id="int"),
        pytest.param(True, id="bool"),
        pytest.param(["x"], id="array"),
        pytest.param({"x": 1}, id="object"),
        pytest.param(b"x", id="bytes"),
    ],
)
def test_nonempty_rejects(value: object) -> None:
    with pytest.raises(ContractError) as info:
        nonempty(value, "some.name")
    assert info.value.message == "some.name must be a nonempty string"
    assert str(info.value) == "some.name must be a nonempty string"


@pytest.mark.parametrize(
    ("text", "length"),
    [
        pytest.param("", 0, id="empty"),
        pytest.param("a", 1, id="ascii"),
        pytest.param("é", 1, id="latin1"),
        pytest.param("\uffff", 1, id="last-bmp"),
        pytest.param("😀", 2, id="emoji"),
        pytest.param("\U00010000", 2, id="first-astral"),
        pytest.param("\U0010ffff", 2, id="last-astral"),
        pytest.param("a😀b", 4, id="mixed"),
        pytest.param("😀" * 256, 512, id="256-emoji"),
        pytest.param("é😀" * 3, 9, id="bmp-and-astral"),
        pytest.param("\ud800", 1, id="lone-surrogate"),
        pytest.param("a" * 513, 513, id="long-ascii"),
    ],
)
def test_utf16_length(text: str, length: int) -> None:
    assert utf16_length(text) == length
    assert utf16_length(text) == len(text.encode("utf-16-le", "surrogatepass")) // 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("abc", False, id="ascii"),
        pytest.param("é😀", False, id="non-ascii"),
        pytest.param("\ud800", True, id="high"),
        pytest.param("\udfff", True, id="low"),
        pytest.param("a\udc00b", True, id="inside"),
    ],
)
def test_has_lone_surrogate(text: str, expected: bool) -> None:
    assert has_lone_surrogate(text) is expected
