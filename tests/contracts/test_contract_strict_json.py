"""The strict JSON parser for bus bodies (wire.md section 1): RFC 8259 and nothing more."""

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interaction_worker.contracts import (
    JsonRefused,
    parse_json,
    parse_json_object,
    strict_json,
)

MARK = "SECRET-7f3a"  # in every refused body: a message must never quote it
NOT_JSON = "the body is not valid JSON"
NOT_UTF8 = "the body must be UTF-8"
NOT_OBJECT = "the body must be a JSON object"
SURROGATE = "JSON strings must not contain lone surrogates"
DUPLICATE = "JSON objects must not repeat a key"
TOO_DEEP = "JSON must not nest deeper than 100 levels"
NOT_FINITE = "JSON numbers must be finite"
TOO_LONG_INT = "JSON integers must have at most 4300 digits"


def body(inner: str) -> bytes:
    """An object holding the marker and `inner` as the value of "v"."""
    return ('{"token": "' + MARK + '", "v": ' + inner + "}").encode()


def nested(levels: int, open_: str = "[", close: str = "]") -> str:
    return open_ * levels + close * levels


def nested_objects(levels: int) -> str:
    return '{"a":' * (levels - 1) + "{}" + "}" * (levels - 1)


REFUSED = [
    # Non-finite numbers.
    pytest.param(body("NaN"), "JSON must not contain NaN", id="nan"),
    pytest.param(body("Infinity"), "JSON must not contain Infinity", id="infinity"),
    pytest.param(
        body("-Infinity"), "JSON must not contain -Infinity", id="minus-infinity"
    ),
    pytest.param(body("[1, NaN]"), "JSON must not contain NaN", id="nan-nested"),
    pytest.param(body("1e400"), NOT_FINITE, id="1e400"),
    pytest.param(body("-1e400"), NOT_FINITE, id="minus-1e400"),
    pytest.param(body("1E+400"), NOT_FINITE, id="1E+400"),
    pytest.param(body("1" + "0" * 400 + ".0"), NOT_FINITE, id="long-float"),
    pytest.param(body("[[1e999]]"), NOT_FINITE, id="overflow-nested"),
    # Integers of more than 4,300 digits.
    pytest.param(body("1" * 4301), TOO_LONG_INT, id="int-4301"),
    pytest.param(body("-" + "1" * 4301), TOO_LONG_INT, id="negative-int-4301"),
    pytest.param(body("[" + "9" * 5000 + "]"), TOO_LONG_INT, id="int-5000-nested"),
    # Lone surrogates.
    pytest.param(body('"\\ud800"'), SURROGATE, id="high-alone"),
    pytest.param(body('"\\udc00"'), SURROGATE, id="low-alone"),
    pytest.param(body('"\\uDFFF"'), SURROGATE, id="low-uppercase"),
    pytest.param(body('"\\udc00\\ud800"'), SURROGATE, id="reversed-pair"),
    pytest.param(body('"a\\ud83d"'), SURROGATE, id="high-at-end"),
    pytest.param(body('"\\ud83dx\\ude00"'), SURROGATE, id="split-pair"),
    pytest.param(body('"\\ud83d\\ud83d"'), SURROGATE, id="two-highs"),
    pytest.param(body('{"\\ud800": 1}'), SURROGATE, id="in-key"),
    pytest.param(body('[["\\udbff"]]'), SURROGATE, id="deep"),
    pytest.param(body('"\\\\\\ud800"'), SURROGATE, id="escaped-backslash-then-escape"),
    # Duplicate keys.
    pytest.param(
        ('{"a": 1, "token": "' + MARK + '", "a": 2}').encode(),
        DUPLICATE,
        id="top-level",
    ),
    pytest.param(
        ('{"a": 1, "token": "' + MARK + '", "a": 1}').encode(),
        DUPLICATE,
        id="same-value",
    ),
    pytest.param(body('{"x": {"k": 1, "k": 1}}'), DUPLICATE, id="nested"),
    pytest.param(body('[{}, {"k": 1, "k": 2}]'), DUPLICATE, id="in-array"),
    # Nesting.
    pytest.param(body(nested(100)), TOO_DEEP, id="101-levels"),
    pytest.param(body(nested_objects(100)), TOO_DEEP, id="101-levels-objects"),
    pytest.param(nested(101).encode(), TOO_DEEP, id="101-arrays-top-level"),
    pytest.param(body(nested(100_000)), TOO_DEEP, id="100000-levels"),
    pytest.param(body("[" * 100_000), TOO_DEEP, id="100000-unclosed"),
    pytest.param(
        body('["' + "[" * 200 + '", ' + nested(99) + "]"),
        TOO_DEEP,
        id="101-levels-beside-brackets-in-a-string",
    ),
    # Encoding.
    pytest.param(b'{"t": "' + MARK.encode() + b'\xff"}', NOT_UTF8, id="invalid-byte"),
    pytest.param(
        b'{"t": "' + MARK.encode() + b'\xed\xa0\x80"}',
        NOT_UTF8,
        id="utf8-encoded-surrogate",
    ),
    pytest.param(b'{"t": "' + MARK.encode() + b'\xc3"}', NOT_UTF8, id="truncated"),
    pytest.param(b'{"t": "' + MARK.encode() + b'\xc0\xaf"}', NOT_UTF8, id="overlong"),
    pytest.param(b"\xef\xbb\xbf" + body("1"), NOT_JSON, id="utf8-bom"),
    pytest.param(
        ('{"token": "' + MARK + '"}').encode("utf-16"), NOT_UTF8, id="utf16-with-bom"
    ),
    pytest.param(
        ('{"token": "' + MARK + '"}').encode("utf-16-le"), NOT_JSON, id="utf16-le"
    ),
    pytest.param(('{"token": "' + MARK + '"}').encode("utf-32"), NOT_UTF8, id="utf32"),
    # Trailing or leading garbage, and other syntax errors.
    pytest.param(body("1") + b" x", NOT_JSON, id="trailing-garbage"),
    pytest.param(body("1") + b"{}", NOT_JSON, id="two-objects"),
    pytest.param(body("1") + b",", NOT_JSON, id="trailing-comma"),
    pytest.param(body("1") + b"\x0c", NOT_JSON, id="trailing-form-feed"),
    pytest.param(body("1") + "\u00a0".encode(), NOT_JSON, id="trailing-nbsp"),
    pytest.param(b"\x0c" + body("1"), NOT_JSON, id="leading-form-feed"),
    pytest.param(b"x" + body("1"), NOT_JSON, id="leading-garbage"),
    pytest.param(body("01"), NOT_JSON, id="leading-zero"),
    pytest.param(body("+1"), NOT_JSON, id="plus-sign"),
    pytest.param(body(".5"), NOT_JSON, id="bare-fraction"),
    pytest.param(body("1."), NOT_JSON, id="trailing-dot"),
    pytest.param(body("0x10"), NOT_JSON, id="hex"),
    pytest.param(body("'x'"), NOT_JSON, id="single-quotes"),
    pytest.param(body("[1,]"), NOT_JSON, id="trailing-comma-in-array"),
    pytest.param(body('"a\x01b"'), NOT_JSON, id="raw-control-in-string"),
    pytest.param(body('"\\x41"'), NOT_JSON, id="bad-escape"),
    pytest.param(body("undefined"), NOT_JSON, id="undefined"),
    pytest.param(body("nan"), NOT_JSON, id="lowercase-nan"),
    pytest.param(body("١"), NOT_JSON, id="arabic-digit"),
    pytest.param(("{token: '" + MARK + "'}").encode(), NOT_JSON, id="js-literal"),
    pytest.param(body("1")[:-1], NOT_JSON, id="unclosed"),
    pytest.param(b"", NOT_JSON, id="empty"),
    pytest.param(b" \n\t\r", NOT_JSON, id="whitespace-only"),
]


