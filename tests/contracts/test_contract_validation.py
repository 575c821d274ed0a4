"""The reference's validators (reference section 2, wire.md section 1): every rule, the order of the
checks, null versus absent, projection and serialisation."""

import datetime
import decimal
import json
import math
from collections.abc import Callable
from typing import Any

import pytest

import interaction_worker.contracts.validation as check
from interaction_worker.contracts import ContractError, InteractionError, json_value
from interaction_worker.contracts._base import WireModel
from interaction_worker.contracts._text import JS_WHITESPACE

NAN = math.nan
INF = math.inf
ID_256 = "i" * 256
ID_257 = "i" * 257
ASTRAL_256 = "😀" * 256  # 512 UTF-16 units, 256 code points
ASTRAL_257 = "😀" * 257


def fails(function: Callable[..., object], *args: object) -> str:
    """Run a validator that must refuse its input, and return its message."""
    with pytest.raises(ContractError) as info:
        function(*args)
    assert str(info.value) == info.value.message
    return info.value.message


def wire(model: WireModel) -> dict[str, Any]:
    """The serialised form, checked to be the same through `to_json()` and `to_wire()`."""
    from_json: dict[str, Any] = json.loads(model.to_json())
    assert from_json == model.to_wire()
    return from_json


def named(*cases: tuple[str, object]) -> list[tuple[str, object]]:
    """Named bad values for parametrisation, typed so that mixed values need no annotation."""
    return list(cases)


def with_(base: dict[str, Any], **changes: object) -> dict[str, Any]:
    return {**base, **changes}


def without(base: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in base.items() if k not in keys}


def cycle_list() -> list[Any]:
    items: list[Any] = [1]
    items.append(items)
    return items


def cycle_dict() -> dict[str, Any]:
    fields: dict[str, Any] = {"a": 1}
    fields["self"] = fields
    return fields


def nested_lists(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


FALLBACK = InteractionError(code="FALLBACK", message="Fallback error")
ERROR: dict[str, Any] = {"code": "NO_MATCH", "message": "No match"}
SUCCESS: dict[str, Any] = {
    "callId": "call-1",
    "source": "lookup",
    "status": "success",
    "content": "ok",
}
FAILED: dict[str, Any] = {
    "callId": "call-1",
    "source": "lookup",
    "status": "failed",
    "error": ERROR,
}
INVOKE: dict[str, Any] = {
    "operation": "invoke",
    "server": "files",
    "call": {"id": "call-1", "name": "read", "arguments": {"path": "a.txt"}},
}
MESSAGE: dict[str, Any] = {"role": "assistant", "content": "Hello"}
OUTPUT: dict[str, Any] = {"deliveryId": "delivery-1", "message": MESSAGE}
ARTIFACT: dict[str, Any] = {
    "name": "report",
    "reference": {"uri": "s3://bucket/report.pdf"},
}
RECEIPT: dict[str, Any] = {"deliveryId": "delivery-1", "status": "accepted"}

NOT_OBJECTS_BUT_ARRAYS_PASS = [
    pytest.param(None, id="null"),
    pytest.param(False, id="false"),
    pytest.param(True, id="true"),
    pytest.param(0, id="zero"),
    pytest.param(1, id="one"),
    pytest.param(1.5, id="float"),
    pytest.param("", id="empty-string"),
    pytest.param("x", id="string"),
]
NOT_OBJECTS = [
    *NOT_OBJECTS_BUT_ARRAYS_PASS,
    pytest.param([], id="empty-array"),
    pytest.param([{"a": 1}], id="array"),
]
NOT_NONEMPTY = [
    pytest.param(None, id="null"),
    pytest.param("", id="empty"),
    pytest.param("   ", id="spaces"),
    pytest.param("\u00a0\ufeff\u2028", id="js-whitespace"),
    pytest.param(1, id="number"),
    pytest.param(True, id="bool"),
    pytest.param(["x"], id="array"),
    pytest.param({"x": 1}, id="object"),
]


# --------------------------------------------------------------------------------------------------
# jsonValue (reference 2.3, plus lone surrogates and depth)


class Opaque:
    pass


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(None, id="null"),
        pytest.param(True, id="true"),
        pytest.param(False, id="false"),
        pytest.param(0, id="zero"),
        pytest.param(-(10**400), id="huge-int"),
        pytest.param(1.5, id="float"),
        pytest.param(-0.0, id="negative-zero"),
        pytest.param(1.7976931348623157e308, id="max-float"),
        pytest.param("", id="empty-string"),
        pytest.param("é😀\u2028", id="unicode-string"),
        pytest.param([], id="empty-array"),
        pytest.param({}, id="empty-object"),
        pytest.param({"a": [1, {"b": None}], "": "empty key"}, id="nested"),
        pytest.param([[[[]]]], id="arrays"),
        pytest.param(nested_lists(100), id="100-levels"),
    ],
)
def test_json_value_accepts(value: object) -> None:
    json_value(value, "x")


def test_json_value_accepts_a_dag() -> None:
    shared: dict[str, Any] = {"k": [1, 2]}
    json_value({"a": shared, "b": shared, "c": [shared, [shared]]}, "x")
    shared_list: list[Any] = [1]
    json_value([shared_list, shared_list, {"x": shared_list}], "x")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param(NAN, "x must be JSON-serializable", id="nan"),
        pytest.param(INF, "x must be JSON-serializable", id="inf"),
        pytest.param(-INF, "x must be JSON-serializable", id="minus-inf"),
        pytest.param(print, "x must be JSON-serializable", id="builtin-function"),
        pytest.param(lambda: 1, "x must be JSON-serializable", id="lambda"),
        pytest.param(Opaque, "x must be JSON-serializable", id="class"),
        pytest.param(1j, "x must be JSON-serializable", id="complex"),
        pytest.param("a\ud800", "x must be JSON-serializable", id="lone-high"),
        pytest.param("\udc00", "x must be JSON-serializable", id="lone-low"),
        pytest.param({1}, "x must contain only JSON objects and arrays", id="set"),
        pytest.param(
            frozenset(), "x must contain only JSON objects and arrays", id="frozenset"
        ),
        pytest.param((1,), "x must contain only JSON objects and arrays", id="tuple"),
        pytest.param(b"x", "x must contain only JSON objects and arrays", id="bytes"),
        pytest.param(
            Opaque(), "x must contain only JSON objects and arrays", id="instance"
        ),
        pytest.param(
            decimal.Decimal("1.5"),
            "x must contain only JSON objects and arrays",
            id="decimal",
        ),
        pytest.param(
            datetime.date(2024, 1, 1),
            "x must contain only JSON objects and arrays",
            id="date",
        ),
        pytest.param(
            FALLBACK, "x must contain only JSON objects and arrays", id="model"
        ),
        pytest.param(
            {1: "a"}, "x must contain only JSON objects and arrays", id="int-key"
        ),
        pytest.param(
            {None: "a"}, "x must contain only JSON objects and arrays", id="none-key"
        ),
        pytest.param(cycle_list(), "x.1 must not contain a cycle", id="list-cycle"),
        pytest.param(cycle_dict(), "x.self must not contain a cycle", id="dict-cycle"),
        pytest.param({"a": NAN}, "x.a must be JSON-serializable", id="nested-nan"),
        pytest.param(
            {"a": [0, {"b": (1,)}]},
            "x.a.1.b must contain only JSON objects and arrays",
            id="nested-tuple",
        ),
        pytest.param(
            [1, [2, INF]], "x.1.1 must be JSON-serializable", id="nested-index"
        ),
        pytest.param(
            [NAN, (1,)], "x.0 must be JSON-serializable", id="first-error-wins"
        ),
        pytest.param(
            nested_lists(101),
            "x" + ".0" * 100 + " must not be nested deeper than 100 levels",
            id="101-levels",
        ),
    ],
)
def test_json_value_rejects(value: object, message: str) -> None:
    assert fails(json_value, value, "x") == message


