"""The served application: a worker assembled from the configuration file and the code.

Values given in code win over the file's (a Sandbox, a concurrency); tools, MCP clients and sinks
given in code are added to those the file configures, and a name given twice stops the start. The
defaults (read_text and the 14 read-only commands over the working directory, the console sink, the
default sandbox with its command executor) apply only where neither the file nor the code provides
tools, sinks or a sandbox (docs/configuration.md 2). A sandbox given in code replaces the
file's `sandbox:` block only: without a workspace it gets the file's `workspace`, without an executor
the commands' executor when the file registers read-only commands, and it protects the same secrets.
"""

import os
from collections.abc import Mapping
from pathlib import Path

from .config import (
    COMMAND_NAMES,
    DEFAULT_SANDBOX,
    DEFAULT_TOOLS,
    CommandSettings,
    SandboxSettings,
    Settings,
    WebSearchSettings,
    browser_subjects,
    credential_files,
    directory_problems,
    history_streams,
    listen_address,
    nats_connect_options,
    websocket_tls,
)
from .config.values import Rule
from .embedded import BrowserAccess, WebSocketListener
from .errors import ConfigurationError, RegistrationError
from .mcp import connection_from_settings
from .mcp.auth import TokenPlace
from .nodes import RegisteredTool, Sandbox, ToolRegistry
from .nodes.mcp_registry import (
    DEFAULT_MAX_CAPABILITIES,
    DEFAULT_MAX_DISCOVERY_PAGES,
    McpRegistry,
)
from .nodes.protected import PROCESS_FILES
from .service import ServeOptions
from .sinks.configured import configured_output
from .tools import (
    BraveSearch,
    ReadOnlyCommandTool,
    ReadTextTool,
    SubprocessExecutor,
    WebSearchTool,
    read_only_command_tools,
)
from .worker import InteractionWorker


def build_worker(
    settings: Settings,
    code: InteractionWorker | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> InteractionWorker:
    """The worker `run` serves: the file's tools, sinks and sandbox joined with the code's.

    Raises:
        ConfigurationError: one line per problem; among them a workspace inside the data directory.
    """
    env = os.environ if env is None else env
    problems: list[str] = []
    code = code or InteractionWorker()
    registry = code.tools
    commands_added = _register_file_tools(
        settings,
        registry,
        code_has_tools=bool(registry.names()),
        env=env,
        problems=problems,
    )
    mcp = _mcp(settings, code.mcp, problems)
    output = configured_output(settings, code.output, problems)
    if problems:
        raise ConfigurationError("\n".join(problems))
    commands = _command_settings(settings)
    if not code.sandbox_given:
        sandbox = _sandbox(settings.sandbox, settings.workspace, commands)
    else:
        sandbox = code.sandbox
        # Granting `execute` in code while the file enables the commands asks for them to run;
        # without this they would all answer that no executor is enabled. It still runs them
        # only if the sandbox grants `execute`.
        if commands_added and sandbox.executor is None:
            sandbox.executor = _command_executor(commands)
        # It replaces the file's `sandbox:` block, not the top-level `workspace:`.
        if sandbox.workspace is None:
            sandbox.workspace = settings.workspace
    problems = directory_problems(sandbox.workspace, settings)
    if problems:
        raise ConfigurationError("\n".join(problems))
    _protect(sandbox, settings, env)
    return InteractionWorker(
        tools=registry,
        mcp=mcp,
        output=output,
        sandbox=sandbox,
        concurrency=code.concurrency
        if code.concurrency is not None
        else settings.concurrency,
        commands=code.commands,
        serve=code.serve if code.serve_given else settings.serve,
    )


def _protect(sandbox: Sandbox, settings: Settings, env: Mapping[str, str]) -> None:
    """The worker's secrets out of every tool's reach: the data directory (tokens, the embedded
    server's configuration), the credential files the environment names, the MCP servers' OAuth
    tokens and keys, and the processes' environments (docs/tools.md)."""
    sandbox.protected.add(settings.data_dir)
    sandbox.protected.add(PROCESS_FILES)
    for path in (*credential_files(env), *mcp_credential_files(settings)):
        sandbox.protected.add(path)
    sandbox.check_workspace()


def _register_file_tools(
    settings: Settings,
    registry: ToolRegistry,
    *,
    code_has_tools: bool,
    env: Mapping[str, str],
    problems: list[str],
) -> bool:
    """Register the file's tools (or the default ones); true when read-only commands were among them."""
    tools = settings.tools
    if tools is None:
        if code_has_tools:
            return False
        tools = DEFAULT_TOOLS  # read_text and the 14 read-only commands
    tools_to_add: list[RegisteredTool] = [ReadTextTool()] if tools.read_text else []
    commands: list[RegisteredTool] = []
    if tools.commands is not None:
        commands = _command_tools(tools.commands)
        tools_to_add += commands
    if tools.web_search is not None:
        search = _web_search_tool(tools.web_search, env, problems)
        tools_to_add += [] if search is None else [search]
    for tool in tools_to_add:
        key = "commands" if isinstance(tool, ReadOnlyCommandTool) else tool.name
        if registry.get(tool.name) is not None:
            problems.append(f"tools.{key}: the tool {tool.name} is also given in code")
            continue
        try:
            registry.register(tool)
        except RegistrationError as error:
            problems.append(f"tools.{key}: {error}")
    return bool(commands)


def _command_tools(commands: CommandSettings) -> list[RegisteredTool]:
    tools = read_only_command_tools(
        max_entries=commands.max_entries,
        max_output_bytes=commands.max_output_bytes,
        max_error_bytes=commands.max_error_bytes,
    )
    return [tool for tool in tools if tool.name in commands.enabled]


def _web_search_tool(
    search: WebSearchSettings, env: Mapping[str, str], problems: list[str]
) -> WebSearchTool | None:
    """Brave web search; its key comes from INTERACTION_BRAVE_API_KEY only, never from the file."""
    key = env.get("INTERACTION_BRAVE_API_KEY")
    if not key:
        problems.append(
            "tools.web_search: the Brave API key is read from INTERACTION_BRAVE_API_KEY, "
            "which is not set"
        )
        return None
    try:
        provider = BraveSearch(
            key, timeout=search.timeout, max_response_bytes=search.max_response_bytes
        )
    except ConfigurationError:
        problems.append(
            "tools.web_search: INTERACTION_BRAVE_API_KEY must be one nonempty line"
        )
        return None
    return WebSearchTool(provider)


def _command_settings(settings: Settings) -> CommandSettings:
    """The limits of the sandbox's executor: the file's `tools.commands`, else the defaults."""
    return (settings.tools or DEFAULT_TOOLS).commands or CommandSettings()


def _command_executor(commands: CommandSettings) -> SubprocessExecutor:
    """The read-only commands' programs only, with the file's limits."""
    return SubprocessExecutor(
        timeout=commands.timeout,
        max_output_bytes=commands.max_output_bytes,
        max_error_bytes=commands.max_error_bytes,
        commands=COMMAND_NAMES,
        max_memory=commands.max_memory,
    )


def _sandbox(
    policy: SandboxSettings | None, workspace: Path, commands: CommandSettings
) -> Sandbox:
    policy = policy or DEFAULT_SANDBOX
    executor = _command_executor(commands)
    return Sandbox(
        tools=policy.tools,
        mcp=policy.mcp,
        network=policy.network,
        read=policy.read,
        write=policy.write,
        execute=policy.execute,
        command_ids=policy.command_ids,
        workspace=workspace,
        executor=executor,
    )


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
        account_inboxes=settings.subjects.account_inboxes,
        data_dir=settings.data_dir,
        port=port,
        tool_timeout=settings.tool_timeout,
        max_pending=settings.max_pending,
        shutdown_grace=settings.shutdown_grace,
        idempotency=settings.idempotency
        if settings.idempotency.enabled or settings.durable.enabled
        else None,
        durable=settings.durable if settings.durable.enabled else None,
        metrics_listen=settings.metrics.listen,
        tracing=settings.tracing.enabled,
        connect_options=nats_connect_options(env)
        if settings.nats.url is not None
        else {},
        websocket=websocket_listener(settings, env),
        browsers=BrowserAccess(
            subjects=browser_subjects(settings.output),
            streams=history_streams(settings.output),
        ),
    )


