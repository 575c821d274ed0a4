"""The safety rule for error messages (reference `interactionError`, step 4), plus two additions."""

import re

from ._text import JS_WS_CLASS, has_lone_surrogate, utf16_length

MAX_MESSAGE_LENGTH = 512
_S = JS_WS_CLASS
_NOT_S_OR_SLASH = "[^\\\\/" + JS_WS_CLASS[1:]  # [^\\/<js whitespace>]

# Control characters (DEL too, beyond the reference) and credential markers. ASCII case folding
# only: JavaScript's non-unicode `/i` does not fold U+212A KELVIN SIGN to `k`, Python's re.I would.
_UNSAFE_TEXT = re.compile(
    rf"[\r\n\x00-\x1f\x7f]|Bearer{_S}|sk-[A-Za-z0-9]", re.IGNORECASE | re.ASCII
)
_ABSOLUTE_PATH = re.compile(
    rf"""(?:^|{_S}|\(|"|')(?:[A-Za-z]:[\\/]|\\\\{_NOT_S_OR_SLASH}+[\\/]|/[^/{JS_WS_CLASS[1:]})"""
)
_JS_STACK_FRAME = re.compile(
    rf"(?:^|{_S})at{_S}+(?:async{_S}+)?(?:[^(){JS_WS_CLASS[1:]}+{_S}+\()?"
    rf"[^(){JS_WS_CLASS[1:]}+\.[cm]?[jt]sx?:[0-9]+(?::[0-9]+)?\)?(?:{_S}|\Z)",
    re.IGNORECASE | re.ASCII,
)
# Beyond the reference: a Python traceback frame, even with a relative file name.
_PY_STACK_FRAME = re.compile(r'File "[^"]*", line [0-9]+')


def is_safe_message(message: str) -> bool:
    """True when `message` may be shown to a client: short, one line, no credential, path or stack frame."""
    return not (
        utf16_length(message) > MAX_MESSAGE_LENGTH
        or _UNSAFE_TEXT.search(message)
        or _ABSOLUTE_PATH.search(message)
        or _JS_STACK_FRAME.search(message)
        or _PY_STACK_FRAME.search(message)
        # Beyond the reference: a lone surrogate cannot be encoded, so the message could not be sent.
        or has_lone_surrogate(message)
    )