def test_json_value_reports_a_cycle_two_levels_down() -> None:
    a: dict[str, Any] = {}
    b: dict[str, Any] = {"a": a}
    a["b"] = b
    assert fails(json_value, a, "content") == "content.b.a must not contain a cycle"


def test_json_value_refuses_deep_nesting_without_recursion_error() -> None:
    message = fails(json_value, nested_lists(100_000), "x")
    assert message.endswith(" must not be nested deeper than 100 levels")


def test_json_value_refuses_lone_surrogate_in_a_key() -> None:
    # A key is a JSON string too; pydantic cannot serialise it (UnicodeEncodeError in to_json).
    assert fails(json_value, {"\ud800": 1}, "x") == "x must be JSON-serializable"
    assert (
        fails(json_value, {"a": {"\udc00": 1}}, "x") == "x.a must be JSON-serializable"
    )


# --------------------------------------------------------------------------------------------------
# interactionError (reference 2.4)


@pytest.mark.parametrize("value", NOT_OBJECTS_BUT_ARRAYS_PASS)
def test_interaction_error_is_required(value: object) -> None:
    assert fails(check.interaction_error, value) == "Interaction error is required"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param([], "error.code must be a nonempty string", id="empty-array"),
        pytest.param(
            ["NO_MATCH", "x"], "error.code must be a nonempty string", id="array"
        ),
        pytest.param({}, "error.code must be a nonempty string", id="empty-object"),
        *(
            pytest.param(
                with_(ERROR, code=bad),
                "error.code must be a nonempty string",
                id=f"code-{param.id}",
            )
            for param in NOT_NONEMPTY
            for bad in param.values
        ),
        *(
            pytest.param(
                with_(ERROR, message=bad),
                "error.message must be a nonempty string",
                id=f"message-{param.id}",
            )
            for param in NOT_NONEMPTY
            for bad in param.values
        ),
        pytest.param(
            without(ERROR, "code"), "error.code must be a nonempty string", id="no-code"
        ),
        pytest.param(
            without(ERROR, "message"),
            "error.message must be a nonempty string",
            id="no-message",
        ),
        pytest.param(with_(ERROR, code="A B"), "Invalid error code", id="code-space"),
        pytest.param(with_(ERROR, code="a" * 65), "Invalid error code", id="code-65"),
        pytest.param(with_(ERROR, code="É"), "Invalid error code", id="code-accent"),
        pytest.param(with_(ERROR, code="A/B"), "Invalid error code", id="code-slash"),
        pytest.param(with_(ERROR, code="A:B"), "Invalid error code", id="code-colon"),
        pytest.param(with_(ERROR, code=" A"), "Invalid error code", id="code-padded"),
        pytest.param(
            with_(ERROR, code="A\n"), "Invalid error code", id="code-trailing-newline"
        ),
        pytest.param(with_(ERROR, code="\x1c"), "Invalid error code", id="code-U+001C"),
        pytest.param(
            with_(ERROR, message="/etc/x"),
            "Unsafe interaction error message",
            id="message-path",
        ),
        pytest.param(
            with_(ERROR, message="a\x7f"),
            "Unsafe interaction error message",
            id="message-del",
        ),
        pytest.param(
            with_(ERROR, message="x" * 513),
            "Unsafe interaction error message",
            id="message-513",
        ),
        pytest.param(
            with_(ERROR, message="\x1c"),
            "Unsafe interaction error message",
            id="message-U+001C-nonempty-but-unsafe",
        ),
        *(
            pytest.param(
                with_(ERROR, retryable=bad),
                "error.retryable must be boolean",
                id=f"retryable-{name}",
            )
            for name, bad in named(
                ("null", None),
                ("string", "true"),
                ("zero", 0),
                ("one", 1),
                ("array", []),
                ("object", {}),
            )
        ),
        # Order of checks: the earlier rule's message wins.
        pytest.param(
            {"code": "", "message": ""},
            "error.code must be a nonempty string",
            id="order-code-before-message",
        ),
        pytest.param(
            {"code": "A B", "message": " "},
            "error.message must be a nonempty string",
            id="order-message-nonempty-before-code-format",
        ),
        pytest.param(
            {"code": "A B", "message": "/etc/x"},
            "Invalid error code",
            id="order-code-format-before-safety",
        ),
        pytest.param(
            {"code": "A", "message": "/etc/x", "retryable": None},
            "Unsafe interaction error message",
            id="order-safety-before-retryable",
        ),
    ],
)
def test_interaction_error_rejects(value: object, message: str) -> None:
    assert fails(check.interaction_error, value) == message


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("a" * 64, id="64"),
        pytest.param("A-b_c.9", id="all-classes"),
        pytest.param("-", id="dash"),
        pytest.param(".", id="dot"),
        pytest.param("_", id="underscore"),
    ],
)
def test_interaction_error_accepts_codes(code: str) -> None:
    assert check.interaction_error({"code": code, "message": "m"}).code == code


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(ERROR, ERROR, id="minimal"),
        pytest.param(
            with_(ERROR, retryable=True), with_(ERROR, retryable=True), id="true"
        ),
        pytest.param(
            with_(ERROR, retryable=False), with_(ERROR, retryable=False), id="false"
        ),
        pytest.param(
            with_(ERROR, stack="at x.js:1", token="sk-secret", details={"a": 1}),
            ERROR,
            id="extra-keys-dropped",
        ),
        pytest.param(
            with_(ERROR, message="x" * 512), with_(ERROR, message="x" * 512), id="512"
        ),
    ],
)
def test_interaction_error_projects(
    value: dict[str, Any], expected: dict[str, Any]
) -> None:
    error = check.interaction_error(value)
    assert wire(error) == expected
    assert error.to_json() == json.dumps(expected, separators=(",", ":")).encode()


# --------------------------------------------------------------------------------------------------
# externalResult (reference 2.5)


