"""NATS credentials and TLS from the environment (docs/configuration.md 1), as `nats.connect` options.

Messages name the variables, never their values. Files are checked here, before connecting:
nats-py reads a creds file that lacks its JWT marker forever, and OpenSSL prompts on the terminal
for the password of an encrypted key.
"""

import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import nkeys  # type: ignore[import-untyped]

from ..errors import ConfigurationError
from .values import Problems

CREDS = "INTERACTION_NATS_CREDS"
NKEY_SEED = "INTERACTION_NATS_NKEY_SEED"
USER = "INTERACTION_NATS_USER"
PASSWORD = "INTERACTION_NATS_PASSWORD"
TOKEN = "INTERACTION_NATS_TOKEN"
TLS_CA = "INTERACTION_NATS_TLS_CA"
TLS_CERT = "INTERACTION_NATS_TLS_CERT"
TLS_KEY = "INTERACTION_NATS_TLS_KEY"
# The embedded server's WebSocket listener (docs/configuration.md 3): its own certificate, for browsers.
WS_CERT = "INTERACTION_NATS_WS_CERT"
WS_KEY = "INTERACTION_NATS_WS_KEY"

_KINDS: tuple[tuple[str, ...], ...] = (
    (CREDS,),
    (NKEY_SEED,),
    (USER, PASSWORD),
    (TOKEN,),
)


class _EncryptedKey(Exception):
    pass


def nats_connect_options(env: Mapping[str, str]) -> dict[str, Any]:
    """Keyword arguments for `nats.connect`: at most one kind of credentials, plus TLS.

    An empty variable counts as unset.

    Raises:
        ConfigurationError: several kinds set, a half pair, or an unreadable or invalid file or seed.
    """
    problems = Problems()
    values = {name: value for name, value in env.items() if value}
    given = [[n for n in kind if n in values] for kind in _KINDS]
    given = [names for names in given if names]
    options: dict[str, Any] = {}
    if len(given) > 1:
        names = ", ".join(n for names in given for n in names)
        problems.lines.append(
            f"several kinds of NATS credentials are set ({names}): set only one"
        )
    elif given:
        _credentials(given[0], values, options, problems)
    context = _tls(values, problems)
    if context is not None:
        options["tls"] = context
    problems.raise_if_any()
    return options


def credential_files(env: Mapping[str, str]) -> tuple[Path, ...]:
    """The files the environment names that hold a credential (a creds file, a TLS key, the
    WebSocket listener's key), which no tool may read (docs/tools.md); the CA and the certificates
    are public."""
    return tuple(Path(env[name]) for name in (CREDS, TLS_KEY, WS_KEY) if env.get(name))


def websocket_tls(env: Mapping[str, str]) -> tuple[Path, Path] | None:
    """The certificate and key of the embedded server's WebSocket listener, absolute, or None when
    neither variable is set.

    Raises:
        ConfigurationError: one set without the other, a file that cannot be read, not a PEM
            certificate and its unencrypted key.
    """
    problems = Problems()
    cert, key = env.get(WS_CERT) or None, env.get(WS_KEY) or None
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        given, missing = (WS_CERT, WS_KEY) if key is None else (WS_KEY, WS_CERT)
        raise ConfigurationError(f"{given} is set without {missing}")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_pair(server, (WS_CERT, cert), (WS_KEY, key), problems)
    problems.raise_if_any()
    return Path(cert).absolute(), Path(key).absolute()


def _load_pair(
    context: ssl.SSLContext,
    cert: tuple[str, str],
    key: tuple[str, str],
    problems: Problems,
) -> bool:
    """Load a certificate and its key, each given as (variable, path), into `context`; False, with
    the problems added, when they cannot be read or do not belong together. Checked here because
    OpenSSL would prompt on the terminal for the password of an encrypted key."""
    for name, path in (cert, key):
        try:
            Path(path).open("rb").close()
        except OSError as error:
            problems.add(name, _file_rule(error, "a PEM file"))
    if problems.lines:
        return False
    try:
        context.load_cert_chain(cert[1], key[1], password=_refuse_password)
    except _EncryptedKey:
        problems.add(key[0], "names an encrypted key; give an unencrypted one")
        return False
    except OSError as error:
        problems.lines.append(
            f"{cert[0]} and {key[0]} {_file_rule(error, 'a PEM certificate and its key')}"
        )
        return False
    return True


