"""Who may use the gateway over HTTP: beyond loopback only with `--allow-remote`, TLS and the bearer
token of `<data_dir>/gateway-token`; a request without it is answered 401 with `WWW-Authenticate`."""

import os
import ssl
import stat
from pathlib import Path

import httpx
import httpx2
import mcp_types as types
import pytest
import trustme
from gateway_harness import fleet, gateway, serving
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from interaction_worker.cli import main
from interaction_worker.gateway import (
    HttpOptions,
    gateway_token,
    gateway_token_path,
    transport_security,
)
from interaction_worker.testing.served import ServeWorker


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls(ca: trustme.CA, tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    leaf.private_key_pem.write_to_path(str(key))
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    for pem in leaf.cert_chain_pems[1:]:
        with cert.open("ab") as chain:
            chain.write(pem.bytes())
    return cert, key


async def test_with_a_token_every_request_needs_it_over_tls(
    serve_worker: ServeWorker, ca: trustme.CA, tls: tuple[Path, Path], tmp_path: Path
) -> None:
    served = await serve_worker(fleet().worker)
    token, _ = gateway_token(tmp_path / "data")
    options = HttpOptions(token=token, tls_cert=tls[0], tls_key=tls[1])
    trusted = ssl.create_default_context()
    ca.configure_trust(trusted)
    async with serving(
        gateway(served.nats_url, served.prefix, tmp_path), options
    ) as url:
        assert url.startswith("https://127.0.0.1:") and url.endswith("/mcp")
        async with httpx.AsyncClient(verify=trusted) as http:
            bare = await http.post(url, json={})
            wrong = await http.post(
                url, json={}, headers={"Authorization": "Bearer not-the-token"}
            )
        assert bare.status_code == wrong.status_code == 401
        assert bare.headers["www-authenticate"] == 'Bearer realm="interaction-worker"'
        assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
        assert token not in bare.text + wrong.text

        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, verify=trusted) as http2,
            Client(
                streamable_http_client(url, http_client=http2), mode="legacy"
            ) as client,
        ):
            result = await client.call_tool("echo", {"text": "remote"})
        assert [b.text for b in result.content if isinstance(b, types.TextContent)] == [
            "remote"
        ]


def test_the_token_file_is_private_and_kept(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    token, path = gateway_token(data_dir)
    assert path == gateway_token_path(data_dir) == data_dir / "gateway-token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert gateway_token(data_dir) == (token, path)
    assert len(token) >= 32


def test_loopback_allows_the_loopback_names_with_any_port() -> None:
    settings = transport_security("127.0.0.1", remote=False)
    assert settings.enable_dns_rebinding_protection
    assert {"localhost:*", "127.0.0.1:*", "[::1]:*", "localhost"} <= set(
        settings.allowed_hosts
    )
    assert "http://localhost:*" in settings.allowed_origins
    assert "https://[::1]:*" in settings.allowed_origins
    # Another loopback address the gateway listens on is allowed too.
    assert "127.0.0.2:*" in transport_security("127.0.0.2", remote=False).allowed_hosts
    # Beyond loopback the token is the check, as for the console.
    remote = transport_security("0.0.0.0", remote=True)
    assert not remote.enable_dns_rebinding_protection


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["--http", "0.0.0.0:0"],
            "--http 0.0.0.0: a non-loopback address offers the fleet's tools to the network",
        ),
        (
            ["--http", "0.0.0.0:0", "--allow-remote"],
            "--allow-remote needs --tls-cert and --tls-key",
        ),
        (["--allow-remote"], "--allow-remote, --tls-cert and --tls-key go with --http"),
        (
            ["--http", "127.0.0.1:0", "--tls-cert", "c.pem"],
            "--tls-cert and --tls-key go together",
        ),
        (
            ["--http", "127.0.0.1:0", "--tls-cert", "c.pem", "--tls-key", "k.pem"],
            "--tls-cert c.pem --tls-key k.pem: cannot load them",
        ),
    ],
)
def test_unsafe_or_incomplete_http_options_are_bad_usage(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    previous = Path.cwd()
    os.chdir(tmp_path)
    try:
        code = main(["mcp-serve", *argv, "--data-dir", str(tmp_path / "data")])
    finally:
        os.chdir(previous)
    captured = capsys.readouterr()
    assert code == 2
    (line,) = captured.err.splitlines()
    assert line.startswith(f"interaction-worker: {says}")
    assert captured.out == ""
    assert not (tmp_path / "data" / "gateway-token").exists()
