"""The subject table (wire.md section 2): one row per request subject, from which both bindings subscribe."""

import re
from dataclasses import dataclass
from typing import Literal

Kind = Literal["tool", "mcp", "observe", "output", "list", "command", "catalog"]
KINDS: tuple[Kind, ...] = (
    "tool",
    "mcp",
    "observe",
    "output",
    "list",
    "command",
    "catalog",
)
# Served only by a worker given a command dispatcher (docs/commands.md).
COMMAND_KINDS: tuple[Kind, ...] = ("command", "catalog")


@dataclass(frozen=True, slots=True)
class Subjects:
    """Every subject of one prefix."""

    prefix: str = "interaction"

    def request(self, kind: Kind) -> str:
        return _REQUEST[kind].format(p=self.prefix)

    def dead(self, kind: Kind, key: str) -> str:
        # The catalog's refusals are the command family's (wire.md 5 names the kinds).
        return f"{self.prefix}.dead.{'command' if kind == 'catalog' else kind}.{key}"

    def command_done(self, command_id: str, key: str) -> str:
        return f"{self.prefix}.command.done.{command_id}.{key}"

    def event_family(self, name: str) -> str:
        """`tool.result` → `interaction.tool.result`; the family part of an event's Nats-Msg-Id."""
        return f"{self.prefix}.{name}"

    def all_requests(self) -> dict[Kind, str]:
        return {kind: self.request(kind) for kind in KINDS}


_REQUEST: dict[Kind, str] = {
    "tool": "{p}.tool.call",
    "mcp": "{p}.mcp.call",
    "observe": "{p}.observe",
    "output": "{p}.output.deliver",
    "list": "{p}.tool.list",
    "command": "{p}.command",
    "catalog": "{p}.command.catalog",
}

_SUBJECT = re.compile(r"[^\s*>.]+(?:\.[^\s*>.]+)*")


def is_publishable_subject(subject: str, prefixes: tuple[str, ...]) -> bool:
    """A literal subject (no wildcards, no empty token) under one of `prefixes`."""
    return (
        len(subject) <= 512
        and subject.isprintable()
        and _SUBJECT.fullmatch(subject) is not None
        and any(subject.startswith(prefix) for prefix in prefixes)
    )
