"""The replays without a server (replay.md 3-4): which recorded subjects are what, the plan of a
requests replay (bytes, headers, the nth outcome of K, id suffixes), the comparison of outcomes with
its ignored paths, and the report."""

import json
from collections.abc import Mapping
from typing import Any

import pytest

from interaction_worker.recording import (
    Difference,
    FailedRequest,
    RecordedMessage,
    Recording,
    RecordingError,
    RecordingHeader,
    ReplayReport,
)
from interaction_worker.recording.compare import (
    Ignored,
    Outcome,
    compare,
    restore_ids,
)
from interaction_worker.recording.events import plan_events
from interaction_worker.recording.families import (
    OutcomeSubject,
    event_family,
    outcome_subject,
    request_kind,
    rewrite_prefix,
)
from interaction_worker.recording.plan import plan_requests, reply_outcome
from interaction_worker.recording.report import MISSING

P = "rec"


def recording(*messages: tuple[Any, ...], prefix: str = P) -> Recording:
    """Messages as (subject, body[, headers[, at]]); a body that is not bytes is JSON-encoded."""
    built = []
    for seq, (subject, body, *rest) in enumerate(messages, start=1):
        headers: Mapping[str, str | list[str]] | None = rest[0] if rest else None
        at = rest[1] if len(rest) > 1 else f"2026-11-30T12:00:{seq:02d}.000Z"
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        built.append(RecordedMessage(seq, at, subject, data, headers, reply=True))
    return Recording(RecordingHeader(prefix, "", (f"{prefix}.>",), "test"), built)


def call(call_id: object, name: str = "read_text") -> dict[str, Any]:
    return {"call": {"id": call_id, "name": name, "arguments": {"path": "a.txt"}}}


def result(call_id: str, text: str) -> dict[str, Any]:
    return {
        "callId": call_id,
        "source": "read_text",
        "status": "success",
        "content": text,
    }


def dead(code: str, payload: object = None) -> dict[str, Any]:
    letter: dict[str, Any] = {
        "subject": f"{P}.x",
        "error": {"code": code, "message": "m"},
    }
    if payload is not None:
        letter["payload"] = json.dumps(payload)
    return letter


# --- subjects -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subject", "kind", "family"),
    [
        ("rec.tool.call", "tool", None),
        ("rec.mcp.call", "mcp", None),
        ("rec.observe", "observe", None),
        ("rec.output.deliver", "output", None),
        ("rec.command", "command", None),
        ("rec.tool.result.c-1", None, "tool"),
        ("rec.tool.observation.c-1", None, "tool"),
        ("rec.mcp.result.c-1", None, "mcp"),
        ("rec.mcp.observation.c-1", None, "mcp"),
        ("rec.output.receipt.d-1", None, "output"),
        ("rec.command.done.reply.k", None, "command"),
        ("rec.dead.tool.=", None, "dead"),
        ("rec.tool.list", None, None),
        ("rec.command.catalog", None, None),
        ("rec.reply.1", None, None),
        ("rec.tool.result", None, None),
        ("other.tool.call", None, None),
        ("record.tool.result.c-1", None, None),
    ],
)
def test_each_subject_is_a_request_an_event_of_a_family_or_neither(
    subject: str, kind: str | None, family: str | None
) -> None:
    assert request_kind(subject, P) == kind
    assert event_family(subject, P) == family


def test_outcome_subjects_name_the_request_kind_and_key() -> None:
    assert outcome_subject("rec.tool.result.c-1", P) == OutcomeSubject(
        "tool", "c-1", False
    )
    assert outcome_subject("rec.command.done.reply.k-1", P) == OutcomeSubject(
        "command", "k-1", False
    )
    assert outcome_subject("rec.dead.output.=", P) == OutcomeSubject(
        "output", "=", True
    )
    assert outcome_subject("rec.command.done.k-1", P) is None
    assert outcome_subject("rec.tool.observation.c-1", P) is None
    assert outcome_subject("rec.dead.list.x", P) is None


