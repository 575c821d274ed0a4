"""`nats.websocket` and the browsers' rights (docs/configuration.md 3, "The embedded server"): the
address it takes, the certificate from INTERACTION_NATS_WS_CERT / _KEY, what the `ui` user may read
derived from the sinks, and `run` refusing a listener beyond loopback without `--allow-remote` and a
certificate, before anything starts."""

from pathlib import Path

import pytest
import trustme

from interaction_worker.app import serve_options
from interaction_worker.cli.main import main
from interaction_worker.config import parse_settings, websocket_tls
from interaction_worker.embedded import BrowserAccess, WebSocketListener
from interaction_worker.errors import ConfigurationError

SINKS = [
    {"type": "console"},
    {"type": "nats", "name": "live", "subject": "deliveries.{key}"},
    {"type": "nats", "name": "per-user", "subject": "ui.user-{key}.messages"},
    {"type": "jetstream", "name": "stored", "subject": "stored.{key}", "stream": "S"},
    {"type": "jetstream", "name": "any", "subject": "other.out"},
    {"type": "file", "path": "deliveries.jsonl"},
]


def pem_pair(directory: Path) -> tuple[Path, Path]:
    leaf = trustme.CA().issue_cert("127.0.0.1")
    cert, key = directory / "ws.pem", directory / "ws.key"
    cert.write_bytes(b"".join(pem.bytes() for pem in leaf.cert_chain_pems))
    leaf.private_key_pem.write_to_path(str(key))
    return cert, key


def test_the_listener_is_the_embedded_servers_only_and_takes_the_certificate(
    tmp_path: Path,
) -> None:
    settings = parse_settings(
        {"nats": {"websocket": "0.0.0.0:8443"}}, base_dir=tmp_path
    )
    assert settings.nats.websocket == "0.0.0.0:8443"
    assert settings.effective()["nats"]["websocket"] == "0.0.0.0:8443"
    assert serve_options(settings, {}).websocket == WebSocketListener("0.0.0.0", 8443)
    cert, key = pem_pair(tmp_path)
    env = {"INTERACTION_NATS_WS_CERT": str(cert), "INTERACTION_NATS_WS_KEY": str(key)}
    assert serve_options(settings, env).websocket == WebSocketListener(
        "0.0.0.0", 8443, cert=cert, key=key
    )
    with_url = parse_settings(
        {"nats": {"url": "nats://n:4222", "websocket": "0.0.0.0:8443"}},
        base_dir=tmp_path,
    )
    assert serve_options(with_url, env).websocket is None
    assert parse_settings(None, base_dir=tmp_path).nats.websocket is None


def test_a_websocket_address_that_is_not_host_and_port_is_named() -> None:
    with pytest.raises(ConfigurationError) as refused:
        parse_settings({"nats": {"websocket": "8443"}}, base_dir=Path("."))
    assert str(refused.value) == (
        "nats.websocket must be HOST:PORT such as 127.0.0.1:9464 (port 0: any free port), or null"
    )


def test_the_browsers_read_the_nats_and_jetstream_sinks_deliveries_only() -> None:
    settings = parse_settings({"output": {"sinks": SINKS}}, base_dir=Path("."))
    assert serve_options(settings, {}).browsers == BrowserAccess(
        subjects=("deliveries.*", "ui.*.messages", "stored.*", "other.out"),
        streams=("S",),
    )
    assert (
        serve_options(parse_settings(None, base_dir=Path(".")), {}).browsers
        == BrowserAccess()
    )


def test_the_certificate_variables_are_checked_as_a_pair(tmp_path: Path) -> None:
    cert, key = pem_pair(tmp_path)
    (tmp_path / "other").mkdir()
    other_cert, _ = pem_pair(tmp_path / "other")
    assert websocket_tls({}) is None
    assert websocket_tls(
        {"INTERACTION_NATS_WS_CERT": str(cert), "INTERACTION_NATS_WS_KEY": str(key)}
    ) == (cert, key)
    cases = {
        "INTERACTION_NATS_WS_CERT is set without INTERACTION_NATS_WS_KEY": {
            "INTERACTION_NATS_WS_CERT": str(cert)
        },
        "INTERACTION_NATS_WS_KEY cannot be read: No such file or directory": {
            "INTERACTION_NATS_WS_CERT": str(cert),
            "INTERACTION_NATS_WS_KEY": str(tmp_path / "missing.key"),
        },
        "INTERACTION_NATS_WS_CERT and INTERACTION_NATS_WS_KEY must name a PEM certificate "
        "and its key": {
            "INTERACTION_NATS_WS_CERT": str(other_cert),
            "INTERACTION_NATS_WS_KEY": str(key),
        },
    }
    for message, env in cases.items():
        with pytest.raises(ConfigurationError) as refused:
            websocket_tls(env)
        assert str(refused.value) == message


@pytest.mark.parametrize(
    ("flags", "needs"),
    [
        ([], "add --allow-remote"),
        (["--allow-remote"], "needs TLS: set INTERACTION_NATS_WS_CERT and"),
    ],
)
def test_run_refuses_a_listener_beyond_loopback_before_starting(
    flags: list[str],
    needs: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("INTERACTION_NATS_WS_CERT", "INTERACTION_NATS_WS_KEY"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "worker.yaml"
    config.write_text("nats:\n  websocket: 0.0.0.0:8443\n", encoding="utf-8")
    code = main(["run", "--config", str(config), *flags])
    assert code == 2
    assert needs in capsys.readouterr().err
    assert not (tmp_path / ".interaction").exists()  # nothing started
