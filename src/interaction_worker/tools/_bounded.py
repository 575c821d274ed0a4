"""The reference's output bounds (section 7.4): a UTF-8 byte prefix that never splits a character,
then a line limit."""

from typing import NamedTuple


class Bounded(NamedTuple):
    value: str
    truncated: bool


def _utf8(value: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates become U+FFFD, as Node's Buffer.from does.
        return (
            value.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()
        )


def utf8_prefix(value: str, max_bytes: int) -> Bounded:
    """At most `max_bytes` UTF-8 bytes of `value`, cut before the character the limit falls in."""
    encoded = _utf8(value)
    if len(encoded) <= max_bytes:
        return Bounded(value, False)
    end = max_bytes
    while end > 0 and encoded[end] & 0xC0 == 0x80:
        end -= 1
    return Bounded(encoded[:end].decode("utf-8"), True)


def bounded(value: str, max_bytes: int, max_entries: int) -> Bounded:
    """`utf8_prefix`, then at most `max_entries` lines (the last newline kept)."""
    prefix = utf8_prefix(value, max_bytes)
    end = len(prefix.value)
    index = -1
    for _ in range(max_entries):
        index = prefix.value.find("\n", index + 1)
        if index < 0:
            break
    else:
        end = index + 1
    return Bounded(prefix.value[:end], prefix.truncated or end < len(prefix.value))
