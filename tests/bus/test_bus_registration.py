"""A tool registered wrong cannot break `P.tool.list` for every client: it is refused when it is
registered, and what is listed was checked then (docs/configuration.md 2)."""

from typing import Any

import pytest
from bus_doubles import Echo
from bus_harness import Serve, decode

from interaction_worker import (
    InteractionWorker,
    RegistrationError,
    Sandbox,
    ToolContext,
)

pytest_plugins = ["bus_fixtures"]


class Schemaless:
    name = "schemaless"

    def validate(self, arguments: dict[str, Any]) -> None:
        return None

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return {"status": "success", "content": "ok"}


class BadEffects(Schemaless):
    name = "bad_effects"
    input_schema = {"type": "object"}
    effects = ("read", "delete")


class ListSchema(Schemaless):
    name = "list_schema"
    input_schema = [{"type": "object"}]


async def test_a_wrong_tool_is_refused_and_the_listing_still_answers(
    serve: Serve,
) -> None:
    echo = Echo()
    worker = InteractionWorker(tools=[echo], sandbox=Sandbox(tools=["*"]))
    served = await serve(worker)
    for tool in (Schemaless(), BadEffects(), ListSchema()):
        with pytest.raises(RegistrationError, match=f"Invalid tool {tool.name}: "):
            worker.tools.register(tool)  # type: ignore[arg-type]
    # Changed after registration, the tool's schema is no longer JSON: what is listed was read then.
    echo.input_schema = {"type": "object", "enum": {1, 2}}

    reply = await served.bus.request("list", {})
    described = await served.bus.request("list", {"name": "echo"})

    assert reply.headers is None or "Nats-Service-Error" not in reply.headers
    assert [tool["name"] for tool in decode(reply)["tools"]] == ["echo"]
    assert decode(described)["tools"][0]["inputSchema"]["type"] == "object"
    assert served.bus.dead_letters() == []