@pytest.mark.parametrize(("data", "message"), REFUSED)
def test_parse_json_refuses(data: bytes, message: str) -> None:
    with pytest.raises(JsonRefused) as info:
        parse_json(data)
    assert info.value.message == message
    assert str(info.value) == message
    assert MARK not in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(("data", "message"), REFUSED)
def test_parse_json_object_refuses(data: bytes, message: str) -> None:
    with pytest.raises(JsonRefused) as info:
        parse_json_object(data)
    assert info.value.message == message
    assert MARK not in info.value.message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(b"[]", [], id="array"),
        pytest.param(b'"x"', "x", id="string"),
        pytest.param(b"1", 1, id="number"),
        pytest.param(b"-1.5", -1.5, id="float"),
        pytest.param(b"null", None, id="null"),
        pytest.param(b"true", True, id="true"),
        pytest.param(b' [{"a": 1}] ', [{"a": 1}], id="array-of-objects"),
    ],
)
def test_parse_json_object_refuses_other_top_level_values(
    data: bytes, expected: object
) -> None:
    assert parse_json(data) == expected
    with pytest.raises(JsonRefused) as info:
        parse_json_object(data)
    assert info.value.message == NOT_OBJECT


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(b"{}", {}, id="empty"),
        pytest.param(b' \n\t\r{"a": 1} \n\t\r', {"a": 1}, id="rfc-whitespace"),
        pytest.param(body('"\\ud83d\\ude00"'), "😀", id="valid-pair"),
        pytest.param(body('"\\uD83D\\uDE00"'), "😀", id="valid-pair-uppercase"),
        pytest.param(body('"\\\\ud800"'), "\\ud800", id="escaped-backslash-then-text"),
        pytest.param(
            body('"\\\\\\\\ud800"'), "\\\\ud800", id="two-escaped-backslashes"
        ),
        pytest.param(
            body('"\\u00e9\\ud7ff\\ue000"'), "é\ud7ff\ue000", id="bmp-escapes"
        ),
        pytest.param(body('"😀é"'), "😀é", id="raw-utf8"),
        pytest.param(body('"\\u0000"'), "\x00", id="escaped-nul"),
        pytest.param(body("1" * 4300), int("1" * 4300), id="int-4300"),
        pytest.param(body("-" + "9" * 4300), -int("9" * 4300), id="negative-int-4300"),
        pytest.param(body("1e308"), 1e308, id="1e308"),
        pytest.param(body("1.7976931348623157e308"), 1.7976931348623157e308, id="max"),
        pytest.param(body("1e-400"), 0.0, id="underflow-is-zero"),
        pytest.param(body("-0"), 0, id="minus-zero"),
        pytest.param(
            body("1" * 5000 + ".5e-4990"),
            float("1" * 5000 + ".5e-4990"),
            id="long-float-finite",
        ),
        pytest.param(body(nested(99)), json.loads(nested(99)), id="100-levels"),
        pytest.param(
            body('["' + "[" * 200 + '", ' + nested(98) + "]"),
            ["[" * 200, json.loads(nested(98))],
            id="100-levels-beside-brackets-in-a-string",
        ),
        pytest.param(
            body(nested_objects(99)),
            json.loads(nested_objects(99)),
            id="100-levels-objects",
        ),
        pytest.param(body('"' + "[" * 500 + '"'), "[" * 500, id="brackets-in-a-string"),
        pytest.param(
            body('"\\"' + "{" * 500 + '"'),
            '"' + "{" * 500,
            id="brackets-after-escaped-quote",
        ),
        pytest.param(
            body("[" + ",".join(["[]"] * 300) + "]"),
            [[]] * 300,
            id="many-shallow-brackets",
        ),
        pytest.param(
            body('{"a": 1, "b": {"a": 2}}'),
            {"a": 1, "b": {"a": 2}},
            id="same-key-in-different-objects",
        ),
    ],
)
def test_parse_json_object_accepts(data: bytes, expected: object) -> None:
    parsed = parse_json_object(data)
    if "v" in parsed:
        assert parsed["v"] == expected
        assert type(parsed["v"]) is type(expected)
    else:
        assert parsed == expected


