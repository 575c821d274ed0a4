"""Credentials and TLS from the environment, against real nats-servers of each kind."""

import base64
import hashlib
import json
import os
import ssl
import time
from pathlib import Path
from typing import Any

import anyio
import nats.errors
import nkeys  # type: ignore[import-untyped]
import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from nats.aio.client import Client
from nats.aio.msg import Msg

from interaction_worker.config import nats_connect_options
from interaction_worker.errors import ConfigurationError
from interaction_worker.testing import NatsServerFactory

# Bounds that hold on a loaded 2-core CI machine; a refused connect must end well before.
CONNECT_BOUND = 15
# What a refused connect may raise: the server's -ERR, a TLS failure, a timeout.
REFUSED = (nats.errors.Error, OSError, TimeoutError)


class Connection:
    """A client plus the errors nats-py reported through error_cb."""

    def __init__(self) -> None:
        self.client = Client()
        self.errors: list[Exception] = []

    async def on_error(self, error: Exception) -> None:
        self.errors.append(error)

    def refused_for_authorization(self) -> bool:
        return any("authorization violation" in str(e).lower() for e in self.errors)


async def _connect_once(conn: Connection, url: str, env: dict[str, str]) -> None:
    await conn.client.connect(
        url,
        **nats_connect_options(env),
        error_cb=conn.on_error,
        max_reconnect_attempts=1,
        reconnect_time_wait=0,
        connect_timeout=2,
        allow_reconnect=False,
    )


async def _close_refused(conn: Connection) -> None:
    # nats-py leaves a refused connect's socket open (a ResourceWarning at GC time), and its
    # close() never returns after a failed TLS handshake (nats-io/nats.py#718): bound it.
    with anyio.move_on_after(2):
        await conn.client.close()


async def connect(url: str, env: dict[str, str]) -> Connection:
    """Connect once, without retries, with the options the environment gives."""
    conn = Connection()
    with anyio.fail_after(CONNECT_BOUND):
        try:
            await _connect_once(conn, url, env)
        except BaseException:
            await _close_refused(conn)
            raise
    return conn


async def refused(url: str, env: dict[str, str]) -> Connection:
    """Assert that the connection is refused, quickly; return it to inspect its errors."""
    conn = Connection()
    # fail_after outside pytest.raises: a hang fails the test instead of passing as a refusal.
    with anyio.fail_after(CONNECT_BOUND):
        with pytest.raises(REFUSED):
            await _connect_once(conn, url, env)
        await _close_refused(conn)
    return conn


async def assert_round_trip(conn: Connection) -> None:
    nc = conn.client

    async def echo(msg: Msg) -> None:
        await msg.respond(b"echo:" + msg.data)

    try:
        with anyio.fail_after(CONNECT_BOUND):
            await nc.subscribe("auth.echo", cb=echo)
            reply = await nc.request("auth.echo", b"ping", timeout=5)
        assert reply.data == b"echo:ping"
    finally:
        await nc.close()


# --------------------------------------------------------------------------- nkeys and JWTs


def new_keypair(prefix: int) -> tuple[Any, str, str]:
    """A fresh nkey: (key pair, seed, public key)."""
    seed = nkeys.encode_seed(os.urandom(32), prefix)
    pair = nkeys.from_seed(bytearray(seed))
    return pair, seed.decode(), pair.public_key.decode()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def mint_jwt(issuer: Any, subject: str, name: str, claims: dict[str, Any]) -> str:
    """A NATS JWT: base64url JSON header and claims, signed with the issuer's ed25519 nkey."""
    body: dict[str, Any] = {
        "iat": int(time.time()),
        "iss": issuer.public_key.decode(),
        "name": name,
        "sub": subject,
        "nats": {**claims, "version": 2},
    }
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()
    body["jti"] = base64.b32encode(digest).decode().rstrip("=")
    header = {"typ": "JWT", "alg": "ed25519-nkey"}
    signing_input = (
        f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(body).encode())}"
    )
    signature: bytes = issuer.sign(signing_input.encode())
    return f"{signing_input}.{_b64url(signature)}"


UNLIMITED = {"subs": -1, "data": -1, "payload": -1}


