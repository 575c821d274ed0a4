"""The safety rule of error messages (reference section 2.4, step 4; wire.md section 4).

Beyond the reference the implementation also refuses DEL (0x7f), Python traceback frames and the
common shapes of a credential (a secret-like name given a value, well-known token prefixes, private
key files and PEM blocks).
"""

import pytest

from interaction_worker.contracts import is_safe_message
from interaction_worker.contracts._safety import MAX_MESSAGE_LENGTH

SAFE = [
    # Examples the reference names as passing.
    pytest.param("Retry at 12:30", id="time-is-not-a-frame"),
    pytest.param("https://x/y", id="url-slash-after-colon"),
    pytest.param("see https://example.com/a/b", id="url-after-space"),
    pytest.param("//x", id="double-slash-at-start"),
    pytest.param("a //x", id="double-slash-after-space"),
    pytest.param("Bearerx", id="bearer-without-whitespace"),
    pytest.param("Bearer", id="bearer-at-end"),
    pytest.param("sk-", id="sk-dash-alone"),
    pytest.param("sk-\u212a", id="sk-kelvin-sign-no-unicode-case-folding"),
    pytest.param("sk-\u0131", id="sk-dotless-i"),
    pytest.param("sk--", id="sk-dash-dash"),
    pytest.param("sk_a", id="sk-underscore"),
    pytest.param("Something failed", id="plain"),
    pytest.param("x", id="single-char"),
    # Paths only count at the start or after whitespace, (, " or '.
    pytest.param("/", id="slash-alone"),
    pytest.param("a / b", id="slash-then-space"),
    pytest.param("and/or", id="slash-inside-word"),
    pytest.param("x=/etc/passwd", id="path-after-equals"),
    pytest.param("[/etc/passwd]", id="path-after-bracket"),
    pytest.param("aC:\\x", id="drive-inside-word"),
    pytest.param("C:x", id="drive-without-separator"),
    pytest.param("\\\\host", id="unc-without-share-separator"),
    pytest.param("\\x", id="single-backslash"),
    # JavaScript's \s does not include U+0085, and the rule uses JavaScript's \s.
    pytest.param("\x85/etc/x", id="path-after-NEL"),
    pytest.param("Bearer\x85x", id="bearer-NEL"),
    # U+2028 is neither C0 nor matched by [\r\n]: the reference lets it through.
    pytest.param("a\u2028b", id="U+2028-alone"),
    pytest.param("a\x80b", id="C1-control"),
    # Stack frames need the exact shape.
    pytest.param("at x.py:3", id="frame-python-extension"),
    pytest.param("at x.js", id="frame-without-line"),
    pytest.param("at x.js:1x", id="frame-line-then-letter"),
    pytest.param("at x.js:1:2:3", id="frame-three-numbers"),
    pytest.param("at fn x.js:1", id="frame-function-without-paren"),
    pytest.param("chat x.js:1", id="frame-at-inside-word"),
    pytest.param("at x.jsxx:1", id="frame-bad-extension"),
    pytest.param("at x.ats:1", id="frame-ats-extension"),
    pytest.param("failed at step 3", id="at-without-file"),
    pytest.param("Traceback (most recent call last)", id="traceback-header"),
    pytest.param('file "x.py", line 3', id="python-frame-lowercase"),
    pytest.param('File "x.py", line', id="python-frame-without-number"),
    # Near misses of the credential shapes (the additions): a secret-like word without a value, or
    # inside a longer word, and prefixes without a token after them.
    pytest.param("max_tokens=5 exceeded", id="tokens-is-not-token"),
    pytest.param("author: Jane", id="author-is-not-auth"),
    pytest.param("password is required", id="password-without-value"),
    pytest.param("Permission denied: tools:token", id="tool-named-token"),
    pytest.param("Unexpected command argument: api_key", id="argument-named-api-key"),
    pytest.param("secretary=x", id="secretary"),
    pytest.param("ASIA and Europe", id="asia-word"),
    pytest.param("ghp_short", id="ghp-too-short"),
    pytest.param("xoxb-1", id="xoxb-too-short"),
    pytest.param("https://user@host/x", id="url-user-without-password"),
    pytest.param("keyboard.keys", id="keys-extension"),
    pytest.param("valid_rsa_mode", id="id-rsa-inside-word"),
    pytest.param("a" * MAX_MESSAGE_LENGTH, id="512-ascii"),
    pytest.param("é" * 512, id="512-bmp"),
    pytest.param("😀" * 256, id="256-emoji-is-512-units"),
    pytest.param("x" * 510 + "😀", id="510-plus-emoji"),
]

