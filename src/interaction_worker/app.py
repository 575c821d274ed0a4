"""The served application: a worker assembled from the configuration file and the code.

Values given in code win over the file's (a Sandbox, a concurrency); tools, MCP clients and sinks
given in code are added to those the file configures, and a name given twice stops the start. The
defaults (read_text over the working directory, the console sink, the default sandbox) apply only
where neither the file nor the code provides tools, sinks or a sandbox (config.md section 2).
"""

from collections.abc import Mapping
from pathlib import Path

from .config import (
    DEFAULT_SANDBOX,
    SandboxSettings,
    Settings,
    SinkSettings,
    nats_connect_options,
)
from .errors import ConfigurationError, RegistrationError
from .nodes import OutputSink, Sandbox, ToolRegistry
from .service import ServeOptions
from .sinks import ConsoleSink, FileSink
from .tools import ReadTextTool
from .worker import InteractionWorker

# What a later version builds; until then a file that asks for it is refused with a clear message.
_NOT_YET = "is not available in this version"


def build_worker(
    settings: Settings, code: InteractionWorker | None = None
) -> InteractionWorker:
    """The worker `run` serves: the file's tools, sinks and sandbox joined with the code's."""
    problems: list[str] = []
    code = code or InteractionWorker()
    registry = code.tools
    _register_file_tools(
        settings, registry, code_has_tools=bool(registry.names()), problems=problems
    )
    if settings.mcp.servers:
        problems.append(f"mcp.servers: connecting MCP servers from the file {_NOT_YET}")
    output = _output(settings, code.output, problems)
    if problems:
        raise ConfigurationError("\n".join(problems))
    sandbox = (
        code.sandbox
        if code.sandbox_given
        else _sandbox(settings.sandbox, settings.workspace)
    )
    return InteractionWorker(
        tools=registry,
        mcp=code.mcp,
        output=output,
        sandbox=sandbox,
        concurrency=code.concurrency
        if code.concurrency is not None
        else settings.concurrency,
    )


def _register_file_tools(
    settings: Settings,
    registry: ToolRegistry,
    *,
    code_has_tools: bool,
    problems: list[str],
) -> None:
    tools = settings.tools
    if tools is None:
        if code_has_tools:
            return
        # The default tools: read_text now; the read-only commands join it when they are built.
        tools_to_add = [ReadTextTool()]
    else:
        if tools.commands is not None:
            problems.append(f"tools.commands: the read-only commands {_NOT_YET}")
        if tools.web_search is not None:
            problems.append(f"tools.web_search: web search {_NOT_YET}")
        tools_to_add = [ReadTextTool()] if tools.read_text else []
    for tool in tools_to_add:
        try:
            registry.register(tool)
        except RegistrationError:
            problems.append(
                f"tools.{tool.name}: the tool {tool.name} is also given in code"
            )


def _sandbox(policy: SandboxSettings | None, workspace: Path) -> Sandbox:
    policy = policy or DEFAULT_SANDBOX
    return Sandbox(
        tools=policy.tools,
        mcp=policy.mcp,
        network=policy.network,
        read=policy.read,
        write=policy.write,
        execute=policy.execute,
        workspace=workspace,
    )


def _output(
    settings: Settings, code_sink: OutputSink | None, problems: list[str]
) -> OutputSink | None:
    configured = settings.output.sinks if settings.output.sinks_given else ()
    if code_sink is None and not settings.output.sinks_given:
        configured = settings.output.sinks  # the default console sink
    sinks: list[OutputSink] = [] if code_sink is None else [code_sink]
    for index, sink in enumerate(configured):
        built = _sink(sink, index, problems)
        if built is not None:
            sinks.append(built)
    if len(sinks) > 1:
        problems.append(
            f"output.sinks: combining several sinks (the fan-out sink) {_NOT_YET}"
        )
        return None
    return sinks[0] if sinks else None


def _sink(sink: SinkSettings, index: int, problems: list[str]) -> OutputSink | None:
    if sink.type == "console":
        return ConsoleSink(name=sink.name)
    if sink.type == "file" and sink.path is not None:
        return FileSink(sink.path, name=sink.name)
    problems.append(f"output.sinks[{index}].type: the {sink.type} sink {_NOT_YET}")
    return None


def serve_options(
    settings: Settings,
    env: Mapping[str, str],
    *,
    port: int | None = None,
) -> ServeOptions:
    return ServeOptions(
        url=settings.nats.url,
        name=settings.nats.name,
        prefix=settings.subjects.prefix,
        queue=settings.subjects.queue_group,
        reply_prefixes=settings.subjects.reply_prefixes,
        data_dir=settings.data_dir,
        port=port,
        tool_timeout=settings.tool_timeout,
        max_pending=settings.max_pending,
        shutdown_grace=settings.shutdown_grace,
        connect_options=nats_connect_options(env)
        if settings.nats.url is not None
        else {},
    )
