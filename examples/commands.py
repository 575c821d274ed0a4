"""The command protocol in three steps, as the product documents it (docs/commands.md).

    python examples/commands.py

and, served over NATS (docs/commands.md, "On the bus"), while another shell sends it commands:

    interaction-worker run examples.commands:worker
    interaction-worker command '{"type": "reply", "text": "A plain object can implement an interface."}'

1. Define one explanatory command and validate what a model sends.
2. Keep the same protocol, bind a handler to every command, and dispatch.
3. Compile commands directly: `define_command`, `compile_commands`, `CommandCatalog`, `command_schema`.

Nothing here runs a tool or touches the network.
"""

import asyncio
import json
from typing import Any

from interaction_worker import (
    CommandCatalog,
    CommandDispatcher,
    CommandProtocol,
    CommandRejected,
    Interaction,
    InteractionWorker,
    command_schema,
    compile_commands,
    define_command,
)

REPLY: dict[str, Any] = {
    "category": "presentation",
    "description": "Show a confirmed explanation",
    "fields": {"text": {"required": True, "json_schema": {"type": "string"}}},
    "checks": [
        {
            "occur": lambda value: not isinstance(value["text"], str),
            "error": "text must be a string",
        }
    ],
}


def show(label: str, value: object) -> None:
    print(f"{label}: {json.dumps(value, ensure_ascii=False, sort_keys=False)}")


def define_and_receive() -> CommandProtocol:
    """Step 1: one command, a valid command received, an invalid one rejected, the model schema."""
    protocol = Interaction.define(command_field="type", commands={"reply": REPLY})
    show(
        "receive",
        protocol.receive(
            {"type": "reply", "text": "A plain object can implement an interface."}
        ),
    )
    try:
        protocol.receive({"type": "reply", "text": 1})
    except CommandRejected as rejected:
        show(
            "rejected",
            {"code": rejected.code, "message": rejected.message, "path": rejected.path},
        )
    show("model schema", protocol.model_json_schema)
    return protocol


def explanations() -> CommandDispatcher:
    """The protocol of step 2: `reply` and `unavailable`, with a handler bound to each."""
    protocol = Interaction.define(
        command_field="type",
        commands={
            "reply": REPLY,
            "unavailable": {
                "category": "receipt",
                "description": "The material is unavailable",
                "fields": {},
            },
        },
    )
    return Interaction.bind(
        protocol,
        {
            "reply": lambda value, context: "Explanation: " + str(value["text"]),
            "unavailable": lambda value, context: (
                "The material is temporarily unavailable"
            ),
        },
    )


# `interaction-worker run examples.commands:worker` serves step 2's protocol on P.command.
worker = InteractionWorker(commands=explanations())


async def bind_and_dispatch() -> None:
    """Step 2: the same protocol plus `unavailable`, with a handler for each command."""
    dispatcher = explanations()
    show(
        "dispatch",
        await dispatcher.dispatch(
            {"type": "reply", "text": "A plain object can implement an interface."}
        ),
    )
    show("dispatch", await dispatcher.dispatch({"type": "unavailable"}))
    show("catalog", dispatcher.catalog)


def compile_directly() -> None:
    """Step 3: the compilation entry points without `Interaction` (no command field, no handlers)."""
    reply = define_command(
        {
            "fields": {"text": {"required": True}},
            "checks": [
                {
                    "occur": lambda value: not isinstance(value["text"], str),
                    "error": "text required",
                }
            ],
        }
    )
    show("parse", reply.parse({"text": "interface notes"}))
    compiled = compile_commands({"reply": {"fields": {"text": {"required": True}}}})
    commands = CommandCatalog(compiled.items())
    show("command schema", command_schema("reply", commands.require("reply")))
    show("manifest", commands.manifest())


def main() -> None:
    define_and_receive()
    asyncio.run(bind_and_dispatch())
    compile_directly()


if __name__ == "__main__":
    main()