@pytest.mark.parametrize("fallback", [None, FALLBACK], ids=["no-fallback", "fallback"])
@pytest.mark.parametrize("value", NOT_OBJECTS_BUT_ARRAYS_PASS)
def test_external_result_is_required(
    value: object, fallback: InteractionError | None
) -> None:
    assert (
        fails(check.external_result, value, fallback) == "External result is required"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param([], "callId must be a nonempty string", id="empty-array"),
        pytest.param(
            [SUCCESS], "callId must be a nonempty string", id="array-of-result"
        ),
        pytest.param({}, "callId must be a nonempty string", id="empty-object"),
        pytest.param(
            without(SUCCESS, "callId"),
            "callId must be a nonempty string",
            id="no-callId",
        ),
        *(
            pytest.param(
                with_(SUCCESS, callId=bad),
                "callId must be a nonempty string",
                id=f"callId-{param.id}",
            )
            for param in NOT_NONEMPTY
            for bad in param.values
        ),
        pytest.param(
            with_(SUCCESS, callId=ID_257),
            "callId must be 1 to 256 characters",
            id="callId-257",
        ),
        pytest.param(
            with_(SUCCESS, callId=ASTRAL_257),
            "callId must be 1 to 256 characters",
            id="callId-257-astral",
        ),
        pytest.param(
            without(SUCCESS, "source"),
            "source must be a nonempty string",
            id="no-source",
        ),
        *(
            pytest.param(
                with_(SUCCESS, source=bad),
                "source must be a nonempty string",
                id=f"source-{param.id}",
            )
            for param in NOT_NONEMPTY
            for bad in param.values
        ),
        *(
            pytest.param(
                with_(SUCCESS, status=bad),
                "Invalid external result status",
                id=f"status-{name}",
            )
            for name, bad in named(
                ("null", None),
                ("upper", "SUCCESS"),
                ("other", "ok"),
                ("padded", " success"),
                ("array", ["success"]),
                ("number", 1),
                ("empty", ""),
                ("receipt-status", "accepted"),
            )
        ),
        pytest.param(
            without(SUCCESS, "status"), "Invalid external result status", id="no-status"
        ),
        pytest.param(
            without(SUCCESS, "content"),
            "Successful external result has no content",
            id="success-without-content",
        ),
        pytest.param(
            {**without(SUCCESS, "content"), "metadata": {"a": 1}, "error": ERROR},
            "Successful external result has no content",
            id="success-with-only-metadata-and-error",
        ),
        *(
            pytest.param(
                with_(without(FAILED, "error"), status=status),
                "Interaction error is required",
                id=f"{status}-without-error",
            )
            for status in ("failed", "cancelled", "timeout", "unknown")
        ),
        pytest.param(
            with_(FAILED, error=None),
            "Interaction error is required",
            id="failed-error-null",
        ),
        pytest.param(
            with_(SUCCESS, error=None),
            "Interaction error is required",
            id="success-error-null",
        ),
        pytest.param(
            with_(FAILED, error=[]),
            "error.code must be a nonempty string",
            id="error-array",
        ),
        pytest.param(
            with_(FAILED, error="boom"),
            "Interaction error is required",
            id="error-string",
        ),
        pytest.param(
            with_(FAILED, error={"code": "X", "message": "/etc/x"}),
            "Unsafe interaction error message",
            id="failed-unsafe-error",
        ),
        pytest.param(
            with_(SUCCESS, error={"code": "X", "message": "Bearer abc"}),
            "Unsafe interaction error message",
            id="success-unsafe-error",
        ),
        pytest.param(
            with_(FAILED, error=with_(ERROR, retryable=None)),
            "error.retryable must be boolean",
            id="retryable-null",
        ),
        pytest.param(
            with_(SUCCESS, content=NAN),
            "content must be JSON-serializable",
            id="content-nan",
        ),
        pytest.param(
            with_(SUCCESS, content={"a": [INF]}),
            "content.a.0 must be JSON-serializable",
            id="content-nested-inf",
        ),
        pytest.param(
            with_(SUCCESS, content={1, 2}),
            "content must contain only JSON objects and arrays",
            id="content-set",
        ),
        pytest.param(
            with_(SUCCESS, content=(1, 2)),
            "content must contain only JSON objects and arrays",
            id="content-tuple",
        ),
        pytest.param(
            with_(SUCCESS, content=cycle_list()),
            "content.1 must not contain a cycle",
            id="content-cycle",
        ),
        pytest.param(
            with_(SUCCESS, structuredContent={"x": -INF}),
            "structuredContent.x must be JSON-serializable",
            id="structured-inf",
        ),
        pytest.param(
            with_(SUCCESS, metadata={"size": NAN}),
            "metadata.size must be JSON-serializable",
            id="metadata-nan",
        ),
        pytest.param(
            with_(SUCCESS, metadata=cycle_dict()),
            "metadata.self must not contain a cycle",
            id="metadata-cycle",
        ),
        *(
            pytest.param(
                with_(SUCCESS, references=bad),
                "references must be an array",
                id=f"references-{name}",
            )
            for name, bad in named(
                ("null", None),
                ("string", "s3://x"),
                ("object", {"uri": "s3://x"}),
                ("tuple", ({"uri": "s3://x"},)),
                ("number", 0),
            )
        ),
        *(
            pytest.param(
                with_(SUCCESS, references=[{"uri": "u"}, bad]),
                "Invalid reference",
                id=f"reference-{name}",
            )
            for name, bad in named(
                ("null", None),
                ("string", "s3://x"),
                ("number", 1),
                ("true", True),
                ("false", False),
            )
        ),
        pytest.param(
            with_(SUCCESS, references=[[]]),
            "reference.uri must be a nonempty string",
            id="reference-array-passes-object-step",
        ),
        pytest.param(
            with_(SUCCESS, references=[{}]),
            "reference.uri must be a nonempty string",
            id="reference-no-uri",
        ),
        *(
            pytest.param(
                with_(SUCCESS, references=[{"uri": bad}]),
                "reference.uri must be a nonempty string",
                id=f"reference-uri-{param.id}",
            )
            for param in NOT_NONEMPTY
            for bad in param.values
        ),
        pytest.param(
            with_(SUCCESS, references=[{"uri": "u", "mediaType": 1}]),
            "reference.mediaType must be a string",
            id="reference-mediaType-number",
        ),
        pytest.param(
            with_(SUCCESS, references=[{"uri": "u", "mediaType": None}]),
            "reference.mediaType must be a string",
            id="reference-mediaType-null",
        ),
        pytest.param(
            with_(SUCCESS, references=[{"uri": "u", "digest": ["sha256"]}]),
            "reference.digest must be a string",
            id="reference-digest-array",
        ),
        pytest.param(
            with_(SUCCESS, references=[{"uri": "u", "digest": None}]),
            "reference.digest must be a string",
            id="reference-digest-null",
        ),
        pytest.param(
            with_(SUCCESS, references=[{"uri": "u", "size": NAN}]),
            "reference.size must be JSON-serializable",
            id="reference-extra-nan",
        ),
        # Order of checks.
        pytest.param(
            {"status": "bogus"},
            "callId must be a nonempty string",
            id="order-callId-first",
        ),
        pytest.param(
            {"callId": ID_257, "status": "bogus"},
            "callId must be 1 to 256 characters",
            id="order-callId-length-before-source",
        ),
        pytest.param(
            {"callId": "c", "source": "", "status": "bogus"},
            "source must be a nonempty string",
            id="order-source-before-status",
        ),
        pytest.param(
            {"callId": "c", "source": "s", "status": "bogus", "content": NAN},
            "Invalid external result status",
            id="order-status-before-content",
        ),
        pytest.param(
            {"callId": "c", "source": "s", "status": "success", "error": {}},
            "Successful external result has no content",
            id="order-no-content-before-error",
        ),
        pytest.param(
            {"callId": "c", "source": "s", "status": "failed", "content": NAN},
            "Interaction error is required",
            id="order-missing-error-before-content",
        ),
        pytest.param(
            with_(FAILED, error={"code": "X", "message": "/x"}, content=NAN),
            "Unsafe interaction error message",
            id="order-error-before-content",
        ),
        pytest.param(
            with_(SUCCESS, content=NAN, structuredContent=NAN, metadata=NAN),
            "content must be JSON-serializable",
            id="order-content-before-structured",
        ),
        pytest.param(
            with_(SUCCESS, structuredContent=NAN, metadata=NAN),
            "structuredContent must be JSON-serializable",
            id="order-structured-before-metadata",
        ),
        pytest.param(
            with_(SUCCESS, metadata=NAN, references="x"),
            "metadata must be JSON-serializable",
            id="order-metadata-before-references",
        ),
        pytest.param(
            with_(SUCCESS, references=[{"uri": "", "mediaType": 1}]),
            "reference.uri must be a nonempty string",
            id="order-uri-before-mediaType",
        ),
        pytest.param(
            with_(SUCCESS, references=[{"uri": "u", "mediaType": 1, "digest": 1}]),
            "reference.mediaType must be a string",
            id="order-mediaType-before-digest",
        ),
        pytest.param(
            with_(SUCCESS, references=[{"uri": "u", "digest": 1, "x": NAN}]),
            "reference.digest must be a string",
            id="order-digest-before-reference-json",
        ),
    ],
)
def test_external_result_rejects(value: object, message: str) -> None:
    assert fails(check.external_result, value) == message


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param(
            with_(SUCCESS, content=NAN),
            "content must be JSON-serializable",
            id="content-still-checked",
        ),
        pytest.param(
            without(SUCCESS, "content"),
            "Successful external result has no content",
            id="success-without-content",
        ),
        pytest.param(
            with_(FAILED, callId=""),
            "callId must be a nonempty string",
            id="callId",
        ),
        pytest.param(
            with_(FAILED, status="FAILED"),
            "Invalid external result status",
            id="status",
        ),
        pytest.param(
            with_(FAILED, error={"code": "X", "message": "/x"}, content=NAN),
            "content must be JSON-serializable",
            id="fallback-then-content",
        ),
    ],
)
def test_external_result_with_fallback_still_rejects(
    value: object, message: str
) -> None:
    assert fails(check.external_result, value, FALLBACK) == message


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(None, id="null"),
        pytest.param("boom", id="string"),
        pytest.param([], id="array"),
        pytest.param({}, id="empty"),
        pytest.param({"code": "A B", "message": "m"}, id="bad-code"),
        pytest.param({"code": "X", "message": "/etc/passwd"}, id="path"),
        pytest.param({"code": "X", "message": "at x.js:1"}, id="frame"),
        pytest.param({"code": "X", "message": "Bearer abc"}, id="bearer"),
        pytest.param({"code": "X", "message": "a\nb"}, id="newline"),
        pytest.param({"code": "X", "message": "m", "retryable": None}, id="retryable"),
    ],
)
@pytest.mark.parametrize("status", ["failed", "cancelled", "timeout", "unknown"])
def test_external_result_fallback_replaces_an_invalid_error(
    status: str, error: object
) -> None:
    result = check.external_result(with_(FAILED, status=status, error=error), FALLBACK)
    assert result.error is FALLBACK
    assert wire(result)["error"] == {"code": "FALLBACK", "message": "Fallback error"}


