"""The wire table (`contracts/wire.py`) and the serving table (`subscribers/requests/`) describe the
same kinds: a kind with a row in one and not the other is caught here, not by a message that finds no
family in durable mode, no replay, or no metrics status."""

from typing import Any

from interaction_worker import InteractionWorker
from interaction_worker.commands import Interaction
from interaction_worker.contracts.serving import SERVE_NAMES, served_kinds
from interaction_worker.contracts.wire import (
    COMMAND_KINDS,
    CORE_KINDS,
    DURABLE_KINDS,
    KINDS,
    WIRE,
    Kind,
    Subjects,
)
from interaction_worker.ledger import Ledger, MemoryStore
from interaction_worker.schema import wire_schemas
from interaction_worker.subscribers.requests import SERVING, Ledgered, ledgered


def commanded() -> InteractionWorker:
    protocol = Interaction.define(
        command_field="type",
        commands={"ping": {"category": "receipt", "fields": {}}},
    )
    return InteractionWorker(
        commands=Interaction.bind(protocol, {"ping": lambda value, context: "pong"})
    )


def test_the_serving_table_has_one_row_per_kind_of_the_wire_table() -> None:
    assert list(SERVING) == list(WIRE) == list(KINDS)


def test_a_worker_with_a_dispatcher_serves_every_kind_and_measures_each() -> None:
    handler = commanded().message_handler(ledger=Ledger(MemoryStore(), worker="w"))
    handler.measure()

    assert handler.kinds == KINDS
    assert handler.measures is not None and set(handler.measures) == set(KINDS)
    assert {kind for kind in KINDS if ledgered(handler.families[kind])} == {
        kind for kind, served in SERVING.items() if served.terms is not None
    }
    ledgered_kinds: tuple[Kind, ...] = ("tool", "mcp", "output")
    assert all(
        isinstance(ledgered(handler.families[kind]), Ledgered)
        for kind in ledgered_kinds
    )


def test_a_worker_without_a_dispatcher_serves_all_but_the_command_protocol() -> None:
    handler = InteractionWorker().message_handler()

    assert handler.kinds == tuple(k for k in KINDS if k not in COMMAND_KINDS)
    assert COMMAND_KINDS == ("command", "catalog")


def test_each_kind_has_its_own_subject_and_durable_mode_splits_the_kinds() -> None:
    subjects = Subjects("p").all_requests()

    assert len(set(subjects.values())) == len(KINDS)
    assert set(DURABLE_KINDS) | set(CORE_KINDS) == set(KINDS)
    assert not set(DURABLE_KINDS) & set(CORE_KINDS)
    assert DURABLE_KINDS == ("tool", "mcp", "output", "command")
    assert Subjects("p").dead("catalog", "K") == "p.dead.command.K"


def test_every_model_the_wire_table_names_has_a_published_schema() -> None:
    titles = {schema.get("title") for schema in wire_schemas().values()}
    named: set[str] = set()
    for row in WIRE.values():
        for model in (row.request_model, row.reply_model):
            named |= {m.__name__ for m in _members(model)}
        named |= {event.model.__name__ for event in row.events}
    mcp = {"McpDiscoverInput", "McpInvokeInput", "McpDiscoverOutput", "McpInvokeOutput"}
    # The MCP unions are published as one schema each (McpInput, McpOutput).
    assert named - mcp <= titles
    assert {"McpInput", "McpOutput"} <= titles


def _members(model: Any) -> tuple[Any, ...]:
    return getattr(model, "__args__", (model,))


def test_the_serve_names_cover_every_kind_once() -> None:
    assert served_kinds(SERVE_NAMES) == set(KINDS)
    assert "catalog" not in SERVE_NAMES
    assert served_kinds(["command"]) == {"command", "catalog"}
