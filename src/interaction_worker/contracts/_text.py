"""Text rules of the reference, in JavaScript's terms.

The reference is TypeScript: `trim()`, `\\s` and `.length` there are not Python's `strip()`, `\\s` and
`len()`. These helpers give the JavaScript meaning, so that the same inputs pass and fail.
"""

import re

# ECMAScript WhiteSpace + LineTerminator: what String.prototype.trim removes and what `\s` matches.
JS_WHITESPACE = (
    "\t\n\x0b\x0c\r \xa0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
JS_WS_CLASS = "[" + re.escape(JS_WHITESPACE) + "]"

_SURROGATE = re.compile("[\ud800-\udfff]")


def js_trim(value: str) -> str:
    """`String.prototype.trim`: Python's `strip()` removes a different set of characters."""
    return value.strip(JS_WHITESPACE)


def utf16_length(value: str) -> int:
    """`String.prototype.length`: UTF-16 code units, so an astral character counts twice."""
    return (
        len(value) + sum(1 for ch in value if ord(ch) > 0xFFFF)
        if not value.isascii()
        else len(value)
    )


def has_lone_surrogate(value: str) -> bool:
    return not value.isascii() and _SURROGATE.search(value) is not None