def test_the_prefix_is_rewritten_only_at_the_start() -> None:
    assert rewrite_prefix("rec.tool.result.rec", "rec", "new") == "new.tool.result.rec"
    assert rewrite_prefix("ui.rec.x", "rec", "new") == "ui.rec.x"
    assert rewrite_prefix("recx.tool.call", "rec", "new") == "recx.tool.call"


# --- events ---------------------------------------------------------------------------------------


def test_events_are_planned_in_order_without_requests_and_with_their_gaps() -> None:
    rec = recording(
        ("rec.tool.call", call("c-1"), None, "2026-11-30T12:00:00.000Z"),
        ("rec.tool.result.c-1", result("c-1", "a"), None, "2026-11-30T12:00:01.000Z"),
        ("ui.messages.d-1", b"\xff", {"A": ["1", "2"]}, "2026-11-30T12:00:01.500Z"),
        ("rec.tool.list", {}, None, "2026-11-30T12:00:02.000Z"),
        ("rec.dead.tool.=", dead("INVALID_JSON"), None, "2026-11-30T12:00:03.500Z"),
        ("rec.tool.observation.c-1", {}, None, "2026-11-30T12:00:03.000Z"),
    )

    planned = plan_events(rec, prefix="new", speed=2)

    assert [(e.subject, e.delay) for e in planned] == [
        ("new.tool.result.c-1", 0.0),
        ("ui.messages.d-1", 0.25),
        ("new.dead.tool.=", 1.0),
        ("new.tool.observation.c-1", 0.0),  # the clock went back: no wait
    ]
    assert planned[1].data == b"\xff"
    assert planned[1].headers == {"A": "1, 2"}
    assert [e.delay for e in plan_events(rec)] == [0.0] * 4
    only = plan_events(rec, only=("dead", "tool"))
    assert [e.subject for e in only] == [
        "rec.tool.result.c-1",
        "rec.dead.tool.=",
        "rec.tool.observation.c-1",
    ]


def test_a_time_that_is_not_rfc_3339_is_an_error_only_when_the_gaps_matter() -> None:
    rec = recording(("rec.tool.result.c-1", {}, None, "yesterday"))

    assert len(plan_events(rec)) == 1
    assert plan_events(recording(("rec.tool.call", {})), speed=1) == []
    with pytest.raises(RecordingError, match='seq 1: "at" is not an RFC 3339 time'):
        plan_events(rec, speed=1)


# --- the plan of a requests replay ----------------------------------------------------------------


def test_the_nth_request_with_a_key_is_held_to_the_nth_outcome_with_it() -> None:
    rec = recording(
        ("rec.tool.call", call("c-1")),
        ("rec.tool.call", call("c-1")),
        ("rec.tool.result.c-1", result("c-1", "first")),
        ("rec.tool.observation.c-1", {"ignored": True}),
        ("rec.tool.result.c-1", result("c-1", "second")),
        ("rec.tool.call", call("c-1")),
        ("rec.tool.call", call("c-2")),
        ("rec.dead.tool.c-2", dead("NOT_FOUND")),
        ("rec.tool.call", call("")),
        ("rec.dead.tool.=", dead("INVALID_INPUT")),
    )

    planned = plan_requests(rec)

    assert [p.seq for p in planned] == [1, 2, 6, 7, 9]
    assert [p.recorded for p in planned] == [
        Outcome(result("c-1", "first")),
        Outcome(result("c-1", "second")),
        None,  # a third c-1 has no recorded outcome
        Outcome({"error": {"code": "NOT_FOUND", "message": "m"}}, "NOT_FOUND"),
        Outcome({"error": {"code": "INVALID_INPUT", "message": "m"}}, "INVALID_INPUT"),
    ]
    assert [p.id for p in planned] == ["c-1", "c-1", "c-1", "c-2", None]
    assert all(p.compared for p in planned)
    assert {p.to for p in planned} == {"tool.call"}


