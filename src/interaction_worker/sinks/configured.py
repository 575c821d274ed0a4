"""The sinks the file configures (`output:`, docs/configuration.md), joined with the sink given in
code: several become a fan-out under `output.policy`, a lone one is held to its `timeout`."""

import json

from ..config import Settings, SinkSettings
from ..errors import ConfigurationError, RegistrationError
from ..nodes import OutputSink
from ._lone import bounded
from ._sinks import sink_name
from .console import ConsoleSink
from .fanout import FanoutSink
from .file import FileSink
from .http import HttpSink
from .jetstream import JetStreamSink, StreamTemplate
from .nats import NatsSink

# What a later version builds; until then a file that asks for it is refused with a clear message.
_NOT_YET = "is not available in this version"


def configured_output(
    settings: Settings, code_sink: OutputSink | None, problems: list[str]
) -> OutputSink | None:
    """Several sinks (the code's and the file's) become a fan-out under `output.policy`; a lone
    sink is held to its `timeout` too (past it: `unknown` SINK_TIMEOUT), and its exceptions still
    propagate, to become an error reply and a dead letter."""
    configured = settings.output.sinks if settings.output.sinks_given else ()
    if code_sink is None and not settings.output.sinks_given:
        configured = settings.output.sinks  # the default console sink
    sinks: list[OutputSink] = [] if code_sink is None else [code_sink]
    code_name = None if code_sink is None else sink_name(code_sink, 0)
    for index, sink in enumerate(configured):
        if sink.name == code_name:
            name = json.dumps(sink.name, ensure_ascii=False)
            problems.append(
                f"output.sinks[{index}].name: {name} is also the name of the sink given in code"
            )
            continue
        built = _sink(sink, index, problems, _history_stream(settings))
        if built is not None:
            sinks.append(built)
    if not sinks:
        return None
    try:
        if len(sinks) > 1:
            return FanoutSink(sinks, policy=settings.output.policy)
        return bounded(sinks[0])
    except (ConfigurationError, RegistrationError) as error:
        problems.append(f"output: the sink given in code: {error}")
        return None


def _history_stream(settings: Settings) -> StreamTemplate:
    """How a `jetstream` sink's missing stream is created: kept as the events stream is."""
    durable = settings.durable
    return StreamTemplate(
        max_age=durable.events_max_age,
        replicas=durable.replicas,
        duplicate_window=durable.duplicate_window,
    )


def _sink(
    sink: SinkSettings, index: int, problems: list[str], history: StreamTemplate
) -> OutputSink | None:
    name, timeout = sink.name, sink.timeout
    try:
        if sink.type == "console":
            return ConsoleSink(name=name, timeout=timeout)
        if sink.type == "file" and sink.path is not None:
            return FileSink(sink.path, name=name, timeout=timeout)
        if sink.type == "nats" and sink.subject is not None:
            return NatsSink(sink.subject, name=name, timeout=timeout)
        if sink.type == "jetstream" and sink.subject is not None:
            return JetStreamSink(
                sink.subject,
                stream=sink.stream,
                name=name,
                timeout=timeout,
                create=history,
            )
        if sink.type == "http" and sink.url is not None:
            return HttpSink(sink.url, name=name, timeout=timeout)
    except ConfigurationError as error:
        problems.append(f"output.sinks[{index}].{error}")
        return None
    problems.append(f"output.sinks[{index}].type: the {sink.type} sink {_NOT_YET}")
    return None
