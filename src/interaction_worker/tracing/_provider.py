"""The TracerProvider that `tracing.enabled` builds: the SDK's, exporting as the standard `OTEL_*`
environment variables say.

Read here: OTEL_TRACES_EXPORTER (`otlp`, the default; `console`; `none`; or a comma-separated list),
OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL (`http/protobuf`, the only one the
extra installs) and OTEL_SERVICE_NAME. Our own small reading rather than the SDK's
autoconfiguration (`opentelemetry-distro`): that one would also install global providers for every
signal and choose the OTLP exporter by entry point, grpc by default, which the extra does not bring.
The rest the SDK reads from the process environment itself: the exporter's endpoint, headers,
timeout and compression (OTEL_EXPORTER_OTLP_*), the batch processor's limits (OTEL_BSP_*), the
sampler (OTEL_TRACES_SAMPLER), OTEL_RESOURCE_ATTRIBUTES and OTEL_SDK_DISABLED.
"""

import sys
from collections.abc import Mapping

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)

from ..errors import ConfigurationError

_PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


def environment_provider(env: Mapping[str, str], service_name: str) -> TracerProvider:
    """Raises:
    ConfigurationError: an exporter or protocol the extra does not provide; the message names the
        variable, never its value."""
    exporters = _exporters(env)
    resource = Resource.create(
        {SERVICE_NAME: env.get("OTEL_SERVICE_NAME") or service_name}
    )
    # Shut down by the service that built it, after its last request, not at interpreter exit.
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _exporters(env: Mapping[str, str]) -> list[SpanExporter]:
    names = [
        name.strip()
        for name in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",")
        if name.strip()
    ]
    exporters: list[SpanExporter] = []
    for name in names:
        if name == "otlp":
            exporters.append(_otlp(env))
        elif name == "console":
            # The stdout of now: the exporter's default is the one of its module's import.
            exporters.append(ConsoleSpanExporter(out=sys.stdout))
        elif name != "none":
            raise ConfigurationError(
                "OTEL_TRACES_EXPORTER must be otlp, console or none "
                "(or a comma-separated list of them)"
            )
    return exporters


def _otlp(env: Mapping[str, str]) -> SpanExporter:
    for variable in _PROTOCOLS:
        protocol = env.get(variable)
        if protocol:
            if protocol != "http/protobuf":
                raise ConfigurationError(
                    f"{variable} must be http/protobuf: the otel extra exports OTLP over HTTP "
                    "(to port 4318 by default)"
                )
            break
    return OTLPSpanExporter()
