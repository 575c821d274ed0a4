"""Subject keys and header rules of the wire (wire.md sections 2 and 3), shared by the bus and
the sinks that publish on it."""

import re
from collections.abc import Mapping

from ._text import js_trim

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


def key_filter(template: str) -> str:
    """The subject filter that matches every subject of a template (`ui.{key}`, `ui.user-{key}.out`):
    the token holding `{key}` becomes `*`, since a key is always one token."""
    return ".".join("*" if "{key}" in token else token for token in template.split("."))


def is_safe_header_value(value: str) -> bool:
    """Printable ASCII without leading or trailing spaces: never CR, LF or another control character."""
    return (
        bool(value)
        and value.isascii()
        and value.isprintable()
        and value[0] != " "
        and value[-1] != " "
    )


def headers_size(headers: Mapping[str, str]) -> int:
    """The bytes `headers` take on the wire (NATS/1.0 line, `Name: value` lines, blank line)."""
    return 12 + sum(len(k) + len(v.encode()) + 4 for k, v in headers.items())


def header_any_case(headers: Mapping[str, str], name: str) -> str | None:
    """The value of header `name` spelled in another case (`interaction-reply-to`), for clients
    that lower-case header names; the first in the message's order. Called only when the exact
    lookup missed, so a message in the documented case pays nothing for it (docs/wire.md 3)."""
    folded = name.lower()
    size = len(folded)
    for key in headers:
        # The length first: most names differ in it, and it costs no lower-cased copy.
        if len(key) == size and key.lower() == folded:
            return headers[key]
    return None


def valid_id(value: object) -> str | None:
    """`value` when it can key the message's subjects: 1 to 256 characters, not only blanks.

    Read before the body is validated, so that even a refused message's dead letter is keyed by it."""
    if isinstance(value, str) and 0 < len(value) <= 256 and js_trim(value):
        return value
    return None


_REDACTED = "[redacted]"
_NOT_CREDENTIALS = frozenset(("nats-msg-id", "interaction-key"))
_CREDENTIAL_WORDS = ("token", "secret", "password", "key")


def redact_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """Request headers for a dead letter, with credentials replaced by "[redacted]"."""
    if not headers:
        return {}
    redacted: dict[str, str] = {}
    for name, value in headers.items():
        lowered = name.lower()
        secret = lowered in ("authorization", "cookie") or (
            lowered not in _NOT_CREDENTIALS
            and any(w in lowered for w in _CREDENTIAL_WORDS)
        )
        redacted[name] = _REDACTED if secret else value
    return redacted