def _credentials(
    names: list[str],
    values: dict[str, str],
    options: dict[str, Any],
    problems: Problems,
) -> None:
    if names == [CREDS]:
        if _is_creds_file(values[CREDS], problems):
            options["user_credentials"] = values[CREDS]
    elif names == [NKEY_SEED]:
        seed = values[NKEY_SEED].strip()
        if _is_user_seed(seed):
            options["nkeys_seed_str"] = seed
        else:
            problems.add(NKEY_SEED, "must be a user nkey seed (it starts with SU)")
    elif names == [TOKEN]:
        options["token"] = values[TOKEN]
    elif len(names) == 2:
        options["user"], options["password"] = values[USER], values[PASSWORD]
    else:
        missing = PASSWORD if names == [USER] else USER
        problems.add(names[0], f"is set without {missing}")


def _is_user_seed(seed: str) -> bool:
    if not seed.startswith("SU"):
        return False
    try:
        pair = nkeys.from_seed(bytearray(seed.encode("ascii")))
        public: bytes = pair.public_key
    except (nkeys.NkeysError, UnicodeEncodeError, ValueError):
        return False
    return public.startswith(b"U")


def _is_creds_file(path: str, problems: Problems) -> bool:
    """True when `path` holds a user JWT and a user seed, each on the line after its marker."""
    try:
        lines = Path(path).read_bytes().split(b"\n")
    except OSError as error:
        problems.add(CREDS, f"cannot be read: {error.strerror}")
        return False
    found: dict[bytes, bytes] = {}
    for index, line in enumerate(lines[:-1]):
        for marker in (b"BEGIN NATS USER JWT", b"BEGIN USER NKEY SEED"):
            if marker in line and marker not in found:
                found[marker] = lines[index + 1]
    jwt = found.get(b"BEGIN NATS USER JWT", b"")
    seed = found.get(b"BEGIN USER NKEY SEED", b"")
    if not jwt.strip() or not seed.strip():
        problems.add(
            CREDS, "must name a NATS credentials file (a user JWT and its nkey seed)"
        )
        return False
    if jwt.endswith(b"\r") or seed.endswith(b"\r"):
        problems.add(CREDS, "must name a credentials file with Unix line endings")
        return False
    if not _is_user_seed(seed.decode("ascii", "replace").strip()):
        problems.add(
            CREDS, "must name a credentials file whose seed is a user nkey seed"
        )
        return False
    return True


def _tls(values: dict[str, str], problems: Problems) -> ssl.SSLContext | None:
    ca, cert, key = values.get(TLS_CA), values.get(TLS_CERT), values.get(TLS_KEY)
    if ca is None and cert is None and key is None:
        return None
    if (cert is None) != (key is None):
        problems.add(
            TLS_CERT if key is None else TLS_KEY,
            f"is set without {TLS_KEY if key is None else TLS_CERT}",
        )
        return None
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if ca is not None:
        try:
            context.load_verify_locations(cafile=ca)
        except OSError as error:  # ssl.SSLError is an OSError
            problems.add(TLS_CA, _file_rule(error, "PEM CA certificates"))
            return None
    if cert is not None and key is not None:
        if not _load_pair(context, (TLS_CERT, cert), (TLS_KEY, key), problems):
            return None
    return context


def _refuse_password() -> bytes:
    raise _EncryptedKey


def _file_rule(error: OSError, what: str) -> str:
    if isinstance(error, ssl.SSLError) or error.strerror is None:
        return f"must name {what}"
    return f"cannot be read: {error.strerror}"
