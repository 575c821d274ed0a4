"""Tracing's configuration (`tracing:`), the provider it builds from the OTEL_* variables, and a start
without the `otel` extra. The spans themselves are tested on the bus (tests/bus/test_bus_tracing.py)."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from interaction_worker.config import TracingSettings, parse_settings
from interaction_worker.errors import ConfigurationError
from interaction_worker.tracing import MISSING_EXTRA, tracer_provider_from_environment

# What `import opentelemetry.sdk` and the exporter do when the extra is not installed (the API
# stays: the MCP SDK brings it).
WITHOUT_EXTRA = (
    "import sys\n"
    "sys.modules['opentelemetry.sdk'] = None\n"
    "sys.modules['opentelemetry.exporter'] = None\n"
    "from interaction_worker.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def problems_of(data: object) -> list[str]:
    with pytest.raises(ConfigurationError) as raised:
        parse_settings(data, base_dir=Path("/srv"))
    return str(raised.value).splitlines()


def test_tracing_is_off_unless_enabled() -> None:
    assert parse_settings(None, base_dir=Path("/srv")).tracing == TracingSettings(
        enabled=False
    )
    on = parse_settings({"tracing": {"enabled": True}}, base_dir=Path("/srv"))
    assert on.tracing == TracingSettings(enabled=True)
    assert on.effective()["tracing"] == {"enabled": True}
    again = parse_settings(
        yaml.safe_load(yaml.safe_dump(on.effective())), base_dir=Path("/srv")
    )
    assert again.tracing.enabled is True


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(
            {"tracing": {"enabled": "yes"}},
            "tracing.enabled must be true or false",
            id="not-a-boolean",
        ),
        pytest.param(
            {"tracing": {"exporter": "otlp"}},
            "unknown key: tracing.exporter",
            id="unknown-key",
        ),
    ],
)
def test_a_bad_tracing_block_is_named(data: object, message: str) -> None:
    assert problems_of(data) == [message]


@pytest.mark.parametrize(
    ("env", "service"),
    [
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "none"}, "billing-worker", id="nats-name"
        ),
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "none", "OTEL_SERVICE_NAME": "billing"},
            "billing",
            id="otel-service-name",
        ),
    ],
)
def test_the_service_is_named_by_otel_service_name_else_by_nats_name(
    env: dict[str, str], service: str
) -> None:
    provider = tracer_provider_from_environment(env, "billing-worker")
    try:
        assert provider.resource.attributes["service.name"] == service  # type: ignore[attr-defined]
    finally:
        provider.shutdown()


def test_the_console_exporter_prints_each_span(
    capsys: pytest.CaptureFixture[str],
) -> None:
    provider = tracer_provider_from_environment(
        {"OTEL_TRACES_EXPORTER": "console"}, "interaction-worker"
    )
    tracer = provider.get_tracer("test")
    tracer.start_span("interaction.tool.call lookup").end()  # type: ignore[attr-defined]
    provider.shutdown()  # exports the last batch

    assert '"name": "interaction.tool.call lookup"' in capsys.readouterr().out


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "zipkin"},
            "OTEL_TRACES_EXPORTER must be otlp, console or none "
            "(or a comma-separated list of them)",
            id="exporter",
        ),
        pytest.param(
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf: the otel extra exports "
            "OTLP over HTTP (to port 4318 by default)",
            id="protocol",
        ),
        pytest.param(
            {
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            },
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be http/protobuf: the otel extra "
            "exports OTLP over HTTP (to port 4318 by default)",
            id="traces-protocol-first",
        ),
    ],
)
def test_what_the_extra_cannot_export_is_a_configuration_error(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        tracer_provider_from_environment(env, "interaction-worker")
    assert str(raised.value) == message


def test_enabled_without_the_extra_stops_the_start_before_anything_runs(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    config = tmp_path / "worker.yaml"
    config.write_text(
        yaml.safe_dump({"tracing": {"enabled": True}, "data_dir": str(data_dir)})
    )

    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRA, "run", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )

    logged, *errors = done.stderr.splitlines()
    assert logged.endswith(
        f"INFO interaction_worker: configuration: {config} (--config)"
    )
    assert (done.returncode, errors) == (2, [f"interaction-worker: {MISSING_EXTRA}"])
    assert "pip install interaction-worker[otel]" in MISSING_EXTRA
    assert not data_dir.exists()  # the embedded server never started