@pytest.mark.parametrize("status", ["failed", "cancelled", "timeout", "unknown"])
def test_external_result_fallback_fills_a_missing_error(status: str) -> None:
    result = check.external_result(
        with_(without(FAILED, "error"), status=status), FALLBACK
    )
    assert wire(result) == {
        "callId": "call-1",
        "source": "lookup",
        "status": status,
        "error": {"code": "FALLBACK", "message": "Fallback error"},
    }


def test_external_result_fallback_replaces_an_unsafe_error_on_success() -> None:
    value = with_(SUCCESS, error={"code": "X", "message": "C:\\secret"})
    assert wire(check.external_result(value, FALLBACK))["error"] == {
        "code": "FALLBACK",
        "message": "Fallback error",
    }


@pytest.mark.parametrize("fallback", [None, FALLBACK], ids=["no-fallback", "fallback"])
def test_external_result_keeps_a_safe_error_on_success(
    fallback: InteractionError | None,
) -> None:
    value = with_(
        SUCCESS, error={"code": "PARTIAL", "message": "Partial", "stack": "s"}
    )
    assert wire(check.external_result(value, fallback)) == {
        **SUCCESS,
        "error": {"code": "PARTIAL", "message": "Partial"},
    }


@pytest.mark.parametrize("fallback", [None, FALLBACK], ids=["no-fallback", "fallback"])
def test_external_result_keeps_a_valid_error_over_the_fallback(
    fallback: InteractionError | None,
) -> None:
    value = with_(FAILED, error=with_(ERROR, retryable=True, token="sk-abc"))
    result = check.external_result(value, fallback)
    assert wire(result)["error"] == with_(ERROR, retryable=True)


def test_external_result_success_without_error_ignores_the_fallback() -> None:
    assert wire(check.external_result(SUCCESS, FALLBACK)) == SUCCESS


@pytest.mark.parametrize(
    "present",
    [
        pytest.param({"content": None}, id="content-null"),
        pytest.param({"content": ""}, id="content-empty-string"),
        pytest.param({"content": []}, id="content-empty-array"),
        pytest.param({"content": False}, id="content-false"),
        pytest.param({"content": 0}, id="content-zero"),
        pytest.param({"structuredContent": None}, id="structured-null"),
        pytest.param({"structuredContent": {}}, id="structured-empty"),
        pytest.param({"references": []}, id="references-empty"),
    ],
)
def test_external_result_success_content_is_presence(present: dict[str, Any]) -> None:
    value = {**without(SUCCESS, "content"), **present}
    assert wire(check.external_result(value)) == value


@pytest.mark.parametrize(
    "call_id",
    [
        pytest.param("x", id="1"),
        pytest.param(ID_256, id="256"),
        pytest.param(ASTRAL_256, id="256-astral"),
        pytest.param(" x ", id="padded-kept"),
        pytest.param("\x1c", id="U+001C"),
    ],
)
def test_external_result_accepts_ids(call_id: str) -> None:
    assert check.external_result(with_(SUCCESS, callId=call_id)).call_id == call_id


def test_external_result_source_has_no_length_limit() -> None:
    assert check.external_result(with_(SUCCESS, source="s" * 10_000)).source == (
        "s" * 10_000
    )


@pytest.mark.parametrize(
    "metadata",
    [
        pytest.param(None, id="null"),
        pytest.param("x", id="string"),
        pytest.param([1, 2], id="array"),
        pytest.param(5, id="number"),
        pytest.param({"a": {"b": [None]}}, id="object"),
    ],
)
def test_external_result_metadata_need_only_be_json(metadata: object) -> None:
    result = check.external_result(with_(SUCCESS, metadata=metadata))
    assert wire(result)["metadata"] == metadata


def test_external_result_accepts_a_dag_in_content() -> None:
    shared = {"k": 1}
    result = check.external_result(with_(SUCCESS, content=[shared, shared]))
    assert wire(result)["content"] == [{"k": 1}, {"k": 1}]


