"""INTERACTION.OBSERVE: the shaping of an ExternalResult into a tool message (reference section 5)."""

import copy
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import to_json

import interaction_worker.nodes.observe as observe_module
from interaction_worker import (
    ExternalResult,
    InteractionError,
    Observation,
    observe_external_result,
)
from interaction_worker.contracts import is_safe_message, js_trim
from interaction_worker.contracts import validation as check
from interaction_worker.errors import InvalidInput
from interaction_worker.nodes import (
    observation_document,
    observe_request,
    shortened_observation,
    wire_json,
    wire_observation,
)

NO_MATCH = {"code": "NO_MATCH", "message": "No match"}


def observe_wire(**fields: Any) -> dict[str, Any]:
    """Observe a result given in wire form (callId "c1" and source "lookup" unless given)."""
    raw = {"callId": "c1", "source": "lookup", **fields}
    observation = observe_request({"result": raw})
    assert isinstance(observation, Observation)
    return observation.to_wire()


def message_content(**fields: Any) -> Any:
    return observe_wire(**fields)["message"]["content"]


# --- the examples of the reference -------------------------------------------------------------


def test_seed_example_read_text() -> None:
    assert observe_wire(source="read_text", status="success", content="file text") == {
        "callId": "c1",
        "source": "read_text",
        "status": "success",
        "message": {"role": "tool", "name": "read_text", "content": "file text"},
    }


def test_failed_with_content_puts_the_error_summary_first() -> None:
    assert message_content(status="failed", content="x", error=NO_MATCH) == [
        {"type": "text", "text": "failed: NO_MATCH: No match"},
        {"type": "text", "text": "x"},
    ]


def test_read_only_command_example() -> None:
    structured = {
        "command": "ls",
        "args": ["-1", "--", "."],
        "stdout": "a\nb\n",
        "stderr": "",
        "exitCode": 0,
        "truncated": False,
    }
    wire = observe_wire(
        source="ls", status="success", content="a\nb\n", structuredContent=structured
    )
    assert wire["message"]["content"] == [
        {"type": "text", "text": "a\nb\n"},
        {"type": "json", "data": structured},
    ]
    assert wire["structuredContent"] == structured


# --- content conversion -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param("plain", "plain", id="string"),
        pytest.param("", "", id="empty-string"),
        pytest.param([{"type": "text", "text": "x"}], "x", id="single-text-part"),
        pytest.param([{"type": "text", "text": ""}], "", id="single-empty-text-part"),
        pytest.param([], [], id="empty-list"),
        pytest.param(
            [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            id="two-text-parts",
        ),
        pytest.param(
            [{"type": "json", "data": {"k": 1}}],
            [{"type": "json", "data": {"k": 1}}],
            id="single-json-part",
        ),
        pytest.param(
            [{"type": "image", "url": "https://x.test/a.png"}, {"type": 5}],
            [{"type": "image", "url": "https://x.test/a.png"}, {"type": 5}],
            id="part-types-unchecked",
        ),
        pytest.param(
            [{"type": "text", "text": "t", "extra": True}],
            "t",
            id="text-part-extra-keys",
        ),
        pytest.param(42, [{"type": "json", "data": 42}], id="number"),
        pytest.param(1.5, [{"type": "json", "data": 1.5}], id="float"),
        pytest.param(0, [{"type": "json", "data": 0}], id="zero"),
        pytest.param(True, [{"type": "json", "data": True}], id="true"),
        pytest.param(False, [{"type": "json", "data": False}], id="false"),
        pytest.param(None, [{"type": "json", "data": None}], id="null"),
        pytest.param({"a": 1}, [{"type": "json", "data": {"a": 1}}], id="object"),
        pytest.param(
            {"type": "text", "text": "x"},
            [{"type": "json", "data": {"type": "text", "text": "x"}}],
            id="bare-part-object",
        ),
        pytest.param(
            [{"type": "text", "text": "x"}, "y"],
            [{"type": "json", "data": [{"type": "text", "text": "x"}, "y"]}],
            id="mixed-array",
        ),
        pytest.param(
            [{"type": "text", "text": "x"}, {"text": "no type"}],
            [
                {
                    "type": "json",
                    "data": [{"type": "text", "text": "x"}, {"text": "no type"}],
                }
            ],
            id="part-without-type",
        ),
        pytest.param(
            [[1], [2]], [{"type": "json", "data": [[1], [2]]}], id="array-of-arrays"
        ),
        pytest.param(
            ["a", "b"], [{"type": "json", "data": ["a", "b"]}], id="array-of-strings"
        ),
        pytest.param([None], [{"type": "json", "data": [None]}], id="array-of-null"),
    ],
)
def test_content_conversion(content: Any, expected: Any) -> None:
    assert message_content(status="success", content=content) == expected


