"""The `output:` block: the fan-out policy and the sinks that receive deliveries."""

import json
from pathlib import Path
from typing import Any

from ..contracts.keys import key_filter
from .model import SINK_TYPES, OutputSettings, SinkSettings
from .values import (
    Rule,
    Section,
    is_name,
    is_stream_name,
    is_subject,
    resolve_path,
    url_problem,
)

# The keys each type of sink takes besides `type`, `name` and `timeout`.
_FIELDS: dict[str, tuple[str, ...]] = {
    "console": (),
    "nats": ("subject",),
    "jetstream": ("subject", "stream"),
    "http": ("url",),
    "file": ("path",),
}
_REQUIRED = {"nats": "subject", "jetstream": "subject", "http": "url", "file": "path"}
_ALL_FIELDS = ("subject", "stream", "url", "path")


def parse_output(top: Section, base_dir: Path) -> OutputSettings:
    with top.section("output") as s:
        policy: Any = s.choice("policy", "all", ("all", "any"))
        if not s.has("sinks"):
            return OutputSettings(policy=policy)
        raw = s.raw("sinks")
        if not isinstance(raw, list):
            s.fail("sinks", "must be a list of sinks ([] for none)")
            raw = []
        sinks: list[SinkSettings] = []
        for index, item in enumerate(raw):
            where = f"{s.key('sinks')}[{index}]"
            if not isinstance(item, dict):
                s.problems.add(where, "must be a mapping")
                continue
            with Section(item, where, s.problems) as sink:
                parsed = _sink(sink, index, base_dir)
            if parsed is None:
                continue
            if any(other.name == parsed.name for other in sinks):
                name = json.dumps(parsed.name, ensure_ascii=False)
                s.problems.add(sink.key("name"), f"{name} is used twice")
            sinks.append(parsed)
    return OutputSettings(policy=policy, sinks=tuple(sinks), sinks_given=True)


def _sink(s: Section, index: int, base_dir: Path) -> SinkSettings | None:
    kind: Any = s.choice("type", "", SINK_TYPES)
    if not s.has("type"):
        s.fail("type", f"must be one of {', '.join(SINK_TYPES)}")
    name = s.string(
        "name", f"{kind}#{index}", is_name, "must be a name of 1 to 256 characters"
    )
    timeout = s.duration("timeout", 10.0)
    if not kind:
        for key in _ALL_FIELDS:
            s.ignore(key)  # without a type, these cannot be judged
        return None
    for key in _ALL_FIELDS:
        if key not in _FIELDS[kind] and s.has(key):
            s.ignore(key)
            s.fail(key, f"is not used by a {kind} sink")
    required = _REQUIRED.get(kind)
    if required is not None and not s.has(required):
        s.fail(required, f"is required for a {kind} sink")
    subject_rule = (
        "must be subject tokens without wildcards; {key} stands for the delivery's key"
    )
    return SinkSettings(
        type=kind,
        name=name,
        timeout=timeout,
        subject=_optional(
            s, "subject", kind, lambda v: is_subject(v, placeholder=True), subject_rule
        ),
        stream=_optional(
            s,
            "stream",
            kind,
            is_stream_name,
            "must be a stream name of letters, digits, - and _",
        ),
        url=s.get("url", None, _http_url) if "url" in _FIELDS[kind] else None,
        path=s.get("path", None, lambda v: resolve_path(v, base_dir))
        if "path" in _FIELDS[kind]
        else None,
    )


def _optional(s: Section, key: str, kind: str, valid: Any, rule: str) -> str | None:
    if key not in _FIELDS[kind]:
        return None
    broken = Rule(rule)
    return s.get(key, None, lambda v: v if isinstance(v, str) and valid(v) else broken)


def _http_url(value: Any) -> str | Rule:
    example = "https://example.test/hook"
    if not isinstance(value, str):
        return Rule(f"must be a URL such as {example}")
    problem = url_problem(value, ("http", "https"), example)
    return value if problem is None else Rule(problem)


def browser_subjects(output: OutputSettings) -> tuple[str, ...]:
    """What a browser may subscribe to (docs/operations.md, "Browsers"): the deliveries of the
    `nats` and `jetstream` sinks, never an event."""
    found = (
        key_filter(sink.subject)
        for sink in output.sinks
        if sink.type in ("nats", "jetstream") and sink.subject is not None
    )
    return tuple(dict.fromkeys(found))


def history_streams(output: OutputSettings) -> tuple[str, ...]:
    """The `jetstream` sinks' streams, whose history a browser reads with direct gets."""
    found = (
        sink.stream
        for sink in output.sinks
        if sink.type == "jetstream" and sink.stream is not None
    )
    return tuple(dict.fromkeys(found))