def test_external_result_serialises_every_field_in_camel_case() -> None:
    value = {
        "callId": "call-1",
        "source": "lookup",
        "status": "failed",
        "content": None,
        "structuredContent": {"camel_case": "kept", "snakeKey": 1},
        "references": [
            {"uri": "u1"},
            {"uri": "u2", "mediaType": "text/plain", "digest": "sha256:ab", "size": 3},
        ],
        "error": with_(ERROR, retryable=False),
        "metadata": {"elapsed_ms": 3},
    }
    result = check.external_result(value)
    assert wire(result) == value
    assert b'"structuredContent":' in result.to_json()
    assert b'"mediaType":"text/plain"' in result.to_json()
    assert b'"content":null' in result.to_json()
    assert result.references is not None
    assert result.references[1].media_type == "text/plain"


def test_external_result_omits_absent_fields() -> None:
    result = check.external_result(SUCCESS)
    assert wire(result) == SUCCESS
    assert set(json.loads(result.to_json())) == {
        "callId",
        "source",
        "status",
        "content",
    }


def test_external_result_drops_unknown_keys_everywhere_but_references() -> None:
    value = {
        **SUCCESS,
        "token": "sk-abc",
        "stack": "at x.js:1",
        "error": {**ERROR, "stack": "at x.js:1", "token": "Bearer x"},
        "references": [{"uri": "u", "extra": {"kept": True}}],
    }
    result = check.external_result(value)
    encoded = result.to_json()
    assert wire(result) == {
        **SUCCESS,
        "error": ERROR,
        "references": [{"uri": "u", "extra": {"kept": True}}],
    }
    for dropped in (b"token", b"stack", b"sk-abc", b"Bearer"):
        assert dropped not in encoded


def test_external_result_does_not_change_its_input() -> None:
    value = with_(FAILED, error=with_(ERROR, stack="s"))
    snapshot = json.dumps(value)
    check.external_result(value)
    check.external_result(value, FALLBACK)
    assert json.dumps(value) == snapshot


# --------------------------------------------------------------------------------------------------
# validateMcpInput (reference 2.6)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        *(
            pytest.param(bad, "MCP input must be an object", id=f"input-{param.id}")
            for param in NOT_OBJECTS
            for bad in param.values
        ),
        pytest.param({}, "Invalid MCP operation", id="no-operation"),
        *(
            pytest.param(
                {"operation": bad}, "Invalid MCP operation", id=f"operation-{name}"
            )
            for name, bad in named(
                ("null", None),
                ("upper", "Discover"),
                ("call", "call"),
                ("padded", "invoke "),
                ("array", ["invoke"]),
                ("number", 1),
            )
        ),
        *(
            pytest.param(
                {"operation": "discover", "server": bad},
                "server must be a nonempty string",
                id=f"discover-server-{param.id}",
            )
            for param in NOT_NONEMPTY
            for bad in param.values
        ),
        pytest.param(
            {"operation": "discover", "server": ID_257},
            "server must be 1 to 256 characters",
            id="discover-server-257",
        ),
        pytest.param(
            without(INVOKE, "server"),
            "server must be a nonempty string",
            id="invoke-no-server",
        ),
        *(
            pytest.param(
                with_(INVOKE, server=bad),
                "server must be a nonempty string",
                id=f"invoke-server-{param.id}",
            )
            for param in NOT_NONEMPTY
            for bad in param.values
        ),
        pytest.param(
            with_(INVOKE, server=ASTRAL_257),
            "server must be 1 to 256 characters",
            id="invoke-server-257",
        ),
        pytest.param(
            without(INVOKE, "call"), "call must be an object", id="invoke-no-call"
        ),
        *(
            pytest.param(
                with_(INVOKE, call=bad),
                "call must be an object",
                id=f"invoke-call-{param.id}",
            )
            for param in NOT_OBJECTS
            for bad in param.values
        ),
        pytest.param(
            with_(INVOKE, call=without(INVOKE["call"], "id")),
            "call.id must be a nonempty string",
            id="invoke-no-call-id",
        ),
        *(
            pytest.param(
                with_(INVOKE, call=with_(INVOKE["call"], id=bad)),
                "call.id must be a nonempty string",
                id=f"invoke-call-id-{param.id}",
            )
            for param in NOT_NONEMPTY
            for bad in param.values
        ),
        pytest.param(
            with_(INVOKE, call=with_(INVOKE["call"], id=ID_257)),
            "call.id must be 1 to 256 characters",
            id="invoke-call-id-257",
        ),
        pytest.param(
            with_(INVOKE, call=without(INVOKE["call"], "name")),
            "call.name must be a nonempty string",
            id="invoke-no-call-name",
        ),
        *(
            pytest.param(
                with_(INVOKE, call=with_(INVOKE["call"], name=bad)),
                "call.name must be a nonempty string",
                id=f"invoke-call-name-{param.id}",
            )
            for param in NOT_NONEMPTY
            for bad in param.values
        ),
        pytest.param(
            with_(INVOKE, call=without(INVOKE["call"], "arguments")),
            "call.arguments must be an object",
            id="invoke-no-arguments",
        ),
        *(
            pytest.param(
                with_(INVOKE, call=with_(INVOKE["call"], arguments=bad)),
                "call.arguments must be an object",
                id=f"invoke-arguments-{param.id}",
            )
            for param in NOT_OBJECTS
            for bad in param.values
        ),
        pytest.param(
            with_(INVOKE, call=with_(INVOKE["call"], arguments={"n": INF})),
            "call.arguments.n must be JSON-serializable",
            id="invoke-arguments-inf",
        ),
        pytest.param(
            with_(INVOKE, call=with_(INVOKE["call"], arguments={"f": print})),
            "call.arguments.f must be JSON-serializable",
            id="invoke-arguments-function",
        ),
        pytest.param(
            with_(INVOKE, call=with_(INVOKE["call"], arguments={"s": {1}})),
            "call.arguments.s must contain only JSON objects and arrays",
            id="invoke-arguments-set",
        ),
        pytest.param(
            with_(INVOKE, call=with_(INVOKE["call"], arguments=cycle_dict())),
            "call.arguments.self must not contain a cycle",
            id="invoke-arguments-cycle",
        ),
        # Order of checks.
        pytest.param(
            {"operation": "invoke", "server": "", "call": None},
            "server must be a nonempty string",
            id="order-server-before-call",
        ),
        pytest.param(
            {"operation": "invoke", "server": ID_257, "call": None},
            "server must be 1 to 256 characters",
            id="order-server-length-before-call",
        ),
        pytest.param(
            {"operation": "invoke", "server": "s", "call": {"id": "", "name": ""}},
            "call.id must be a nonempty string",
            id="order-call-id-before-name",
        ),
        pytest.param(
            {"operation": "invoke", "server": "s", "call": {"id": ID_257, "name": ""}},
            "call.id must be 1 to 256 characters",
            id="order-call-id-length-before-name",
        ),
        pytest.param(
            {"operation": "invoke", "server": "s", "call": {"id": "i", "name": 1}},
            "call.name must be a nonempty string",
            id="order-name-before-arguments",
        ),
    ],
)
def test_mcp_input_rejects(value: object, message: str) -> None:
    assert fails(check.mcp_input, value) == message


def test_mcp_discover_without_server() -> None:
    result = check.mcp_input({"operation": "discover", "extra": 1})
    assert wire(result) == {"operation": "discover"}
    assert result.server is None