def test_success_with_only_empty_references_gives_an_empty_list() -> None:
    wire = observe_wire(status="success", references=[])
    assert wire["message"]["content"] == []
    assert wire["references"] == []


@pytest.mark.parametrize(
    ("structured", "expected"),
    [
        pytest.param(
            {"found": True}, [{"type": "json", "data": {"found": True}}], id="object"
        ),
        pytest.param(
            "text", [{"type": "json", "data": "text"}], id="string-stays-json"
        ),
        pytest.param(None, [{"type": "json", "data": None}], id="null"),
        pytest.param([], [{"type": "json", "data": []}], id="empty-list"),
    ],
)
def test_structured_content_is_one_json_part(structured: Any, expected: Any) -> None:
    wire = observe_wire(status="success", structuredContent=structured)
    assert wire["message"]["content"] == expected
    assert wire["structuredContent"] == structured


def test_one_reference_part_per_reference_with_extra_keys_kept() -> None:
    references = [
        {"uri": "file:///a.txt", "mediaType": "text/plain"},
        {"uri": "https://x.test/b", "digest": "sha256:00", "title": "B", "rank": 2},
        {"uri": "urn:c"},
    ]
    wire = observe_wire(status="success", references=references)
    assert wire["message"]["content"] == [
        {"type": "reference", "reference": reference} for reference in references
    ]
    assert wire["references"] == references


@pytest.mark.parametrize("status", ["failed", "cancelled", "timeout", "unknown"])
def test_the_error_summary_alone_is_a_plain_string(status: str) -> None:
    wire = observe_wire(status=status, error=NO_MATCH)
    assert wire["message"]["content"] == f"{status}: NO_MATCH: No match"
    assert wire["error"] == NO_MATCH


def test_the_summary_uses_the_projected_error() -> None:
    error = {
        "code": "E.1",
        "message": "Try again",
        "retryable": True,
        "stack": "s",
        "token": "t",
    }
    wire = observe_wire(status="timeout", content=[], error=error)
    assert wire["message"]["content"] == "timeout: E.1: Try again"
    assert wire["error"] == {"code": "E.1", "message": "Try again", "retryable": True}


def test_a_safe_error_on_success_is_kept_without_a_summary() -> None:
    wire = observe_wire(
        status="success", content="ok", error={"code": "WARN", "message": "Partial"}
    )
    assert wire["message"]["content"] == "ok"
    assert wire["error"] == {"code": "WARN", "message": "Partial"}


def test_the_full_order_of_parts_and_keys() -> None:
    error = {"code": "NO_MATCH", "message": "No match", "retryable": False}
    wire = observe_wire(
        status="failed",
        metadata={"attempt": 1},
        references=[{"uri": "file:///r"}],
        error=error,
        structuredContent={"hits": 0},
        content=[{"type": "text", "text": "partial"}, {"type": "json", "data": 1}],
    )
    assert list(wire) == [
        "callId",
        "source",
        "status",
        "message",
        "structuredContent",
        "references",
        "error",
        "metadata",
    ]
    assert list(wire["message"]) == ["role", "name", "content"]
    assert wire == {
        "callId": "c1",
        "source": "lookup",
        "status": "failed",
        "message": {
            "role": "tool",
            "name": "lookup",
            "content": [
                {"type": "text", "text": "failed: NO_MATCH: No match"},
                {"type": "text", "text": "partial"},
                {"type": "json", "data": 1},
                {"type": "json", "data": {"hits": 0}},
                {"type": "reference", "reference": {"uri": "file:///r"}},
            ],
        },
        "structuredContent": {"hits": 0},
        "references": [{"uri": "file:///r"}],
        "error": error,
        "metadata": {"attempt": 1},
    }


@pytest.mark.parametrize(
    ("fields", "keys"),
    [
        pytest.param(
            {"status": "success", "content": "x"},
            ["callId", "source", "status", "message"],
            id="minimal",
        ),
        pytest.param(
            {"status": "success", "content": "x", "metadata": None},
            ["callId", "source", "status", "message", "metadata"],
            id="null-metadata-kept",
        ),
        pytest.param(
            {"status": "success", "metadata": [1], "structuredContent": 0},
            ["callId", "source", "status", "message", "structuredContent", "metadata"],
            id="structured-and-metadata",
        ),
        pytest.param(
            {"status": "failed", "error": NO_MATCH},
            ["callId", "source", "status", "message", "error"],
            id="error-only",
        ),
    ],
)
def test_optional_keys_only_when_present(
    fields: dict[str, Any], keys: list[str]
) -> None:
    wire = observe_wire(**fields)
    assert list(wire) == keys
    assert "content" not in wire