class Operator:
    """An operator, one account it signed and a system account, for a server in operator mode.

    The fixture's servers run JetStream, which in operator mode needs the system account.
    """

    def __init__(self) -> None:
        self.key, _, self.public = new_keypair(nkeys.PREFIX_BYTE_OPERATOR)
        self.jwt = mint_jwt(
            self.key, self.public, "test-operator", {"type": "operator"}
        )
        self.account, _, self.account_public = new_keypair(nkeys.PREFIX_BYTE_ACCOUNT)
        account_limits = {
            **UNLIMITED,
            "imports": -1,
            "exports": -1,
            "wildcards": True,
            "conn": -1,
            "leaf": -1,
        }
        self.account_jwt = mint_jwt(
            self.key,
            self.account_public,
            "test-account",
            {"type": "account", "limits": account_limits},
        )

        _, _, self.system_public = new_keypair(nkeys.PREFIX_BYTE_ACCOUNT)
        self.system_jwt = mint_jwt(
            self.key,
            self.system_public,
            "SYS",
            {"type": "account", "limits": account_limits},
        )

    def server_config(self) -> str:
        return (
            f'operator: "{self.jwt}"\n'
            f"system_account: {self.system_public}\n"
            "resolver: MEMORY\n"
            "resolver_preload: {\n"
            f'  {self.account_public}: "{self.account_jwt}"\n'
            f'  {self.system_public}: "{self.system_jwt}"\n'
            "}\n"
        )

    def creds_file(self, path: Path, *, signer: Any = None) -> Path:
        """A user of the account (or of `signer`, an account the server does not know)."""
        _, seed, public = new_keypair(nkeys.PREFIX_BYTE_USER)
        user_jwt = mint_jwt(
            signer or self.account,
            public,
            "test-user",
            {"type": "user", "pub": {}, "sub": {}, **UNLIMITED},
        )
        path.write_text(
            "-----BEGIN NATS USER JWT-----\n"
            f"{user_jwt}\n"
            "------END NATS USER JWT------\n\n"
            "************************* IMPORTANT *************************\n"
            "NKEY Seed printed below can be used to sign and prove identity.\n\n"
            "-----BEGIN USER NKEY SEED-----\n"
            f"{seed}\n"
            "------END USER NKEY SEED------\n"
        )
        return path


# --------------------------------------------------------------------------- TLS material