def token_place(settings: Settings) -> TokenPlace:
    """Where the tokens of the servers behind OAuth live (docs/configuration.md): files under
    `<data_dir>/mcp-auth/` with the embedded server, else the key-value bucket on the NATS server
    every worker of the fleet shares."""
    if settings.nats.url is None:
        return TokenPlace(directory=settings.data_dir / "mcp-auth")
    return TokenPlace(replicas=settings.idempotency.replicas)


def mcp_credential_files(settings: Settings) -> list[Path]:
    """The files that hold the MCP servers' OAuth credentials: the token directory (without a NATS
    URL) and each `private_key_file`. No tool may read them (docs/configuration.md)."""
    servers = [s.auth for s in settings.mcp.servers.values() if s.auth is not None]
    if not servers:
        return []
    files = token_place(settings).paths()
    files += [a.private_key_file for a in servers if a.private_key_file is not None]
    return files


def websocket_listener(
    settings: Settings, env: Mapping[str, str]
) -> WebSocketListener | None:
    """The embedded server's WebSocket listener (`nats.websocket`), with its certificate when the
    environment gives one; None with a NATS URL, whose server has its own configuration.

    Raises:
        ConfigurationError: the certificate or key variables are wrong.
    """
    if settings.nats.url is not None or settings.nats.websocket is None:
        return None
    address = listen_address(settings.nats.websocket)
    assert not isinstance(address, Rule)  # checked when the file was read
    host, port = address
    tls = websocket_tls(env)
    if tls is None:
        return WebSocketListener(host, port)
    return WebSocketListener(host, port, cert=tls[0], key=tls[1])


def _mcp(
    settings: Settings, code_mcp: McpRegistry | None, problems: list[str]
) -> McpRegistry | None:
    """The code's MCP registry (or a new one) with the file's servers registered into it; their
    connections are made when the worker starts. A registry left at the default limits (one built
    from a mapping in code) takes the file's limits."""
    file = settings.mcp
    registry = code_mcp
    if registry is None:
        if not file.servers:
            return None
        registry = McpRegistry(
            max_discovery_pages=file.max_discovery_pages,
            max_capabilities=file.max_capabilities,
        )
    else:
        if registry.max_discovery_pages == DEFAULT_MAX_DISCOVERY_PAGES:
            registry.max_discovery_pages = file.max_discovery_pages
        if registry.max_capabilities == DEFAULT_MAX_CAPABILITIES:
            registry.max_capabilities = file.max_capabilities
    tokens = token_place(settings)
    for name, server in file.servers.items():
        try:
            connection = connection_from_settings(name, server, tokens=tokens)
        except ConfigurationError as error:
            problems.append(str(error))
            continue
        try:
            registry.register(name, connection)
        except RegistrationError:
            problems.append(
                f"mcp.servers.{name}: the MCP server {name} is also given in code"
            )
    return registry