def test_message_name_is_the_source() -> None:
    wire = observe_wire(source="files:read", status="success", content="x")
    assert wire["message"] == {"role": "tool", "name": "files:read", "content": "x"}
    assert wire["source"] == "files:read"


def test_unknown_result_keys_are_dropped() -> None:
    wire = observe_wire(status="success", content="x", extra="dropped")
    assert "extra" not in wire


def test_observe_accepts_a_model() -> None:
    result = ExternalResult(
        call_id="m1",
        source="lookup",
        status="failed",
        content="x",
        error=InteractionError(code="NO_MATCH", message="No match"),
    )
    assert observe_external_result(result).to_wire() == {
        "callId": "m1",
        "source": "lookup",
        "status": "failed",
        "message": {
            "role": "tool",
            "name": "lookup",
            "content": [
                {"type": "text", "text": "failed: NO_MATCH: No match"},
                {"type": "text", "text": "x"},
            ],
        },
        "error": {"code": "NO_MATCH", "message": "No match"},
    }


# --- invalid results ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(None, "External result is required", id="no-body"),
        pytest.param({}, "External result is required", id="no-result"),
        pytest.param({"result": None}, "External result is required", id="null-result"),
        pytest.param(
            {"result": "x"}, "External result is required", id="string-result"
        ),
        pytest.param(
            {"result": {}}, "callId must be a nonempty string", id="empty-result"
        ),
        pytest.param(
            {"result": {"callId": "c", "status": "success", "content": "x"}},
            "source must be a nonempty string",
            id="no-source",
        ),
        pytest.param(
            {"result": {"callId": "c", "source": "s", "status": "done"}},
            "Invalid external result status",
            id="bad-status",
        ),
        pytest.param(
            {"result": {"callId": "c", "source": "s", "status": "success"}},
            "Successful external result has no content",
            id="success-without-content",
        ),
        pytest.param(
            {
                "result": {
                    "callId": "c",
                    "source": "s",
                    "status": "failed",
                    "content": "x",
                }
            },
            "Interaction error is required",
            id="failed-without-error",
        ),
        pytest.param(
            {"result": {"callId": "c", "source": "s", "status": "unknown"}},
            "Interaction error is required",
            id="unknown-without-error",
        ),
        pytest.param(
            {
                "result": {
                    "callId": "c",
                    "source": "s",
                    "status": "failed",
                    "error": {"code": "E", "message": "open /etc/passwd: denied"},
                }
            },
            "Unsafe interaction error message",
            id="unsafe-error",
        ),
        pytest.param(
            {
                "result": {
                    "callId": "c",
                    "source": "s",
                    "status": "success",
                    "references": [{}],
                }
            },
            "reference.uri must be a nonempty string",
            id="reference-without-uri",
        ),
    ],
)
def test_observe_request_refuses_an_invalid_result(body: Any, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        observe_request(body)
    assert caught.value.message == message
    assert caught.value.code == "INVALID_INPUT"


@pytest.mark.parametrize(
    ("result", "message"),
    [
        pytest.param(
            ExternalResult(call_id="c", source="s", status="failed", content="x"),
            "Interaction error is required",
            id="failed-without-error",
        ),
        pytest.param(
            ExternalResult(call_id="c", source="s", status="success"),
            "Successful external result has no content",
            id="success-without-content",
        ),
        pytest.param(
            ExternalResult(
                call_id="c",
                source="s",
                status="failed",
                error=InteractionError(code="E", message="Bearer abc"),
            ),
            "Unsafe interaction error message",
            id="unsafe-error",
        ),
        pytest.param(
            ExternalResult(call_id="c", source="s", status="success", content=math.nan),
            "content must be JSON-serializable",
            id="nan-content",
        ),
        pytest.param(
            ExternalResult(call_id=" ", source="s", status="success", content="x"),
            "callId must be a nonempty string",
            id="blank-call-id",
        ),
    ],
)
def test_observe_external_result_validates_a_model(
    result: ExternalResult, message: str
) -> None:
    """The reference's observeExternalResult validates its input first: a model is no exception."""
    with pytest.raises(InvalidInput) as caught:
        observe_external_result(result)
    assert caught.value.message == message


# --- properties ---------------------------------------------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
nonblank = st.text(min_size=1, max_size=16).filter(lambda s: bool(js_trim(s)))
parts = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=12)),
    st.builds(lambda d: {"type": "json", "data": d}, json_values),
    st.builds(lambda u: {"type": "reference", "reference": {"uri": u}}, nonblank),
    st.builds(
        lambda k, v: {"type": k, "value": v},
        st.sampled_from(["image", "audio", "custom"]),
        json_values,
    ),
)
contents = st.one_of(st.text(max_size=12), json_values, st.lists(parts, max_size=4))
references = st.lists(
    st.fixed_dictionaries(
        {"uri": nonblank},
        optional={
            "mediaType": st.text(max_size=8),
            "digest": st.text(max_size=8),
            "note": json_values,
        },
    ),
    max_size=3,
)
errors = st.fixed_dictionaries(
    {
        "code": st.from_regex(r"[A-Za-z0-9_.-]{1,64}", fullmatch=True),
        "message": st.text(min_size=1, max_size=40).filter(
            lambda m: bool(js_trim(m)) and is_safe_message(m)
        ),
    },
    optional={"retryable": st.booleans(), "stack": st.text(max_size=8)},
)