class Tls:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files."""

    def __init__(self, directory: Path) -> None:
        self.ca = trustme.CA()
        self.ca_file = directory / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        server = self.ca.issue_cert("127.0.0.1", "localhost")
        self.server_cert, self.server_key = (
            directory / "server.pem",
            directory / "server.key",
        )
        self.write_leaf(server, self.server_cert, self.server_key)
        client = self.ca.issue_cert("client.example")
        self.client_cert, self.client_key = (
            directory / "client.pem",
            directory / "client.key",
        )
        self.write_leaf(client, self.client_cert, self.client_key)

    @staticmethod
    def write_leaf(leaf: trustme.LeafCert, cert: Path, key: Path) -> None:
        cert.write_bytes(b"".join(pem.bytes() for pem in leaf.cert_chain_pems))
        leaf.private_key_pem.write_to_path(str(key))

    def server_args(self, *, verify_clients: bool = False) -> tuple[str, ...]:
        args = (
            "--tls",
            "--tlscert",
            str(self.server_cert),
            "--tlskey",
            str(self.server_key),
        )
        if not verify_clients:
            return args
        return (*args, "--tlsverify", "--tlscacert", str(self.ca_file))


# --------------------------------------------------------------------------- each kind, for real


async def test_user_and_password_from_the_environment_are_accepted(
    nats_server_factory: NatsServerFactory,
) -> None:
    server = nats_server_factory("--user", "alice", "--pass", "s3cret")
    env = {"INTERACTION_NATS_USER": "alice", "INTERACTION_NATS_PASSWORD": "s3cret"}
    await assert_round_trip(await connect(server.url, env))


async def test_a_wrong_password_is_refused(
    nats_server_factory: NatsServerFactory,
) -> None:
    server = nats_server_factory("--user", "alice", "--pass", "s3cret")
    env = {"INTERACTION_NATS_USER": "alice", "INTERACTION_NATS_PASSWORD": "wrong"}
    conn = await refused(server.url, env)
    assert conn.refused_for_authorization()


async def test_a_token_from_the_environment_is_accepted(
    nats_server_factory: NatsServerFactory,
) -> None:
    server = nats_server_factory("--auth", "tok-123")
    await assert_round_trip(
        await connect(server.url, {"INTERACTION_NATS_TOKEN": "tok-123"})
    )


async def test_a_wrong_token_is_refused(nats_server_factory: NatsServerFactory) -> None:
    server = nats_server_factory("--auth", "tok-123")
    conn = await refused(server.url, {"INTERACTION_NATS_TOKEN": "tok-999"})
    assert conn.refused_for_authorization()


async def test_no_credentials_are_refused_by_a_server_that_needs_them(
    nats_server_factory: NatsServerFactory,
) -> None:
    server = nats_server_factory("--auth", "tok-123")
    conn = await refused(server.url, {})
    assert conn.refused_for_authorization()


async def test_an_nkey_seed_from_the_environment_is_accepted(
    nats_server_factory: NatsServerFactory, tmp_path: Path
) -> None:
    _, seed, public = new_keypair(nkeys.PREFIX_BYTE_USER)
    conf = tmp_path / "nkey.conf"
    conf.write_text(f'authorization {{ users: [ {{ nkey: "{public}" }} ] }}\n')
    server = nats_server_factory("-c", str(conf))
    env = {
        "INTERACTION_NATS_NKEY_SEED": seed + "\n"
    }  # as `$(cat user.nk)` or a file mount gives it
    await assert_round_trip(await connect(server.url, env))


async def test_an_unknown_nkey_is_refused(
    nats_server_factory: NatsServerFactory, tmp_path: Path
) -> None:
    _, _, public = new_keypair(nkeys.PREFIX_BYTE_USER)
    _, other_seed, _ = new_keypair(nkeys.PREFIX_BYTE_USER)
    conf = tmp_path / "nkey.conf"
    conf.write_text(f'authorization {{ users: [ {{ nkey: "{public}" }} ] }}\n')
    server = nats_server_factory("-c", str(conf))
    conn = await refused(server.url, {"INTERACTION_NATS_NKEY_SEED": other_seed})
    assert conn.refused_for_authorization()


async def test_a_creds_file_from_the_environment_is_accepted_in_operator_mode(
    nats_server_factory: NatsServerFactory, tmp_path: Path
) -> None:
    operator = Operator()
    conf = tmp_path / "operator.conf"
    conf.write_text(operator.server_config())
    server = nats_server_factory("-c", str(conf))
    creds = operator.creds_file(tmp_path / "user.creds")
    await assert_round_trip(
        await connect(server.url, {"INTERACTION_NATS_CREDS": str(creds)})
    )


async def test_a_creds_file_signed_by_an_unknown_account_is_refused(
    nats_server_factory: NatsServerFactory, tmp_path: Path
) -> None:
    operator = Operator()
    conf = tmp_path / "operator.conf"
    conf.write_text(operator.server_config())
    server = nats_server_factory("-c", str(conf))
    stranger, _, _ = new_keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    creds = operator.creds_file(tmp_path / "user.creds", signer=stranger)
    conn = await refused(server.url, {"INTERACTION_NATS_CREDS": str(creds)})
    assert conn.refused_for_authorization()


@pytest.mark.parametrize("scheme", ["nats", "tls"])
async def test_a_tls_ca_from_the_environment_verifies_the_server(
    nats_server_factory: NatsServerFactory, tmp_path: Path, scheme: str
) -> None:
    tls = Tls(tmp_path)
    server = nats_server_factory(*tls.server_args())
    url = server.url.replace("nats://", f"{scheme}://")
    conn = await connect(url, {"INTERACTION_NATS_TLS_CA": str(tls.ca_file)})
    assert conn.client.ssl_context is not None
    await assert_round_trip(conn)


async def test_a_server_certificate_from_another_ca_is_refused(
    nats_server_factory: NatsServerFactory, tmp_path: Path
) -> None:
    tls = Tls(tmp_path)
    server = nats_server_factory(*tls.server_args())
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    conn = await refused(server.url, {"INTERACTION_NATS_TLS_CA": str(other)})
    assert any(isinstance(e, ssl.SSLCertVerificationError) for e in conn.errors)


async def test_a_client_certificate_combines_with_a_token(
    nats_server_factory: NatsServerFactory, tmp_path: Path
) -> None:
    tls = Tls(tmp_path)
    server = nats_server_factory(
        *tls.server_args(verify_clients=True), "--auth", "tok-1"
    )
    env = {
        "INTERACTION_NATS_TLS_CA": str(tls.ca_file),
        "INTERACTION_NATS_TLS_CERT": str(tls.client_cert),
        "INTERACTION_NATS_TLS_KEY": str(tls.client_key),
        "INTERACTION_NATS_TOKEN": "tok-1",
    }
    await assert_round_trip(await connect(server.url, env))


async def test_a_server_that_verifies_clients_refuses_one_without_a_certificate(
    nats_server_factory: NatsServerFactory, tmp_path: Path
) -> None:
    tls = Tls(tmp_path)
    server = nats_server_factory(*tls.server_args(verify_clients=True))
    await refused(server.url, {"INTERACTION_NATS_TLS_CA": str(tls.ca_file)})


# --------------------------------------------------------------------------- the options alone


def test_no_variables_mean_no_options() -> None:
    assert nats_connect_options({}) == {}
    assert nats_connect_options({"INTERACTION_NATS_TOKEN": "", "PATH": "/bin"}) == {}


def test_each_kind_becomes_its_nats_connect_option(tmp_path: Path) -> None:
    _, seed, _ = new_keypair(nkeys.PREFIX_BYTE_USER)
    creds = Operator().creds_file(tmp_path / "u.creds")
    assert nats_connect_options({"INTERACTION_NATS_TOKEN": "t"}) == {"token": "t"}
    assert nats_connect_options(
        {"INTERACTION_NATS_USER": "u", "INTERACTION_NATS_PASSWORD": "p"}
    ) == {"user": "u", "password": "p"}
    assert nats_connect_options({"INTERACTION_NATS_NKEY_SEED": f" {seed}\n"}) == {
        "nkeys_seed_str": seed
    }
    assert nats_connect_options({"INTERACTION_NATS_CREDS": str(creds)}) == {
        "user_credentials": str(creds)
    }


SECRET = "very-secret-value"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param(
            {"INTERACTION_NATS_TOKEN": SECRET, "INTERACTION_NATS_PASSWORD": SECRET},
            "several kinds of NATS credentials are set"
            " (INTERACTION_NATS_PASSWORD, INTERACTION_NATS_TOKEN): set only one",
            id="token-and-password",
        ),
        pytest.param(
            {
                "INTERACTION_NATS_CREDS": SECRET,
                "INTERACTION_NATS_NKEY_SEED": SECRET,
                "INTERACTION_NATS_USER": SECRET,
                "INTERACTION_NATS_PASSWORD": SECRET,
                "INTERACTION_NATS_TOKEN": SECRET,
            },
            "several kinds of NATS credentials are set (INTERACTION_NATS_CREDS,"
            " INTERACTION_NATS_NKEY_SEED, INTERACTION_NATS_USER, INTERACTION_NATS_PASSWORD,"
            " INTERACTION_NATS_TOKEN): set only one",
            id="all-kinds",
        ),
        pytest.param(
            {"INTERACTION_NATS_USER": "alice"},
            "INTERACTION_NATS_USER is set without INTERACTION_NATS_PASSWORD",
            id="user-without-password",
        ),
        pytest.param(
            {"INTERACTION_NATS_PASSWORD": SECRET},
            "INTERACTION_NATS_PASSWORD is set without INTERACTION_NATS_USER",
            id="password-without-user",
        ),
        pytest.param(
            {"INTERACTION_NATS_NKEY_SEED": SECRET},
            "INTERACTION_NATS_NKEY_SEED must be a user nkey seed (it starts with SU)",
            id="seed-garbage",
        ),
        pytest.param(
            {"INTERACTION_NATS_NKEY_SEED": "SU" + SECRET.upper()},
            "INTERACTION_NATS_NKEY_SEED must be a user nkey seed (it starts with SU)",
            id="seed-bad-encoding",
        ),
        pytest.param(
            {"INTERACTION_NATS_TLS_CERT": "/nowhere/client.pem"},
            "INTERACTION_NATS_TLS_CERT is set without INTERACTION_NATS_TLS_KEY",
            id="cert-without-key",
        ),
        pytest.param(
            {"INTERACTION_NATS_TLS_KEY": "/nowhere/client.key"},
            "INTERACTION_NATS_TLS_KEY is set without INTERACTION_NATS_TLS_CERT",
            id="key-without-cert",
        ),
        pytest.param(
            {"INTERACTION_NATS_TLS_CA": "/nowhere/ca.pem"},
            "INTERACTION_NATS_TLS_CA cannot be read: No such file or directory",
            id="ca-missing",
        ),
        pytest.param(
            {"INTERACTION_NATS_CREDS": "/nowhere/user.creds"},
            "INTERACTION_NATS_CREDS cannot be read: No such file or directory",
            id="creds-missing",
        ),
    ],
)
def test_bad_credential_variables_are_named_without_their_values(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        nats_connect_options(env)
    assert str(caught.value) == message
    assert SECRET not in str(caught.value) and SECRET.upper() not in str(caught.value)


def test_the_seed_of_another_kind_of_key_is_refused() -> None:
    _, account_seed, _ = new_keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    with pytest.raises(ConfigurationError) as caught:
        nats_connect_options({"INTERACTION_NATS_NKEY_SEED": account_seed})
    assert account_seed not in str(caught.value)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("", id="empty"),
        pytest.param("just some text\n", id="no-markers"),
        pytest.param("-----BEGIN NATS USER JWT-----\neyJ.x.y\n", id="no-seed"),
    ],
)
def test_a_file_that_is_not_a_creds_file_is_refused_before_nats_py_reads_it_forever(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "user.creds"
    path.write_text(content)
    with pytest.raises(ConfigurationError) as caught:
        nats_connect_options({"INTERACTION_NATS_CREDS": str(path)})
    assert str(caught.value) == (
        "INTERACTION_NATS_CREDS must name a NATS credentials file (a user JWT and its nkey seed)"
    )


def test_a_creds_file_with_windows_line_endings_is_refused(tmp_path: Path) -> None:
    good = Operator().creds_file(tmp_path / "user.creds")
    crlf = tmp_path / "crlf.creds"
    crlf.write_bytes(good.read_bytes().replace(b"\n", b"\r\n"))
    with pytest.raises(ConfigurationError) as caught:
        nats_connect_options({"INTERACTION_NATS_CREDS": str(crlf)})
    assert str(caught.value) == (
        "INTERACTION_NATS_CREDS must name a credentials file with Unix line endings"
    )


def test_tls_variables_build_a_verifying_context(tmp_path: Path) -> None:
    tls = Tls(tmp_path)
    options = nats_connect_options({"INTERACTION_NATS_TLS_CA": str(tls.ca_file)})
    context = options["tls"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    with_cert = nats_connect_options(
        {
            "INTERACTION_NATS_TLS_CERT": str(tls.client_cert),
            "INTERACTION_NATS_TLS_KEY": str(tls.client_key),
            "INTERACTION_NATS_USER": "u",
            "INTERACTION_NATS_PASSWORD": "p",
        }
    )
    assert set(with_cert) == {"tls", "user", "password"}


def test_a_ca_file_that_is_not_pem_is_named(tmp_path: Path) -> None:
    bogus = tmp_path / "ca.pem"
    bogus.write_text("not a certificate\n")
    with pytest.raises(ConfigurationError) as caught:
        nats_connect_options({"INTERACTION_NATS_TLS_CA": str(bogus)})
    assert str(caught.value) == "INTERACTION_NATS_TLS_CA must name PEM CA certificates"


def test_a_key_that_does_not_match_the_certificate_is_named(tmp_path: Path) -> None:
    tls = Tls(tmp_path)
    with pytest.raises(ConfigurationError) as caught:
        nats_connect_options(
            {
                "INTERACTION_NATS_TLS_CERT": str(tls.client_cert),
                "INTERACTION_NATS_TLS_KEY": str(tls.server_key),
            }
        )
    assert str(caught.value) == (
        "INTERACTION_NATS_TLS_CERT and INTERACTION_NATS_TLS_KEY"
        " must name a PEM certificate and its key"
    )


def test_an_encrypted_key_is_refused_instead_of_prompting_for_its_password(
    tmp_path: Path,
) -> None:
    tls = Tls(tmp_path)
    key = ec.generate_private_key(ec.SECP256R1())
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pass-phrase"),
        )
    )
    with pytest.raises(ConfigurationError) as caught:
        nats_connect_options(
            {
                "INTERACTION_NATS_TLS_CERT": str(tls.client_cert),
                "INTERACTION_NATS_TLS_KEY": str(encrypted),
            }
        )
    assert str(caught.value) == (
        "INTERACTION_NATS_TLS_KEY names an encrypted key; give an unencrypted one"
    )