def test_100_levels_top_level_array_is_accepted() -> None:
    assert parse_json(nested(100).encode()) == json.loads(nested(100))


def test_numbers_keep_their_json_type() -> None:
    parsed: dict[str, Any] = parse_json_object(
        b'{"i": 1, "f": 1.0, "e": 1e2, "z": -0.0}'
    )
    assert [type(parsed[k]) for k in "ifez"] == [int, float, float, float]


def test_refusal_is_not_chained_to_the_decoder_error() -> None:
    with pytest.raises(JsonRefused) as info:
        parse_json(body("1") + b" trailing")
    assert info.value.__cause__ is None
    with pytest.raises(JsonRefused) as info:
        parse_json(b'{"' + MARK.encode() + b'": "\xff"}')
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__


# The quick parse (pydantic-core's, vouched) must return what the strict parse returns, and leave
# every refusal to it: bodies written from pieces chosen to sit on the edges of both parsers, mostly
# valid (a body the quick parse refuses is parsed strictly anyway), some cut or spoiled.
_KEYS = ["a", "b", "a:b", ":", "\\u003a", "\\u003A", "\\\\u003a", "é", "\\ud83d\\ude00"]
_STRING_PIECES = [
    "x",
    ":",
    "::",
    "\\\\",
    '\\"',
    '\\":',
    "\\u003a",
    "\\u0041",
    "\\ud83d\\ude00",
    "é",
    "😀",
    "\x7f",
    "\\n",
    "\\/",
    "[",
    "{",
]
_BAD_STRING_PIECES = ["\\ud800", "\\udc00", "\\ud83dx", "\x01", "\\x"]
_NUMBERS = [
    "0",
    "-0",
    "-0.0",
    "1e400",
    "-1e400",
    "1E+308",
    "1e308",
    "1.7976931348623157e308",
    "1.7976931348623159e308",
    "2.2250738585072011e-308",
    "4.9e-324",
    "2e-324",
    "1e-400",
    "0.1",
    "123456789012345678901234567890.123456789e-5",
    "9007199254740993",
    "18446744073709551616",
    "1" * 400 + ".0",
    "1" * 4300,
    "-" + "1" * 4300,
    "1" * 500 + "e-490",
]
_BAD_NUMBERS = [
    "01",
    "1.",
    ".5",
    "+1",
    "1" * 4301,
    "NaN",
    "Infinity",
    "-Infinity",
    "1e",
    "-",
]
_SPACES = ["", " ", "\n", "\t", "\r"]
_BAD_SPACES = ["\x0c", "\xa0", "\ufeff"]