@st.composite
def wire_results(draw: st.DrawFn) -> dict[str, Any]:
    raw: dict[str, Any] = draw(
        st.fixed_dictionaries(
            {
                "callId": nonblank,
                "source": nonblank,
                "status": st.sampled_from(
                    ["success", "failed", "cancelled", "timeout", "unknown"]
                ),
            },
            optional={
                "content": contents,
                "structuredContent": json_values,
                "references": references,
                "error": errors,
                "metadata": json_values,
            },
        )
    )
    if (
        raw["status"] == "success"
        and not {"content", "structuredContent", "references"} & raw.keys()
    ):
        raw["content"] = draw(contents)
    if raw["status"] != "success" and "error" not in raw:
        raw["error"] = draw(errors)
    return raw


def expected_observation(raw: dict[str, Any]) -> dict[str, Any]:
    """An independent statement of the reference's shaping rules, on wire dicts."""
    error = None
    if "error" in raw:
        error = {
            k: v
            for k, v in raw["error"].items()
            if k in ("code", "message", "retryable")
        }
    shaped: list[Any] = []
    if raw["status"] != "success":
        assert error is not None
        shaped.append(
            {
                "type": "text",
                "text": f"{raw['status']}: {error['code']}: {error['message']}",
            }
        )
    if "content" in raw:
        content = raw["content"]
        if isinstance(content, str):
            shaped.append({"type": "text", "text": content})
        elif isinstance(content, list) and all(
            isinstance(p, dict) and "type" in p for p in content
        ):
            shaped.extend(content)
        else:
            shaped.append({"type": "json", "data": content})
    if "structuredContent" in raw:
        shaped.append({"type": "json", "data": raw["structuredContent"]})
    shaped.extend(
        {"type": "reference", "reference": r} for r in raw.get("references", [])
    )
    single_text = len(shaped) == 1 and shaped[0]["type"] == "text"
    observation: dict[str, Any] = {
        "callId": raw["callId"],
        "source": raw["source"],
        "status": raw["status"],
        "message": {
            "role": "tool",
            "name": raw["source"],
            "content": shaped[0]["text"] if single_text else shaped,
        },
    }
    for key in ("structuredContent", "references"):
        if key in raw:
            observation[key] = raw[key]
    if error is not None:
        observation["error"] = error
    if "metadata" in raw:
        observation["metadata"] = raw["metadata"]
    return observation


@settings(deadline=None, max_examples=150)
@given(raw=wire_results())
def test_observing_follows_the_shaping_rules(raw: dict[str, Any]) -> None:
    wire = observe_request({"result": raw}).to_wire()
    expected = expected_observation(raw)
    assert wire == expected
    assert list(wire) == list(expected)


@settings(deadline=None, max_examples=150)
@given(raw=wire_results())
def test_observing_is_deterministic(raw: dict[str, Any]) -> None:
    result = check.external_result(raw)
    first = observe_external_result(result)
    second = observe_external_result(result)
    assert first.to_wire() == second.to_wire()
    assert observe_request({"result": raw}).to_wire() == first.to_wire()


@settings(deadline=None, max_examples=150)
@given(raw=wire_results())
def test_observing_is_pure(raw: dict[str, Any]) -> None:
    raw_before = copy.deepcopy(raw)
    result = check.external_result(raw)
    result_before = result.to_wire()
    observe_external_result(result)
    observe_request({"result": raw})
    assert result.to_wire() == result_before
    assert raw == raw_before