def test_requests_without_events_are_replayed_but_not_compared() -> None:
    discover = {"operation": "discover", "server": "files"}
    invoke = {"operation": "invoke", "server": "files", **call("files")}
    rec = recording(
        ("rec.observe", {"result": result("c-1", "x")}),
        ("rec.mcp.call", discover),
        ("rec.dead.mcp.files", dead("UNAVAILABLE", discover)),
        ("rec.mcp.call", invoke),
        ("rec.mcp.result.files", result("files", "invoked")),
        ("rec.command", {"type": "reply"}),
        ("rec.command.done.reply.0a1b", {"id": "reply", "result": 1}),
        ("rec.command", {"type": "reply"}, {"Interaction-Command-Id": "k 1"}),
        ("rec.command.done.reply.k=201", {"id": "reply", "result": 2}),
    )

    planned = plan_requests(rec)

    assert [(p.kind, p.compared) for p in planned] == [
        ("observe", False),
        ("mcp", False),
        ("mcp", True),
        ("command", False),
        ("command", True),
    ]
    # The discover's dead letter has the invoke's K and is not taken by it.
    assert planned[2].recorded == Outcome(result("files", "invoked"))
    assert planned[4].recorded == Outcome({"id": "reply", "result": 2})
    assert planned[4].to == "command"
    assert [p.recorded for p in plan_requests(rec, compare=False)] == [None] * 5
    assert not any(p.compared for p in plan_requests(rec, compare=False))


def test_a_command_id_header_in_another_case_keys_the_comparison() -> None:
    """As the worker reads it (docs/wire.md 3): a client of another language lower-cases it."""
    rec = recording(
        ("rec.command", {"type": "reply"}, {"interaction-command-id": "k-1"}),
        ("rec.command.done.reply.k-1", {"id": "reply", "result": 1}),
    )

    (planned,) = plan_requests(rec, id_suffix="~r")

    assert (planned.id, planned.compared) == ("k-1", True)
    assert planned.recorded == Outcome({"id": "reply", "result": 1})
    assert planned.headers == {"interaction-command-id": "k-1~r"}


def test_recorded_bytes_and_headers_go_out_as_recorded_but_the_reply_headers() -> None:
    body = b'{"call": {"id": "c-1", "name": "read_text", "arguments": {}}}  '
    headers = {
        "traceparent": "00-1-2-01",
        "nats-msg-id": "x",
        "INTERACTION-REPLY-TO": "_INBOX.old",
        "X-Many": ["a", "b"],
    }
    rec = recording(("rec.tool.call", body, headers))

    (planned,) = plan_requests(rec)

    assert planned.data == body
    assert planned.headers == {"traceparent": "00-1-2-01", "X-Many": "a, b"}


def test_an_id_suffix_goes_on_every_valid_id_and_maps_back() -> None:
    rec = recording(
        ("rec.tool.call", call("c-1"), {"Interaction-Call-Id": "c-1"}),
        ("rec.mcp.call", {"operation": "invoke", "server": "s", **call("m-1")}),
        ("rec.output.deliver", {"deliveryId": "d-1", "message": {"role": "assistant"}}),
        ("rec.command", {"type": "reply"}, {"interaction-command-id": "k-1"}),
        ("rec.tool.call", call(" ")),
        ("rec.tool.call", b"not json"),
        ("rec.observe", b'{"result": {"callId": "c-1"}, "x": 1.0}'),
    )

    tool, mcp, output, command, blank, broken, observe = plan_requests(
        rec, id_suffix="~r"
    )

    assert json.loads(tool.data)["call"]["id"] == "c-1~r"
    assert b" " not in tool.data  # re-serialised compactly
    assert tool.headers == {"Interaction-Call-Id": "c-1~r"}
    assert tool.ids == {"c-1~r": "c-1"}
    assert tool.id == "c-1"  # differences name the recorded id
    assert json.loads(mcp.data)["call"]["id"] == "m-1~r"
    assert json.loads(output.data)["deliveryId"] == "d-1~r"
    assert output.ids == {"d-1~r": "d-1"}
    assert command.headers == {"interaction-command-id": "k-1~r"}
    assert command.data == b'{"type": "reply"}'
    # An invalid id stays invalid, and bodies with nothing to suffix keep their bytes.
    assert (blank.data, blank.ids) == (json.dumps(call(" ")).encode(), {})
    assert broken.data == b"not json"
    assert observe.data == b'{"result": {"callId": "c-1"}, "x": 1.0}'