@st.composite
def _json_texts(draw: st.DrawFn) -> str:
    spoiled = draw(st.integers(0, 9)) == 0

    def pick(good: list[str], bad: list[str]) -> str:
        return draw(st.sampled_from(good + bad if spoiled else good))

    def value(depth: int) -> str:
        kind = draw(st.integers(0, 4 if depth < 3 else 2))
        if kind == 0:
            return pick(_NUMBERS, _BAD_NUMBERS)
        if kind == 1:
            pieces = st.lists(st.just(0), max_size=4)
            return (
                '"'
                + "".join(
                    pick(_STRING_PIECES, _BAD_STRING_PIECES) for _ in draw(pieces)
                )
                + '"'
            )
        if kind == 2:
            return pick(["true", "false", "null"], ["nul", "True"])
        if kind == 3:
            items = draw(st.lists(st.just(0), max_size=3))
            return "[" + ",".join(value(depth + 1) for _ in items) + "]"
        keys = draw(st.lists(st.sampled_from(_KEYS), max_size=4))
        return (
            "{"
            + ",".join(
                f'"{key}"{pick(_SPACES, _BAD_SPACES)}:{value(depth + 1)}'
                for key in keys
            )
            + "}"
        )

    return pick(_SPACES, _BAD_SPACES) + value(0) + pick(_SPACES, _BAD_SPACES)