UNSAFE = [
    # Absolute paths.
    pytest.param("/etc/x", id="posix-at-start"),
    pytest.param("read /etc/passwd", id="posix-after-space"),
    pytest.param("see C:\\x", id="drive-backslash"),
    pytest.param("see C:/x", id="drive-slash"),
    pytest.param("c:\\", id="drive-at-start-lowercase"),
    pytest.param("\\\\host\\share", id="unc"),
    pytest.param("\\\\host/share", id="unc-forward"),
    pytest.param("open (/etc/x)", id="posix-after-paren"),
    pytest.param('open "/etc/x"', id="posix-after-double-quote"),
    pytest.param("open '/etc/x'", id="posix-after-single-quote"),
    pytest.param("(C:\\x)", id="drive-after-paren"),
    pytest.param('"\\\\h\\s"', id="unc-after-quote"),
    pytest.param("a\u00a0/etc/x", id="posix-after-nbsp"),
    pytest.param("a\u3000/x", id="posix-after-ideographic-space"),
    pytest.param("a\ufeff/x", id="posix-after-bom"),
    pytest.param("a\u2028/x", id="posix-after-line-separator"),
    pytest.param("/\u0085", id="slash-then-NEL-is-not-js-space"),
    # JavaScript stack frames.
    pytest.param("Error at handler (internal-module.ts:42:7)", id="frame-ts-paren"),
    pytest.param("at async fn (a.mjs:1)", id="frame-async-mjs"),
    pytest.param("at x.tsx:3", id="frame-tsx"),
    pytest.param("at x.js:1", id="frame-js"),
    pytest.param("at x.cjs:1:2", id="frame-cjs"),
    pytest.param("at x.jsx:10 then", id="frame-followed-by-space"),
    pytest.param("AT X.JS:1", id="frame-uppercase"),
    pytest.param("at  x.mts:1", id="frame-two-spaces"),
    pytest.param("at Object.<anonymous> (x.js:1:2)", id="frame-anonymous"),
    pytest.param("at\u00a0x.js:1", id="frame-nbsp"),
    # Python traceback frames (addition).
    pytest.param('File "x.py", line 3', id="python-frame"),
    pytest.param('in File "lib/a.py", line 12, in f', id="python-frame-inside"),
    # Credential markers.
    pytest.param("bearer x", id="bearer-lowercase"),
    pytest.param("Bearer x", id="bearer"),
    pytest.param("BEARER x", id="bearer-uppercase"),
    pytest.param("Bearer\tx", id="bearer-tab"),
    pytest.param("Bearer\u00a0x", id="bearer-nbsp"),
    pytest.param("Bearer\u2028x", id="bearer-line-separator"),
    pytest.param("Bearer ", id="bearer-space-at-end"),
    pytest.param("SK-a", id="sk-uppercase"),
    pytest.param("sk-a", id="sk-letter"),
    pytest.param("sk-0", id="sk-digit"),
    pytest.param("task-abc failed", id="sk-inside-word"),
    # Credential shapes (the additions): a secret-like name given a value.
    pytest.param("db password=hunter2 rejected", id="password-equals"),
    pytest.param("PASSWORD = hunter2", id="password-spaced-uppercase"),
    pytest.param("passwd: x", id="passwd-colon"),
    pytest.param("db_password=x", id="prefixed-name"),
    pytest.param("password2=x", id="name-with-digit"),
    pytest.param("secret=1", id="secret"),
    pytest.param("client_secret: s3", id="client-secret"),
    pytest.param("GITHUB_TOKEN=abc", id="env-token"),
    pytest.param("oauth_token=abc", id="oauth-token"),
    pytest.param('"api_key": "abc"', id="json-api-key"),
    pytest.param("apiKey=abc", id="camel-api-key"),
    pytest.param("x-api-key: abc", id="header-api-key"),
    pytest.param("AWS_SECRET_ACCESS_KEY=abc", id="aws-secret-access-key"),
    pytest.param("private_key=abc", id="private-key"),
    pytest.param("auth=abc", id="auth"),
    pytest.param("Authorization: Basic dXNlcjpwYXNz", id="authorization-basic"),
    pytest.param("credentials: u:p", id="credentials"),
    pytest.param("connect postgres://u:hunter2@db failed", id="url-with-password"),
    # The well-known token prefixes.
    pytest.param("ghp_" + "a1" * 18, id="github-classic"),
    pytest.param("gho_abcdefgh1", id="github-oauth"),
    pytest.param("ghu_abcdefgh1", id="github-user"),
    pytest.param("ghs_abcdefgh1", id="github-server"),
    pytest.param("ghr_abcdefgh1", id="github-refresh"),
    pytest.param("github_pat_11ABCDEFG0abc", id="github-fine-grained"),
    pytest.param("glpat-abcdefghij", id="gitlab"),
    pytest.param("xoxb-1234567890-abc", id="slack-bot"),
    pytest.param("xoxp-1234567890-abc", id="slack-user"),
    pytest.param("key AKIAIOSFODNN7EXAMPLE", id="aws-access-key-id"),
    pytest.param("ASIAIOSFODNN7EXAMPLE", id="aws-session-key-id"),
    pytest.param("AIza" + "B" * 35, id="google-api-key"),
    pytest.param("sk_live_abcdefgh1234", id="stripe-secret"),
    pytest.param("pk_live_abcdefgh", id="stripe-publishable"),
    pytest.param("rk_live_abcdefgh", id="stripe-restricted"),
    pytest.param("npm_" + "a" * 36, id="npm"),
    pytest.param("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", id="jwt"),
    # Private keys: their files, and PEM blocks.
    pytest.param("~/.ssh/id_rsa", id="ssh-dir"),
    pytest.param("key id_ed25519 missing", id="id-ed25519"),
    pytest.param("id_ecdsa", id="id-ecdsa"),
    pytest.param("load server.key failed", id="key-file"),
    pytest.param("cert.PEM missing", id="pem-file-uppercase"),
    pytest.param("bundle.p12", id="p12-file"),
    pytest.param("read ~/.aws/credentials", id="aws-credentials"),
    pytest.param("~/.netrc", id="netrc"),
    pytest.param("-----BEGIN RSA PRIVATE KEY-----", id="pem-rsa"),
    pytest.param("-----BEGIN OPENSSH PRIVATE KEY-----", id="pem-openssh"),
    pytest.param("-----BEGIN PRIVATE KEY-----MIIE", id="pem-pkcs8"),
    # Control characters.
    pytest.param("a\tb", id="tab"),
    pytest.param("a\nb", id="newline"),
    pytest.param("a\rb", id="carriage-return"),
    pytest.param("\x00", id="nul"),
    pytest.param("a\x0bb", id="vertical-tab"),
    pytest.param("a\x1cb", id="U+001C"),
    pytest.param("a\x1fb", id="U+001F"),
    pytest.param("a\x7fb", id="DEL-addition"),
    # Length, in UTF-16 code units.
    pytest.param("a" * (MAX_MESSAGE_LENGTH + 1), id="513-ascii"),
    pytest.param("é" * 513, id="513-bmp"),
    pytest.param("😀" * 257, id="257-emoji-is-514-units"),
    pytest.param("x" * 511 + "😀", id="511-plus-emoji-is-513-units"),
]


