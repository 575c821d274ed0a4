"""The subject table (wire.md section 2): one row per node, from which both bindings subscribe."""

import re
from dataclasses import dataclass
from typing import Literal

Kind = Literal["tool", "mcp", "observe", "output"]
KINDS: tuple[Kind, ...] = ("tool", "mcp", "observe", "output")

# The key of a message whose id could not be read: `=` alone is never produced by the encoding.
NO_KEY = "="
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SAFE_BYTES = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
)


def subject_key(identifier: str) -> str:
    """The subject key K: each UTF-8 byte outside `[A-Za-z0-9_-]` becomes `=XX` (uppercase hex).

    Valid as one subject token and as a JetStream key-value key, and injective, so two ids never share
    a key.
    """
    if _PLAIN_KEY.fullmatch(identifier):
        return identifier
    return "".join(
        chr(byte) if byte in _SAFE_BYTES else f"={byte:02X}"
        for byte in identifier.encode("utf-8", "surrogatepass")
    )


def is_safe_header_value(value: str) -> bool:
    """Printable ASCII without leading or trailing spaces: never CR, LF or another control character."""
    return (
        bool(value)
        and value.isascii()
        and value.isprintable()
        and value[0] != " "
        and value[-1] != " "
    )


@dataclass(frozen=True, slots=True)
class Subjects:
    """Every subject of one prefix."""

    prefix: str = "interaction"

    def request(self, kind: Kind) -> str:
        return _REQUEST[kind].format(p=self.prefix)

    def dead(self, kind: Kind, key: str) -> str:
        return f"{self.prefix}.dead.{kind}.{key}"

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