def _outcome(parse: Any, data: bytes) -> tuple[str, Any]:
    try:
        return "parsed", _typed(parse(data))
    except JsonRefused as refused:
        return "refused", refused.message


def _typed(value: Any) -> Any:
    """`value` with its types and key order kept, so that 1 and 1.0, -0.0 and 0.0 differ."""
    if isinstance(value, dict):
        return ("dict", [(key, _typed(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(item) for item in value])
    return (type(value).__name__, repr(value))


@settings(deadline=None, max_examples=400)
@given(text=_json_texts(), cut=st.integers(0, 9), at=st.integers(0, 10**6))
def test_the_quick_parse_returns_what_the_strict_parse_returns(
    text: str, cut: int, at: int
) -> None:
    data = text.encode("utf-8", "surrogatepass")
    if cut == 1 and data:  # one byte removed: most bodies become invalid JSON or UTF-8
        index = at % len(data)
        data = data[:index] + data[index + 1 :]
    elif cut == 2:  # one invalid byte
        index = at % (len(data) + 1)
        data = data[:index] + b"\xff" + data[index:]
    assert _outcome(parse_json, data) == _outcome(_strictly, data)


def _strictly(data: bytes) -> Any:
    deep = data.count(b"[") + data.count(b"{") > 100
    return strict_json._parse_strictly(data, deep)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(
            b'{"call": {"id": "c-1", "name": "noop", "arguments": {}}}', id="call"
        ),
        pytest.param(
            b'{"call":{"id":"c-1","name":"fetch","arguments":'
            b'{"url":"https://example.com/a:b","at":"12:30","limit":5,"ratio":0.5,'
            b'"tags":["a",{"k":null,"t":true}]}}}',
            id="colons-in-strings",
        ),
        pytest.param(
            '{"t": "\\u00e9 😀 \\n", "n": [1e308, -0.0, 123456789012345678901234567890]}'.encode(),
            id="escapes-and-numbers",
        ),
        pytest.param(
            (
                '{"call": {"id": "c-1", "name": "x", "arguments": {"q": "'
                + "[" * 200
                + '"}}}'
            ).encode(),
            id="brackets-in-a-string",
        ),
        pytest.param(
            (
                '{"a": ' + nested(99) + ', "b": [[1]], "c": "' + "x" * 100 + '"}'
            ).encode(),
            id="100-levels-101-brackets",
        ),
    ],
)
def test_a_valid_body_is_parsed_once(
    data: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body the quick parse vouches for never reaches the strict scanner: one parse, not two."""
    expected = json.loads(data)

    def scan(*_: object) -> Any:
        raise AssertionError("parsed a second time")

    monkeypatch.setattr(strict_json, "_SCAN", scan)
    assert parse_json_object(data) == expected


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(b'{"a": 1, "a": 2}', DUPLICATE, id="repeated-key"),
        pytest.param(b'{"a" : 1, "a" : 2, "b": ":"}', DUPLICATE, id="spaced-colons"),
        pytest.param(
            b'{"a": 1, "a": 2, "\\u003a": ":"}', DUPLICATE, id="escaped-colon"
        ),
        pytest.param(b'{"a": 1e400}', NOT_FINITE, id="overflow"),
        pytest.param(b'{"a": [NaN]}', "JSON must not contain NaN", id="nan"),
    ],
)
def test_what_the_quick_parse_cannot_vouch_for_is_refused_strictly(
    data: bytes, message: str
) -> None:
    with pytest.raises(JsonRefused) as info:
        parse_json_object(data)
    assert info.value.message == message
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__ or info.value.__context__ is None