@pytest.mark.parametrize(
    "server",
    [
        pytest.param("files", id="plain"),
        pytest.param(ID_256, id="256"),
        pytest.param(ASTRAL_256, id="256-astral"),
    ],
)
def test_mcp_discover_with_server(server: str) -> None:
    result = check.mcp_input({"operation": "discover", "server": server})
    assert wire(result) == {"operation": "discover", "server": server}


def test_mcp_invoke_serialises_and_drops_unknown_call_keys() -> None:
    value = with_(
        INVOKE,
        server=ID_256,
        call={
            "id": ASTRAL_256,
            "name": "read",
            "arguments": {"path": "a.txt", "n": None, "deep": [{"x": 1.5}]},
            "extra": "dropped",
        },
        extra="dropped",
    )
    assert wire(check.mcp_input(value)) == {
        "operation": "invoke",
        "server": ID_256,
        "call": {
            "id": ASTRAL_256,
            "name": "read",
            "arguments": {"path": "a.txt", "n": None, "deep": [{"x": 1.5}]},
        },
    }


def test_mcp_invoke_accepts_a_dag_in_arguments() -> None:
    shared = [1]
    value = with_(
        INVOKE, call=with_(INVOKE["call"], arguments={"a": shared, "b": shared})
    )
    assert check.mcp_input(value).to_wire()["call"]["arguments"] == {
        "a": [1],
        "b": [1],
    }


# --------------------------------------------------------------------------------------------------
# tool_call: the checks before the sandbox


@pytest.mark.parametrize(
    ("value", "message"),
    [
        *(
            pytest.param(bad, "call must be an object", id=f"call-{param.id}")
            for param in NOT_OBJECTS
            for bad in param.values
        ),
        pytest.param({}, "call.id must be a nonempty string", id="empty"),
        *(
            pytest.param(
                {"id": bad, "name": "n"},
                "call.id must be a nonempty string",
                id=f"id-{param.id}",
            )
            for param in NOT_NONEMPTY
            for bad in param.values
        ),
        pytest.param(
            {"id": ID_257, "name": "n"},
            "call.id must be 1 to 256 characters",
            id="id-257",
        ),
        pytest.param(
            {"id": ASTRAL_257, "name": "n"},
            "call.id must be 1 to 256 characters",
            id="id-257-astral",
        ),
        pytest.param({"id": "i"}, "call.name must be a nonempty string", id="no-name"),
        *(
            pytest.param(
                {"id": "i", "name": bad},
                "call.name must be a nonempty string",
                id=f"name-{param.id}",
            )
            for param in NOT_NONEMPTY
            for bad in param.values
        ),
        pytest.param(
            {"id": "", "name": ""},
            "call.id must be a nonempty string",
            id="order-id-before-name",
        ),
    ],
)
def test_tool_call_rejects(value: object, message: str) -> None:
    assert fails(check.tool_call, value) == message


@pytest.mark.parametrize(
    "call",
    [
        pytest.param({"id": "i", "name": "n"}, id="no-arguments-yet"),
        pytest.param({"id": ID_256, "name": "n", "arguments": "x"}, id="id-256"),
        pytest.param({"id": ASTRAL_256, "name": "n", "arguments": {}}, id="astral"),
    ],
)
def test_tool_call_returns_the_call(call: dict[str, Any]) -> None:
    assert check.tool_call(call) is call


def _not_asked(*_: object) -> Any:
    raise AssertionError("checked a second way")


def test_the_call_the_bus_sends_is_checked_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A valid call passes every check of `tool_call` in one place, none of them field by field."""
    monkeypatch.setattr(check, "identifier", _not_asked)
    monkeypatch.setattr(check, "nonempty", _not_asked)
    call = {"id": "c-1", "name": "noop", "arguments": {}}
    assert check.tool_call(call) is call


@pytest.mark.parametrize(
    "text",
    [chr(c) for c in range(128)]
    + ["\x1c\x1d", " \x1f ", "\xa0", "\u3000\ufeff", "\x85", "é"],
)
def test_a_call_is_checked_at_once_as_field_by_field(text: str) -> None:
    """The checks at once keep JavaScript's trim: Python's whitespace (the ASCII separators
    `\\x1c`-`\\x1f`, NEL) is not JavaScript's, and `\\xa0` is JavaScript's alone."""
    blank = not text.strip(JS_WHITESPACE)
    for call in ({"id": text, "name": "n"}, {"id": "i", "name": text}):
        if blank:
            assert fails(check.tool_call, call).endswith("must be a nonempty string")
        else:
            assert check.tool_call(call) is call


def test_a_text_success_is_documented_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A text tool's success, `{"status": "success", "content": "…"}`, is its document at once."""
    monkeypatch.setattr(check, "_result_fields", _not_asked)
    document = check.external_result_document(
        {"status": "success", "content": "text"}, "c-1", "noop"
    )
    assert document == {
        "callId": "c-1",
        "source": "noop",
        "status": "success",
        "content": "text",
    }
    assert list(document) == ["callId", "source", "status", "content"]


class _Status(str):
    pass


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"status": "success", "content": "text"}, id="text"),
        pytest.param({"status": "success", "content": "é😀"}, id="not-ascii"),
        pytest.param({"status": "success", "content": "\ud800"}, id="lone-surrogate"),
        pytest.param({"content": "text", "status": "success"}, id="content-first"),
        pytest.param({"status": _Status("success"), "content": "t"}, id="str-subclass"),
        pytest.param({"status": "failed", "content": "text"}, id="failed-no-error"),
        pytest.param({"status": "success", "content": 1}, id="not-a-string"),
        pytest.param({"status": "success", "metadata": "m"}, id="no-content"),
    ],
)
def test_a_text_result_is_documented_as_its_model_is(fields: dict[str, Any]) -> None:
    """What the document says, or refuses, is what the model's validation says."""
    try:
        model = check.external_result_of(fields, "c-1", "noop")
    except ContractError as error:
        assert fails(check.external_result_document, fields, "c-1", "noop") == (
            error.message
        )
        return
    document = check.external_result_document(fields, "c-1", "noop")
    assert document == model.to_wire()
    assert list(document) == list(model.to_wire())


