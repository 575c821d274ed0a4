"""OpenTelemetry tracing of the request path (docs/tracing.md): the `otel` extra.

This module imports nothing of OpenTelemetry, so the worker and the service can name its protocols
and call its loaders whether or not the extra is installed; a worker that traces imports the
packages then (`_spans` on the API, `_provider` on the SDK and its exporter). A worker that does not
trace runs none of this: its handler, nodes and publish are the untraced ones, not wrappers that
check a flag on every message.
"""

from collections.abc import Mapping
from typing import Any, Protocol

from ..errors import ConfigurationError
from ..subscribers import MessageHandler, Nodes
from ..subscribers.dispatcher import Publisher

MISSING_EXTRA = (
    "tracing.enabled: the OpenTelemetry packages are not installed: "
    "pip install interaction-worker[otel]"
)

__all__ = [
    "MISSING_EXTRA",
    "ClosingTracerProvider",
    "RequestTracing",
    "TracerProvider",
    "request_tracing",
    "tracer_provider_from_environment",
]


class TracerProvider(Protocol):
    """An OpenTelemetry `TracerProvider` (the SDK's, or one a test builds around an in-memory
    exporter), as far as the worker uses one: a protocol, so that naming it imports nothing."""

    def get_tracer(self, instrumenting_module_name: str) -> object: ...


class ClosingTracerProvider(TracerProvider, Protocol):
    """A provider the worker built, and so shuts down: its last spans are exported then."""

    def shutdown(self) -> None: ...


class RequestTracing(Protocol):
    """Spans around one binding's requests: a handler that opens a request's span, and a publish
    that sends its messages under it and then ends it."""

    def handler(self, nodes: Nodes, **options: Any) -> MessageHandler:
        """A `MessageHandler` of `nodes` (the options are `MessageHandler`'s) that traces."""
        ...

    def traced(self, publish: Publisher) -> Publisher:
        """`publish`, with a PRODUCER span per message and that span's context on events."""
        ...


def request_tracing(provider: TracerProvider) -> RequestTracing:
    """The spans of a worker traced with `provider`.

    Raises:
        TypeError: `provider` is not an OpenTelemetry TracerProvider.
    """
    from ._spans import Spans

    return Spans(provider)


def tracer_provider_from_environment(
    env: Mapping[str, str], service_name: str
) -> ClosingTracerProvider:
    """The SDK's provider as `tracing.enabled` builds it: exporters as OTEL_TRACES_EXPORTER says (OTLP
    over HTTP by default), the service named by OTEL_SERVICE_NAME, else `service_name`.

    Raises:
        ConfigurationError: the `otel` extra is not installed (`MISSING_EXTRA`), or an OTEL_*
            variable asks for what it cannot do.
    """
    try:
        from ._provider import environment_provider
    except ImportError as error:
        if not (error.name or "").startswith("opentelemetry"):
            raise
        raise ConfigurationError(MISSING_EXTRA) from None
    return environment_provider(env, service_name)
