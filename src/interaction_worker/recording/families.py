"""What each recorded subject is to the replays (replay.md 3-4): a request, an event of a family, or
neither; and the prefix rewriting of a subject.

Subjects are read relative to the recording header's prefix P. Under P, the request subjects are
`P.tool.call`, `P.mcp.call`, `P.observe`, `P.output.deliver` and `P.command`; the events are the
result, observation, receipt, `command.done` and dead-letter subjects (wire.md 2). Everything else
under P (`P.tool.list`, `P.command.catalog`, replies a client asked for under P) is skipped by both
replays: it is neither what a worker publishes on its own nor a request whose outcome is recorded.

A message recorded outside P (`record --subject ui.messages.>`: a nats sink's deliveries, say) has
no family. The events replay publishes it unchanged, never prefix-rewritten, when `--only` is not
given, because a downstream test of that subject needs it as much as the worker's own events;
`--only` names families of P, so it leaves such messages out.
"""

from dataclasses import dataclass

from ..contracts.wire import DEAD, WIRE, Kind

# The wire table's kinds that a replay sends again (docs/wire.md 2, docs/replay.md 3).
RequestKind = Kind
EventFamily = str

_REQUESTS: dict[str, RequestKind] = {
    row.request: kind for kind, row in WIRE.items() if row.replayed
}

# Relative subject heads of the events, each followed by at least one more token.
_EVENTS: tuple[tuple[str, EventFamily], ...] = (
    *(
        (f"{event.name}.", event.name.split(".", 1)[0])
        for row in WIRE.values()
        for event in row.events
    ),
    (f"{DEAD}.", DEAD),
)

# The events that are a request's outcome, with the request kind they answer.
_OUTCOMES: tuple[tuple[str, RequestKind], ...] = tuple(
    (f"{row.outcome.name}.", kind)
    for kind, row in WIRE.items()
    if row.replayed and row.outcome is not None
)
# `P.dead.KIND.K`: KIND names the request kind itself (`list` answers no request the replay sends).
_DEAD_KINDS: dict[str, RequestKind] = {
    WIRE[kind].dead: kind for kind in _REQUESTS.values()
}


@dataclass(frozen=True, slots=True)
class OutcomeSubject:
    """A recorded event that ends a request: a result (or receipt, or `command.done`) or a dead letter,
    for the request kind and subject key K it names."""

    kind: RequestKind
    key: str
    dead: bool


def relative(subject: str, prefix: str) -> str | None:
    """`subject` without `prefix.`, or None when it is not under the prefix."""
    head = prefix + "."
    if subject.startswith(head) and len(subject) > len(head):
        return subject[len(head) :]
    return None


def request_kind(subject: str, prefix: str) -> RequestKind | None:
    """The request kind of a recorded subject, or None when it is not a request subject of `prefix`."""
    rest = relative(subject, prefix)
    return None if rest is None else _REQUESTS.get(rest)


def event_family(subject: str, prefix: str) -> EventFamily | None:
    """The family of an event subject of `prefix`, or None (a request, another subject under the
    prefix, or a subject outside it)."""
    rest = relative(subject, prefix)
    if rest is None:
        return None
    for head, family in _EVENTS:
        if rest.startswith(head) and len(rest) > len(head):
            return family
    return None


def outcome_subject(subject: str, prefix: str) -> OutcomeSubject | None:
    """The request kind and K a recorded event answers, when it is one's outcome.

    `P.command.done.ID.K` is keyed by its last token; a dead letter of `P.tool.list` (`dead.list.K`)
    answers no request the replay sends.
    """
    rest = relative(subject, prefix)
    if rest is None:
        return None
    for head, kind in _OUTCOMES:
        if rest.startswith(head):
            tokens = rest[len(head) :].split(".")
            # `command.done.ID.K`: keyed by its last token, after the command's id.
            if kind == "command" and len(tokens) < 2:
                return None
            key = tokens[-1]
            return OutcomeSubject(kind, key, dead=False) if key else None
    if rest.startswith(f"{DEAD}."):
        dead_kind, _, key = rest[len(DEAD) + 1 :].partition(".")
        if dead_kind in _DEAD_KINDS and key:
            return OutcomeSubject(_DEAD_KINDS[dead_kind], key, dead=True)
    return None


def rewrite_prefix(subject: str, old: str, new: str) -> str:
    """`subject` under `new` instead of `old`; a subject outside `old` is returned unchanged."""
    rest = relative(subject, old)
    return subject if rest is None or old == new else f"{new}.{rest}"
