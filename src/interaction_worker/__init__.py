"""interaction-worker: run an agent's tool calls, MCP requests and deliveries over NATS.

The public API is the table below and nothing else: one line per name, naming the module that defines
it. Type checkers read the lines as the imports they are (`X as X` re-exports `X`); at run time none of
them runs: `__all__`, `dir()` and the loader are read from the same lines, and a name's module is
imported when the name is first used (PEP 562). So importing the package, which every
`interaction_worker.*` import does first (the pytest plugin in every test run of a project that
installs it, each CLI command), loads neither pydantic's models nor the bus bindings.
"""

import functools
import importlib
import re
import typing

if typing.TYPE_CHECKING:
    from .commands import CommandCatalog as CommandCatalog
    from .commands import CommandDefinitionError as CommandDefinitionError
    from .commands import CommandDispatcher as CommandDispatcher
    from .commands import CommandProtocol as CommandProtocol
    from .commands import CommandRejected as CommandRejected
    from .commands import CommandSpec as CommandSpec
    from .commands import CompiledCommand as CompiledCommand
    from .commands import Interaction as Interaction
    from .commands import command_schema as command_schema
    from .commands import compile_commands as compile_commands
    from .commands import define_command as define_command
    from .contracts import Artifact as Artifact
    from .contracts import ExternalResult as ExternalResult
    from .contracts import InteractionError as InteractionError
    from .contracts import McpCapability as McpCapability
    from .contracts import Message as Message
    from .contracts import Observation as Observation
    from .contracts import OutputReceipt as OutputReceipt
    from .contracts import OutputRequest as OutputRequest
    from .contracts import Reference as Reference
    from .contracts import ToolCall as ToolCall
    from .contracts import ToolDefinition as ToolDefinition
    from .errors import ConfigurationError as ConfigurationError
    from .errors import InteractionWorkerError as InteractionWorkerError
    from .errors import McpClientError as McpClientError
    from .errors import McpConnectionLost as McpConnectionLost
    from .errors import McpProtocolError as McpProtocolError
    from .errors import McpTimeout as McpTimeout
    from .errors import McpUnavailable as McpUnavailable
    from .errors import RegistrationError as RegistrationError
    from .flows import ActionDescriptor as ActionDescriptor
    from .flows import ActionRequest as ActionRequest
    from .flows import ActionStep as ActionStep
    from .flows import Context as Context
    from .flows import FlowClient as FlowClient
    from .flows import FlowError as FlowError
    from .flows import McpDiscovery as McpDiscovery
    from .flows import McpTarget as McpTarget
    from .flows import ModelError as ModelError
    from .flows import ModelProvider as ModelProvider
    from .flows import OpenAICompatibleModel as OpenAICompatibleModel
    from .flows import ReactConstraints as ReactConstraints
    from .flows import ReactFlowInput as ReactFlowInput
    from .flows import ReactFlowResult as ReactFlowResult
    from .flows import SampleOutput as SampleOutput
    from .flows import ScriptedModel as ScriptedModel
    from .flows import ToolTarget as ToolTarget
    from .flows import Usage as Usage
    from .flows import run_mcp_flow as run_mcp_flow
    from .flows import run_react_flow as run_react_flow
    from .flows import run_tool_call_flow as run_tool_call_flow
    from .nodes import CommandContext as CommandContext
    from .nodes import DeliveryContext as DeliveryContext
    from .nodes import McpClient as McpClient
    from .nodes import McpRegistry as McpRegistry
    from .nodes import McpToolPage as McpToolPage
    from .nodes import McpToolResult as McpToolResult
    from .nodes import OutputSink as OutputSink
    from .nodes import RegisteredTool as RegisteredTool
    from .nodes import Sandbox as Sandbox
    from .nodes import ToolContext as ToolContext
    from .nodes import ToolRegistry as ToolRegistry
    from .nodes import observe_external_result as observe_external_result
    from .subscribers import BindingOptions as BindingOptions
    from .worker import InteractionWorker as InteractionWorker

# Declared for type checkers; a bare annotation binds nothing, so the loader serves it too.
__all__: list[str]


# A line of the table, as the formatter writes it; tests/test_public_api.py checks that this reads the
# same names as a type checker does.
_LINE = re.compile(r"^    from \.(\w+) import (\w+) as \2$", re.MULTILINE)


@functools.cache
def _exports() -> dict[str, str]:
    """Each public name and the module that defines it, read from the table above when a name is
    first asked for (a build without sources would have no table)."""
    try:
        with open(__file__, encoding="utf-8") as file:
            source = file.read()
    except OSError:
        # Not a file of its own (a zip import): importlib.resources reads it there, at ~6 ms of imports.
        import importlib.resources

        source = (
            importlib.resources.files(__name__)
            .joinpath("__init__.py")
            .read_text("utf-8")
        )
    return {name: f".{module}" for module, name in _LINE.findall(source)}


def _attribute(name: str) -> object:
    if name == "__all__":
        value: object = sorted(_exports())
    else:
        module = _exports().get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names and the module's dunders: not the modules it imported, nor its parts."""
    dunders = {name for name in globals() if name.startswith("__")}
    return sorted({*dunders, "__all__", *_exports()})


# Hidden from type checkers, which would otherwise accept any name as this function's result: a name
# missing from the table is an error in a type-checked program as it is at run time.
if not typing.TYPE_CHECKING:
    __getattr__ = _attribute