# --------------------------------------------------------------------------------------------------
# validateOutputInput (reference 2.7)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        *(
            pytest.param(bad, "OUTPUT input must be an object", id=f"input-{param.id}")
            for param in NOT_OBJECTS
            for bad in param.values
        ),
        pytest.param({}, "deliveryId must be a nonempty string", id="empty"),
        *(
            pytest.param(
                with_(OUTPUT, deliveryId=bad),
                "deliveryId must be a nonempty string",
                id=f"deliveryId-{param.id}",
            )
            for param in NOT_NONEMPTY
            for bad in param.values
        ),
        pytest.param(
            with_(OUTPUT, deliveryId=ID_257),
            "deliveryId must be 1 to 256 characters",
            id="deliveryId-257",
        ),
        pytest.param(
            with_(OUTPUT, deliveryId=ASTRAL_257),
            "deliveryId must be 1 to 256 characters",
            id="deliveryId-257-astral",
        ),
        pytest.param(
            without(OUTPUT, "message"), "message must be an object", id="no-message"
        ),
        *(
            pytest.param(
                with_(OUTPUT, message=bad),
                "message must be an object",
                id=f"message-{param.id}",
            )
            for param in NOT_OBJECTS
            for bad in param.values
        ),
        *(
            pytest.param(
                with_(OUTPUT, message=with_(MESSAGE, role=bad)),
                "Invalid message role",
                id=f"role-{name}",
            )
            for name, bad in named(
                ("null", None),
                ("upper", "User"),
                ("other", "bot"),
                ("empty", ""),
                ("array", ["user"]),
                ("number", 1),
            )
        ),
        pytest.param(
            with_(OUTPUT, message=without(MESSAGE, "role")),
            "Invalid message role",
            id="no-role",
        ),
        pytest.param(
            with_(OUTPUT, message=without(MESSAGE, "content")),
            "message.content is required",
            id="no-content",
        ),
        pytest.param(
            with_(OUTPUT, message=with_(MESSAGE, content=NAN)),
            "message.content must be JSON-serializable",
            id="content-nan",
        ),
        pytest.param(
            with_(
                OUTPUT, message=with_(MESSAGE, content=[{"type": "json", "data": {1}}])
            ),
            "message.content.0.data must contain only JSON objects and arrays",
            id="content-part-set",
        ),
        pytest.param(
            with_(OUTPUT, message=with_(MESSAGE, content=cycle_list())),
            "message.content.1 must not contain a cycle",
            id="content-cycle",
        ),
        *(
            pytest.param(
                with_(OUTPUT, message=with_(MESSAGE, name=bad)),
                "message.name must be a string",
                id=f"name-{name}",
            )
            for name, bad in named(
                ("null", None),
                ("number", 1),
                ("false", False),
                ("array", ["n"]),
            )
        ),
        pytest.param(
            with_(OUTPUT, message=with_(MESSAGE, extra=INF)),
            "message.extra must be JSON-serializable",
            id="message-extra-inf",
        ),
        *(
            pytest.param(
                with_(OUTPUT, artifacts=bad),
                "artifacts must be an array",
                id=f"artifacts-{name}",
            )
            for name, bad in named(
                ("null", None),
                ("object", ARTIFACT),
                ("string", "x"),
                ("tuple", (ARTIFACT,)),
            )
        ),
        pytest.param(
            with_(OUTPUT, artifacts=[ARTIFACT, None]),
            "artifact must be an object",
            id="artifact-null",
        ),
        # Order of checks.
        pytest.param(
            {"deliveryId": "", "message": None},
            "deliveryId must be a nonempty string",
            id="order-deliveryId-before-message",
        ),
        pytest.param(
            {"deliveryId": ID_257, "message": None},
            "deliveryId must be 1 to 256 characters",
            id="order-deliveryId-length-before-message",
        ),
        pytest.param(
            with_(OUTPUT, message={"role": "bot"}),
            "Invalid message role",
            id="order-role-before-content",
        ),
        pytest.param(
            with_(OUTPUT, message={"role": "user", "name": 1}),
            "message.content is required",
            id="order-content-required-before-name",
        ),
        pytest.param(
            with_(OUTPUT, message={"role": "user", "content": NAN, "name": 1}),
            "message.content must be JSON-serializable",
            id="order-content-json-before-name",
        ),
        pytest.param(
            with_(OUTPUT, message=with_(MESSAGE, name=1), artifacts=None),
            "message.name must be a string",
            id="order-name-before-artifacts",
        ),
    ],
)
def test_output_request_rejects(value: object, message: str) -> None:
    assert fails(check.output_request, value) == message


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("", id="empty-string"),
        pytest.param(None, id="null"),
        pytest.param(False, id="false"),
        pytest.param(0, id="zero"),
        pytest.param({"a": 1}, id="object"),
        pytest.param([1, "x"], id="array"),
        pytest.param(
            [
                {"type": "text", "text": "hi"},
                {"type": "json", "data": {"a": [1]}},
                {"type": "reference", "reference": {"uri": "u"}},
            ],
            id="parts",
        ),
        pytest.param([{"type": "bogus"}, {"no": "type"}], id="parts-not-checked"),
    ],
)
@pytest.mark.parametrize("role", ["system", "user", "assistant", "tool"])
def test_output_request_accepts_every_role_and_json_content(
    role: str, content: object
) -> None:
    value = {"deliveryId": "d", "message": {"role": role, "content": content}}
    assert wire(check.output_request(value)) == value


def test_output_request_serialises_and_keeps_message_extras() -> None:
    value = {
        "deliveryId": ASTRAL_256,
        "message": {"role": "tool", "name": "", "content": None, "meta": {"k": [1]}},
        "artifacts": [
            {
                "name": "r",
                "reference": {"uri": "u", "mediaType": "image/png", "width": 3},
                "caption": "kept",
            }
        ],
        "dropped": True,
    }
    request = check.output_request(value)
    assert wire(request) == without(value, "dropped")
    encoded = request.to_json()
    assert b'"deliveryId":' in encoded
    assert b'"content":null' in encoded
    assert b'"mediaType":"image/png"' in encoded
    assert b"dropped" not in encoded


def test_output_request_omits_absent_fields() -> None:
    assert wire(check.output_request(OUTPUT)) == OUTPUT
    assert wire(check.output_request(with_(OUTPUT, artifacts=[]))) == with_(
        OUTPUT, artifacts=[]
    )


# --------------------------------------------------------------------------------------------------
# artifacts (reference 2.7)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        *(
            pytest.param(bad, "artifacts must be an array", id=f"artifacts-{name}")
            for name, bad in named(
                ("null", None),
                ("object", {}),
                ("string", "x"),
                ("tuple", ()),
            )
        ),
        *(
            pytest.param([bad], "artifact must be an object", id=f"artifact-{param.id}")
            for param in NOT_OBJECTS
            for bad in param.values
        ),
        pytest.param([{}], "artifact.name must be a nonempty string", id="empty"),
        *(
            pytest.param(
                [with_(ARTIFACT, name=bad)],
                "artifact.name must be a nonempty string",
                id=f"name-{param.id}",
            )
            for param in NOT_NONEMPTY
            for bad in param.values
        ),
        pytest.param(
            [without(ARTIFACT, "reference")],
            "artifact.reference must be an object",
            id="no-reference",
        ),
        *(
            pytest.param(
                [with_(ARTIFACT, reference=bad)],
                "artifact.reference must be an object",
                id=f"reference-{param.id}",
            )
            for param in NOT_OBJECTS
            for bad in param.values
        ),
        pytest.param(
            [with_(ARTIFACT, reference={})],
            "artifact.reference.uri must be a nonempty string",
            id="no-uri",
        ),
        *(
            pytest.param(
                [with_(ARTIFACT, reference={"uri": bad})],
                "artifact.reference.uri must be a nonempty string",
                id=f"uri-{param.id}",
            )
            for param in NOT_NONEMPTY
            for bad in param.values
        ),
        *(
            pytest.param(
                [with_(ARTIFACT, reference={"uri": "u", key: bad})],
                f"artifact.reference.{key} must be a string",
                id=f"{key}-{name}",
            )
            for key in ("mediaType", "digest")
            for name, bad in named(("null", None), ("number", 1), ("object", {}))
        ),
        pytest.param(
            [with_(ARTIFACT, reference={"uri": "u", "size": NAN})],
            "artifact.reference.size must be JSON-serializable",
            id="reference-extra-nan",
        ),
        pytest.param(
            [with_(ARTIFACT, caption=(1,))],
            "artifact.caption must contain only JSON objects and arrays",
            id="artifact-extra-tuple",
        ),
        pytest.param(
            [ARTIFACT, with_(ARTIFACT, name="")],
            "artifact.name must be a nonempty string",
            id="second-element",
        ),
        # Order of checks.
        pytest.param(
            [{"name": "", "reference": None}],
            "artifact.name must be a nonempty string",
            id="order-name-before-reference",
        ),
        pytest.param(
            [{"name": "n", "reference": {"uri": "", "mediaType": 1}}],
            "artifact.reference.uri must be a nonempty string",
            id="order-uri-before-mediaType",
        ),
        pytest.param(
            [{"name": "n", "reference": {"uri": "u", "mediaType": 1, "digest": 1}}],
            "artifact.reference.mediaType must be a string",
            id="order-mediaType-before-digest",
        ),
        pytest.param(
            [{"name": "", "reference": {"uri": "u"}}, None],
            "artifact.name must be a nonempty string",
            id="order-first-element-first",
        ),
    ],
)
def test_artifacts_reject(value: object, message: str) -> None:
    assert fails(check.artifacts, value) == message


