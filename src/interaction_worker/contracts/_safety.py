"""The safety rule for error messages (reference `interactionError`, step 4), plus its additions:
DEL, Python traceback frames, lone surrogates, and the common shapes of a credential."""

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
# Beyond the reference: the common shapes of a credential in a message (docs/wire.md 4). Measured
# on refusal paths only (a successful call never builds an error message): the case-sensitive
# shapes are matched on the message, the names and files on its lower-cased copy (a case-insensitive
# alternation costs several times more to scan), and every alternative starts with a literal, so
# the regex engine skips ahead to the characters that can start one.
#
# The well-known token prefixes with enough characters after them to be a token, a URL with a
# password, a PEM private key block:
_TOKEN_SHAPE = re.compile(
    "|".join(
        (
            r"gh[pousr]_[A-Za-z0-9]{8}|github_pat_[A-Za-z0-9_]{8}|glpat-[A-Za-z0-9_-]{8}",
            r"xox[abprs]-[A-Za-z0-9-]{8}|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}",
            r"AIza[0-9A-Za-z_-]{30}|sk_live_[A-Za-z0-9]{8}|pk_live_[A-Za-z0-9]{8}",
            r"rk_live_[A-Za-z0-9]{8}|sk_test_[A-Za-z0-9]{8}|rk_test_[A-Za-z0-9]{8}",
            r"npm_[A-Za-z0-9]{30}|eyJ[A-Za-z0-9_-]+\.eyJ|-----BEGIN[ A-Z0-9]*PRIVATE KEY",
            r"://[^/@:\s]+:[^/@\s]+@",
        )
    ),
    re.ASCII,
)
# A secret-like name given a value (`db password=hunter2`, `"api_key": "…"`, `Authorization: Basic
# …`). The name ends in the secret word, so `max_tokens=5` and `author: x` pass.
_SECRET_VALUE = re.compile(
    r"(?:passw(?:or)?d|passphrase|secret(?:[_-]?key)?|token|api[_-]?key|access[_-]?key"
    rf"|private[_-]?key|auth(?:orization)?|credentials?)[0-9]*[\"']?{_S}*[:=]{_S}*[\"']?"
    + "[^\"',;"
    + JS_WS_CLASS[1:],
    re.ASCII,
)
# Private key files and the directories of credentials.
_SECRET_FILE = re.compile(
    r"\.ssh[\\/]|\.gnupg[\\/]|\.aws[\\/]credentials|\.netrc|\.pgpass"
    r"|\.pem(?![a-z0-9_])|\.key(?![a-z0-9_])|\.p12(?![a-z0-9_])|\.pfx(?![a-z0-9_])"
    # A name starting `id_`: the look-behind after the literal keeps the literal first.
    r"|id_(?<![a-z0-9]id_)(?:rsa|dsa|ecdsa|ed25519)(?![a-z0-9])",
    re.ASCII,
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
    """True when `message` may be shown to a client: short, one line, no credential, path or stack
    frame. A message that fails it is replaced by its code's fixed message (docs/wire.md 4)."""
    return not (
        utf16_length(message) > MAX_MESSAGE_LENGTH
        or _UNSAFE_TEXT.search(message)
        or _has_credential(message)
        or _ABSOLUTE_PATH.search(message)
        or _JS_STACK_FRAME.search(message)
        or _PY_STACK_FRAME.search(message)
        # Beyond the reference: a lone surrogate cannot be encoded, so the message could not be sent.
        or has_lone_surrogate(message)
    )


def _has_credential(message: str) -> bool:
    if _TOKEN_SHAPE.search(message):
        return True
    # Lower-cased, a non-ASCII letter may become an ASCII one (KELVIN SIGN to `k`): these
    # additions then refuse a little more, never less.
    lowered = message.lower()
    if ("=" in message or ":" in message) and _SECRET_VALUE.search(lowered):
        return True
    return _SECRET_FILE.search(lowered) is not None