def test_a_reply_is_compared_as_the_recorded_outcome_it_stands_for() -> None:
    rec = recording(
        ("rec.mcp.call", {"operation": "invoke", "server": "s", **call("m-1")}),
        ("rec.tool.call", call("c-1")),
    )
    invoke, tool = plan_requests(rec, id_suffix="~r")
    wrapped = {"operation": "invoke", "result": result("m-1~r", "x")}
    error = {"error": {"code": "NOT_FOUND", "message": "Unknown tool: c-1~r"}}
    service_error = {
        "Nats-Service-Error": "Unknown tool",
        "Nats-Service-Error-Code": "404",
    }

    assert reply_outcome(invoke, json.dumps(wrapped).encode(), None) == Outcome(
        result("m-1", "x")
    )
    assert reply_outcome(tool, json.dumps(wrapped).encode(), {}) == Outcome(
        {"operation": "invoke", "result": result("m-1~r", "x")}
    )
    assert reply_outcome(tool, json.dumps(error).encode(), service_error) == Outcome(
        {"error": {"code": "NOT_FOUND", "message": "Unknown tool: c-1~r"}}, "NOT_FOUND"
    )
    assert reply_outcome(tool, b"oops", service_error) == Outcome("oops", "UNKNOWN")


# --- the comparison -------------------------------------------------------------------------------


def differences(
    recorded: Any, replayed: Any, *ignore: str
) -> list[tuple[str, Any, Any]]:
    found = compare(Outcome(recorded), Outcome(replayed), Ignored(ignore))
    assert all(reason is None for *_, reason in found)
    return [(path, old, new) for path, old, new, _ in found]


def test_each_differing_leaf_is_one_difference_at_its_dotted_path() -> None:
    recorded = {
        "callId": "c-1",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "structuredContent": {"n": 1, "flag": True, "gone": [1]},
    }
    replayed = {
        "callId": "c-1",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "c"}, "x"],
        "structuredContent": {"n": 1.0, "flag": 1, "new": None},
    }

    assert differences(recorded, replayed) == [
        ("content.1.text", "b", "c"),
        ("content.2", MISSING, "x"),
        ("structuredContent.flag", True, 1),
        ("structuredContent.gone", [1], MISSING),
        ("structuredContent.new", MISSING, None),
    ]
    assert differences(recorded, recorded) == []
    assert differences({"a": [1]}, {"a": {"0": 1}}) == [("a", [1], {"0": 1})]
    assert differences("text", {"a": 1}) == [("", "text", {"a": 1})]


def test_volatile_fields_are_ignored_and_so_are_the_callers_paths() -> None:
    recorded = {
        "metadata": {"stream": "S", "seq": 1, "duplicate": False, "n": 1},
        "content": [{"text": "a", "id": 1}, {"text": "b", "id": 2}],
        "deep": {"metadata": {"seq": 1}},
    }
    replayed = {
        "metadata": {"stream": "T", "seq": 2, "duplicate": True, "n": 1},
        "content": [{"text": "x", "id": 3}, {"text": "y", "id": 4}],
        "deep": {"metadata": {"seq": 2}},
    }

    assert differences(recorded, replayed, "content.*.text", "content.1.id") == [
        ("content.0.id", 1, 3),
        (
            "deep.metadata.seq",
            1,
            2,
        ),  # metadata.seq is the jetstream sink's, at the root
    ]
    assert differences(recorded, replayed, "*") == []
    shown = differences({"a": {"at": 1, "b": 2}}, {}, "a.b")
    # A value is shown without its ignored fields.
    assert shown == [("a", {"at": 1}, MISSING)]