@settings(deadline=None, max_examples=200)
@given(raw=wire_results())
def test_the_wire_document_path_publishes_the_same_bytes_as_the_models(
    raw: dict[str, Any],
) -> None:
    """The bus serialises a result's wire document and its observation without building models:
    the bytes must be those of the models, key order included."""
    raw_before = copy.deepcopy(raw)
    fields = {k: v for k, v in raw.items() if k not in ("callId", "source")}
    document = check.external_result_document(fields, raw["callId"], raw["source"])
    model = check.external_result(raw)

    assert to_json(document) == model.to_json()
    observation = wire_observation(document)
    assert observation == expected_observation(raw)
    assert list(observation) == list(expected_observation(raw))
    assert to_json(observation) == observe_request({"result": raw}).to_json()
    assert observation_document(model) == observation
    assert raw == raw_before


@settings(deadline=None, max_examples=300)
@given(raw=wire_results())
def test_the_result_and_its_observation_are_written_as_to_json_writes_them(
    raw: dict[str, Any],
) -> None:
    """`wire_json` writes each field once into both documents, never building the observation:
    the bytes are those of `to_json` on the document and on its observation."""
    fields = {k: v for k, v in raw.items() if k not in ("callId", "source")}
    document = check.external_result_document(fields, raw["callId"], raw["source"])
    before = copy.deepcopy(document)

    assert wire_json(document) == (
        to_json(document),
        to_json(wire_observation(document)),
    )
    assert document == before


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("plain", id="plain"),
        pytest.param('say "hi"', id="quote"),
        pytest.param("back\\slash", id="backslash"),
        pytest.param("line\nbreak\ttab\x00\x1f\x7f", id="controls"),
        pytest.param("é😀\u2028\u2029\u00a0\u200b", id="unicode"),
        pytest.param([{"type": "text", "text": "only"}], id="one-text-part"),
        pytest.param([{"type": "text", "text": 3}], id="one-part-not-text"),
        pytest.param([], id="no-parts"),
        pytest.param([{"type": "json", "data": 1.5e300}, {"type": "x"}], id="parts"),
        pytest.param({"a": [1, -0.0, None, True]}, id="json"),
    ],
)
@pytest.mark.parametrize("status", ["success", "failed"])
def test_each_kind_of_content_is_written_as_to_json_writes_it(
    content: Any, status: str
) -> None:
    document: dict[str, Any] = {
        "callId": "c-1",
        "source": "files:read",
        "status": status,
        "content": content,
    }
    if status != "success":
        document["error"] = {"code": "E", "message": 'not "found"'}
    assert wire_json(document) == (
        to_json(document),
        to_json(wire_observation(document)),
    )


def test_a_text_result_is_observed_from_its_own_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A text tool's success is serialised once: its observation is never built as a dict."""
    document = {
        "callId": "c-1",
        "source": "files:read",
        "status": "success",
        "content": 'a "quoted", content:"x" text',
    }
    expected = (to_json(document), to_json(wire_observation(document)))

    def shaped(result: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("the observation was built as a dict")

    monkeypatch.setattr(observe_module, "wire_observation", shaped)
    assert wire_json(document) == expected


def test_a_document_with_other_keys_is_written_whole() -> None:
    document = {"callId": "c-1", "source": "s", "status": "success", "extra": 1}
    assert wire_json(document) == (
        to_json(document),
        to_json(wire_observation(document)),
    )


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        pytest.param(None, {"truncated": True}, id="absent"),
        pytest.param({"attempt": 2}, {"attempt": 2, "truncated": True}, id="object"),
        pytest.param("plain", {"truncated": True}, id="not-an-object"),
    ],
)
def test_a_shortened_observation_points_at_the_result_and_keeps_the_rest(
    metadata: Any, expected: dict[str, Any]
) -> None:
    result: dict[str, Any] = {
        "callId": "c-1",
        "source": "files:read",
        "status": "failed",
        "content": "text",
        "structuredContent": {"text": "text"},
        "references": [{"uri": "file://a"}],
        "error": {"code": "E", "message": "m"},
    }
    if metadata is not None:
        result["metadata"] = metadata
    observation = wire_observation(result)

    shortened = shortened_observation(observation, 12345)

    assert shortened == {
        "callId": "c-1",
        "source": "files:read",
        "status": "failed",
        "message": {
            "role": "tool",
            "name": "files:read",
            "content": "Content omitted (12345 bytes): see the result event",
        },
        "error": {"code": "E", "message": "m"},
        "metadata": expected,
    }
    Observation.model_validate(shortened)
    assert observation["structuredContent"] == {
        "text": "text"
    }  # the original is not changed
