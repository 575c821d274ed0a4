"""What a ReAct flow offers the model: declared actions bound to targets by the caller."""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

# The function names chat-completion APIs accept; the same rule as a tool definition's name.
ACTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True, slots=True)
class ToolTarget:
    """A tool the worker serves (`P.tool.call`)."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("ToolTarget.name must be a non-empty string")


@dataclass(frozen=True, slots=True)
class McpTarget:
    """A tool of one MCP server behind the worker (`P.mcp.call`, operation `invoke`)."""

    server: str
    tool: str

    def __post_init__(self) -> None:
        if not isinstance(self.server, str) or not self.server:
            raise ValueError("McpTarget.server must be a non-empty string")
        if not isinstance(self.tool, str) or not self.tool:
            raise ValueError("McpTarget.tool must be a non-empty string")


@dataclass(frozen=True, slots=True)
class ActionDescriptor:
    """An action the model may request, and where it goes.

    The target is the caller's choice: `ToolTarget(name)` by default, or an `McpTarget`. The model
    only names the action and gives its arguments; it never chooses the server or the subject.
    """

    name: str
    description: str | None = None
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})
    target: ToolTarget | McpTarget | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not ACTION_NAME.fullmatch(self.name):
            raise ValueError(
                f"action name {self.name!r} must be 1 to 64 of A-Z, a-z, 0-9, _ and -"
            )
        if not isinstance(self.input_schema, Mapping):
            raise ValueError(f"action {self.name}: input_schema must be a JSON object")
        if self.target is None:
            object.__setattr__(self, "target", ToolTarget(self.name))
        elif not isinstance(self.target, ToolTarget | McpTarget):
            raise ValueError(
                f"action {self.name}: target must be a ToolTarget or an McpTarget"
            )

    @property
    def bound(self) -> ToolTarget | McpTarget:
        """The target, never None once built."""
        assert self.target is not None
        return self.target


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """One action the model asked for. `arguments` is what the model gave: the flow checks that it
    is a JSON object before anything runs."""

    id: str
    name: str
    arguments: JsonValue

    @classmethod
    def of(cls, value: "ActionRequest | Mapping[str, Any]") -> "ActionRequest":
        """An `ActionRequest`, or its mapping form `{"id", "name", "arguments"}`. The values are the
        model's, checked by the flow (docs/flows.md 3); only the shape is checked here."""
        if isinstance(value, ActionRequest):
            return value
        if not isinstance(value, Mapping):
            raise TypeError("an action request must be an ActionRequest or its mapping")
        keys = set(value)
        if keys != {"id", "name", "arguments"}:
            raise TypeError(
                'an action request mapping has exactly the keys "id", "name" and "arguments"'
            )
        return cls(id=value["id"], name=value["name"], arguments=value["arguments"])

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}