def test_a_tools_own_at_and_received_at_are_compared_at_any_depth() -> None:
    """Only the jetstream sink's metadata and the caller's paths are volatile: a tool's `at` is output."""
    recorded = {
        "receivedAt": "2026-11-30T12:00:00Z",
        "structuredContent": {"at": "09:00", "rows": [{"at": 1}]},
        "metadata": {"at": "a"},
    }
    replayed = {
        "receivedAt": "2026-11-30T12:00:05Z",
        "structuredContent": {"at": "10:00", "rows": [{"at": 2}]},
        "metadata": {"at": "b"},
    }

    assert differences(recorded, replayed) == [
        ("receivedAt", "2026-11-30T12:00:00Z", "2026-11-30T12:00:05Z"),
        ("structuredContent.at", "09:00", "10:00"),
        ("structuredContent.rows.0.at", 1, 2),
        ("metadata.at", "a", "b"),
    ]
    ignored = ("receivedAt", "structuredContent.at", "structuredContent.rows.*.at")
    assert differences(recorded, replayed, *ignored) == [("metadata.at", "a", "b")]
    assert differences(recorded, replayed, *ignored, "metadata.at") == []


@pytest.mark.parametrize("path", ["", "a..b", ".a", "a."])
def test_an_ignore_path_with_an_empty_part_is_refused(path: str) -> None:
    with pytest.raises(ValueError, match="not a dotted path"):
        Ignored([path])


def test_a_recorded_refusal_needs_a_refusal_with_the_same_code() -> None:
    ignored = Ignored()
    refused = Outcome({"error": {"code": "NOT_FOUND", "message": "a"}}, "NOT_FOUND")
    again = Outcome(
        {"error": {"code": "NOT_FOUND", "message": "reworded"}}, "NOT_FOUND"
    )
    other = Outcome(
        {"error": {"code": "INVALID_INPUT", "message": "b"}}, "INVALID_INPUT"
    )
    success = Outcome({"status": "success", "content": "x"})

    assert compare(refused, again, ignored) == []
    assert compare(refused, other, ignored) == [
        ("", refused.document, other.document, "refused with another code")
    ]
    assert compare(refused, success, ignored) == [
        (
            "",
            refused.document,
            success.document,
            "a result where the recording has a refusal",
        )
    ]
    assert compare(success, refused, ignored) == [
        (
            "",
            success.document,
            refused.document,
            "a refusal where the recording has a result",
        )
    ]


def test_suffixed_ids_are_put_back_wherever_they_are_whole_values() -> None:
    replayed = {"callId": "c-1~r", "c-1~r": ["c-1~r", "ran c-1~r"], "n": 1}

    assert restore_ids(replayed, {"c-1~r": "c-1"}) == {
        "callId": "c-1",
        "c-1~r": ["c-1", "ran c-1~r"],
        "n": 1,
    }
    assert restore_ids(replayed, {}) is replayed


# --- the report -----------------------------------------------------------------------------------


def test_the_report_sums_up_and_fails_with_a_readable_diff() -> None:
    report = ReplayReport(total=4, identical=1, not_compared=1)
    report.assert_identical()
    assert report.exit_code == 0
    report.different = 1
    report.differences.append(
        Difference(7, "rec.tool.call", "c-1", "content.0.text", "a", MISSING)
    )
    report.errors.append(FailedRequest(9, "rec.tool.call", None, "no reply"))

    assert report.summary() == (
        "replayed 4 requests: 1 identical, 1 different, 1 not compared, 1 errors"
    )
    assert report.exit_code == 1
    with pytest.raises(AssertionError) as failed:
        report.assert_identical()
    assert str(failed.value) == "\n\n".join(
        [
            report.summary(),
            'seq 7 rec.tool.call id "c-1" path content.0.text\n'
            '  recorded:\n    "a"\n  replayed: (absent)',
            "seq 9 rec.tool.call id null: error: no reply",
        ]
    )
    assert report.differences[0].to_wire() == {
        "seq": 7,
        "subject": "rec.tool.call",
        "id": "c-1",
        "path": "content.0.text",
        "recorded": "a",
    }
    only_errors = ReplayReport(total=1, errors=[FailedRequest(1, "s", None, "m")])
    assert only_errors.exit_code == 1
