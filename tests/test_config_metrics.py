"""`metrics.listen` (docs/configuration.md) and `run --metrics-listen` (docs/cli.md): the addresses
each accepts, the one line naming the key for one it refuses, and the flag winning over the file; and
the `console:` section's address and history."""

from pathlib import Path

import pytest

from interaction_worker.app import serve_options
from interaction_worker.cli.main import main
from interaction_worker.config import ConsoleSettings, MetricsSettings, parse_settings
from interaction_worker.errors import ConfigurationError

RULE = "must be HOST:PORT such as 127.0.0.1:9464 (port 0: any free port), or null"


@pytest.mark.parametrize(
    "listen",
    ["127.0.0.1:9464", "0.0.0.0:0", "localhost:65535", "[::1]:9464", None],
)
def test_metrics_listen_takes_host_and_port_or_null(listen: str | None) -> None:
    settings = parse_settings({"metrics": {"listen": listen}}, base_dir=Path("."))

    assert settings.metrics == MetricsSettings(listen=listen)
    assert serve_options(settings, {}).metrics_listen == listen
    assert settings.effective()["metrics"] == {"listen": listen}


def test_metrics_are_off_by_default() -> None:
    assert parse_settings(None, base_dir=Path(".")).metrics.listen is None


@pytest.mark.parametrize(
    "listen",
    [
        pytest.param(9464, id="a-number"),
        pytest.param(":9464", id="no-host"),
        pytest.param("127.0.0.1", id="no-port"),
        pytest.param("127.0.0.1:65536", id="port-too-large"),
        pytest.param("http://127.0.0.1:9464", id="a-url"),
        pytest.param("::1:9464", id="ipv6-without-brackets"),
    ],
)
def test_a_listen_address_that_is_not_host_and_port_is_named(listen: object) -> None:
    with pytest.raises(ConfigurationError) as refused:
        parse_settings({"metrics": {"listen": listen}}, base_dir=Path("."))

    assert str(refused.value) == f"metrics.listen {RULE}"


def test_run_refuses_a_metrics_listen_flag_that_is_not_host_and_port(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as usage:
        main(["run", "--metrics-listen", "9464"])

    assert usage.value.code == 2
    assert "--metrics-listen: must be HOST:PORT" in capsys.readouterr().err


def test_the_console_section_sets_the_pages_address_and_history() -> None:
    settings = parse_settings(
        {"console": {"listen": "0.0.0.0:9000", "history": 50}}, base_dir=Path(".")
    )

    assert settings.console == ConsoleSettings(listen="0.0.0.0:9000", history=50)
    assert settings.effective()["console"] == {"listen": "0.0.0.0:9000", "history": 50}
    assert parse_settings(None, base_dir=Path(".")).console == ConsoleSettings(
        listen="127.0.0.1:8765", history=200
    )


@pytest.mark.parametrize(
    ("console", "problem"),
    [
        ({"listen": "8765"}, "console.listen must be HOST:PORT"),
        ({"history": 0}, "console.history must be an integer from 1 to 100000"),
        ({"size": 3}, "console.size"),
    ],
)
def test_a_bad_console_section_is_refused_naming_the_key(
    console: dict[str, object], problem: str
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        parse_settings({"console": console}, base_dir=Path("."))

    assert problem in str(refused.value)