def test_artifacts_accept_and_keep_extra_keys() -> None:
    value = [
        ARTIFACT,
        {
            "name": " x ",
            "reference": {
                "uri": "u",
                "mediaType": "",
                "digest": "sha256:00",
                "x": [1, None],
            },
            "note": {"a": "b"},
        },
    ]
    result = check.artifacts(value)
    assert [wire(artifact) for artifact in result] == value
    assert result[1].reference.media_type == ""
    assert check.artifacts([]) == []


# --------------------------------------------------------------------------------------------------
# outputReceipt (reference 2.8)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        *(
            pytest.param(
                bad, "Output receipt must be an object", id=f"receipt-{param.id}"
            )
            for param in NOT_OBJECTS
            for bad in param.values
        ),
        pytest.param({}, "deliveryId must be a nonempty string", id="empty"),
        *(
            pytest.param(
                with_(RECEIPT, deliveryId=bad),
                "deliveryId must be a nonempty string",
                id=f"deliveryId-{param.id}",
            )
            for param in NOT_NONEMPTY
            for bad in param.values
        ),
        pytest.param(
            without(RECEIPT, "status"), "Invalid output status", id="no-status"
        ),
        *(
            pytest.param(
                with_(RECEIPT, status=bad),
                "Invalid output status",
                id=f"status-{name}",
            )
            for name, bad in named(
                ("null", None),
                ("upper", "ACCEPTED"),
                ("result-status", "success"),
                ("array", ["accepted"]),
                ("number", 1),
            )
        ),
        *(
            pytest.param(
                with_(RECEIPT, status=status),
                "Interaction error is required",
                id=f"{status}-without-error",
            )
            for status in ("rejected", "unknown")
        ),
        *(
            pytest.param(
                with_(RECEIPT, status=status, error=None),
                "Interaction error is required",
                id=f"{status}-error-null",
            )
            for status in ("accepted", "rejected", "unknown")
        ),
        pytest.param(
            with_(RECEIPT, status="rejected", error=[]),
            "error.code must be a nonempty string",
            id="error-array",
        ),
        pytest.param(
            with_(RECEIPT, error={"code": "X", "message": "at x.js:1"}),
            "Unsafe interaction error message",
            id="accepted-unsafe-error",
        ),
        pytest.param(
            with_(RECEIPT, status="rejected", error={"code": "X", "message": "/x"}),
            "Unsafe interaction error message",
            id="rejected-unsafe-error-no-fallback",
        ),
        pytest.param(
            with_(RECEIPT, status="unknown", error=with_(ERROR, retryable="no")),
            "error.retryable must be boolean",
            id="retryable-string",
        ),
        *(
            pytest.param(
                with_(RECEIPT, metadata=bad),
                "metadata must be an object",
                id=f"metadata-{param.id}",
            )
            for param in NOT_OBJECTS
            for bad in param.values
        ),
        pytest.param(
            with_(RECEIPT, metadata={"a": NAN}),
            "metadata.a must be JSON-serializable",
            id="metadata-nan",
        ),
        pytest.param(
            with_(RECEIPT, metadata=cycle_dict()),
            "metadata.self must not contain a cycle",
            id="metadata-cycle",
        ),
        pytest.param(
            with_(RECEIPT, artifacts=None),
            "artifacts must be an array",
            id="artifacts-null",
        ),
        pytest.param(
            with_(RECEIPT, artifacts=[{"name": "n"}]),
            "artifact.reference must be an object",
            id="artifact-no-reference",
        ),
        # Order of checks.
        pytest.param(
            {"deliveryId": "", "status": "bogus"},
            "deliveryId must be a nonempty string",
            id="order-deliveryId-before-status",
        ),
        pytest.param(
            {"deliveryId": "d", "status": "bogus", "error": None},
            "Invalid output status",
            id="order-status-before-error",
        ),
        pytest.param(
            {"deliveryId": "d", "status": "rejected", "metadata": None},
            "Interaction error is required",
            id="order-missing-error-before-metadata",
        ),
        pytest.param(
            with_(RECEIPT, error={"code": "X", "message": "/x"}, metadata=None),
            "Unsafe interaction error message",
            id="order-error-before-metadata",
        ),
        pytest.param(
            with_(RECEIPT, metadata=None, artifacts=None),
            "metadata must be an object",
            id="order-metadata-before-artifacts",
        ),
    ],
)
def test_output_receipt_rejects(value: object, message: str) -> None:
    assert fails(check.output_receipt, value) == message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(RECEIPT, RECEIPT, id="accepted-minimal"),
        pytest.param(
            with_(RECEIPT, error={**ERROR, "stack": "s", "token": "t"}),
            with_(RECEIPT, error=ERROR),
            id="accepted-safe-error-projected",
        ),
        pytest.param(
            with_(RECEIPT, status="rejected", error=with_(ERROR, retryable=True)),
            with_(RECEIPT, status="rejected", error=with_(ERROR, retryable=True)),
            id="rejected",
        ),
        pytest.param(
            with_(RECEIPT, status="unknown", error=ERROR),
            with_(RECEIPT, status="unknown", error=ERROR),
            id="unknown",
        ),
        pytest.param(
            with_(RECEIPT, metadata={}, artifacts=[]),
            with_(RECEIPT, metadata={}, artifacts=[]),
            id="empty-metadata-and-artifacts",
        ),
        pytest.param(
            with_(
                RECEIPT,
                metadata={"messageId": "m-1", "nested": [None]},
                artifacts=[with_(ARTIFACT, extra=1)],
                dropped="x",
            ),
            with_(
                RECEIPT,
                metadata={"messageId": "m-1", "nested": [None]},
                artifacts=[with_(ARTIFACT, extra=1)],
            ),
            id="full-unknown-top-level-key-dropped",
        ),
    ],
)
def test_output_receipt_accepts(
    value: dict[str, Any], expected: dict[str, Any]
) -> None:
    receipt = check.output_receipt(value)
    assert wire(receipt) == expected
    assert b'"deliveryId":' in receipt.to_json()


def test_external_result_refuses_a_key_that_cannot_be_serialised() -> None:
    value = with_(SUCCESS, content={"ok": 1}, structuredContent={"a": {"\udfff": 1}})
    assert (
        fails(check.external_result, value)
        == "structuredContent.a must be JSON-serializable"
    )