@pytest.mark.parametrize("message", SAFE)
def test_safe_messages(message: str) -> None:
    assert is_safe_message(message) is True


@pytest.mark.parametrize("message", UNSAFE)
def test_unsafe_messages(message: str) -> None:
    assert is_safe_message(message) is False


def test_max_message_length_is_512() -> None:
    assert MAX_MESSAGE_LENGTH == 512


@pytest.mark.parametrize(
    "code", [pytest.param(c, id=f"0x{c:02x}") for c in [*range(0x20), 0x7F]]
)
def test_every_c0_control_and_del_is_unsafe(code: int) -> None:
    assert is_safe_message(f"a{chr(code)}b") is False


@pytest.mark.parametrize("prefix", ["(", '"', "'", " ", ""])
@pytest.mark.parametrize(
    "path",
    [
        pytest.param("/etc/x", id="posix"),
        pytest.param("C:\\x", id="drive-backslash"),
        pytest.param("C:/x", id="drive-slash"),
        pytest.param("\\\\host\\share", id="unc"),
    ],
)
def test_paths_after_every_opening_character(prefix: str, path: str) -> None:
    assert is_safe_message(f"bad {prefix}{path}") is False
    assert is_safe_message(f"bad{prefix}{path}") is (prefix == "")


@pytest.mark.parametrize(
    "extension",
    ["js", "ts", "jsx", "tsx", "mjs", "cjs", "mts", "cts", "mjsx", "ctsx"],
)
def test_every_js_extension_is_a_frame(extension: str) -> None:
    assert is_safe_message(f"at f (m.{extension}:1:2)") is False
    assert is_safe_message(f"at m.{extension}:7") is False
    assert is_safe_message(f"at m.{extension}") is True


def test_a_lone_surrogate_makes_a_message_unsafe() -> None:
    # It could not be encoded as UTF-8, so an error reply carrying it could not be sent.
    assert not is_safe_message("bad \ud800 value")
    assert is_safe_message("fine \U0001f600 value")
