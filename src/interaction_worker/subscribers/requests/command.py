"""`P.command` and `P.command.catalog`: the command protocol on the bus (docs/commands.md).

A command is validated by the protocol, granted by the sandbox's `command_ids`, then dispatched to
the handler bound to its validated id; its reply is also the `P.command.done.<id>.<K>` event, keyed
by the request's `Interaction-Command-Id` header (or a fresh UUID). Commands are not calls: no
ledger, no result or observation.
"""

import json
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pydantic_core import to_json

from ...commands import CommandDispatcher, CommandRejected
from ...contracts.keys import headers_size, subject_key, valid_id
from ...contracts.wire import COMMAND_ID_HEADER, WIRE, IdNames, command_id_header
from ...errors import (
    CommandInvalid,
    InvalidInput,
    InvalidResult,
    PermissionDenied,
    ResultTooLarge,
)
from ...nodes import CommandContext, Sandbox
from ..incoming import Incoming
from ..outgoing import JSON_HEADERS, Outgoing, Publish, event_headers, trace_headers


@dataclass(frozen=True, slots=True)
class Dispatched:
    """A dispatched command: the id its event is keyed by (the header's, or one the worker gave it),
    and its reply."""

    command_id: str
    payload: bytes
    name: str  # the validated command id (`reply`)


def command_id(msg: Incoming) -> str | None:
    """The request's `Interaction-Command-Id` (in any case), when it sent one; one that cannot key a
    subject (blank, longer than 256 characters) is refused."""
    raw = command_id_header(msg)
    if raw is None:
        return None
    if valid_id(raw) is None:
        raise InvalidInput(
            f"{COMMAND_ID_HEADER} must be a nonempty string of at most 256 characters"
        )
    return raw


class Commands:
    """Runs `P.command`: validation, the sandbox, the bound handler; the reply and the done event."""

    def __init__(
        self, dispatcher: CommandDispatcher, sandbox: Sandbox, outgoing: Outgoing
    ) -> None:
        self.dispatcher = dispatcher
        self.sandbox = sandbox
        self.outgoing = outgoing

    def identify(self, body: dict[str, Any], msg: Incoming) -> str | None:
        return command_id(msg)

    def id_names(self, body: dict[str, Any]) -> IdNames | None:
        return WIRE["command"].ids

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> Dispatched:
        try:
            received = self.dispatcher.receive(body)
        except CommandRejected as rejected:
            raise CommandInvalid(
                rejected.message, reason=rejected.code, path=rejected.path or ""
            ) from None
        name: str = received["id"]
        if not self.sandbox.allows("command_ids", name):
            raise PermissionDenied(f"Permission denied: command_ids:{name}")
        given = identifier if identifier is not None else fresh_uuid()
        context = CommandContext(given, msg.subject, msg.headers or _NO_HEADERS)
        reply = await self.dispatcher.run(received, context)
        result = reply["result"]
        try:
            if not is_json_value(result):
                raise ValueError("not JSON")
            # Only JSON's types from here: pydantic's encoder writes them as json.dumps would.
            payload = to_json({"id": name, "result": result})
        except (
            ValueError
        ):  # or a cycle, which the check lets through and the encoder refuses
            raise InvalidResult(
                f"The handler of command {name} returned a value that is not JSON"
            ) from None
        return Dispatched(given, payload, name)

    def publishes(
        self, outcome: Dispatched, msg: Incoming, key: str, target: str | None
    ) -> list[Publish]:
        outgoing = self.outgoing
        key = subject_key(outcome.command_id)
        trace = trace_headers(msg.headers)
        subject = outgoing.subjects.command_done(outcome.name, key)
        headers = event_headers(
            key=key,
            id_header=COMMAND_ID_HEADER,
            identifier=outcome.command_id,
            status="success",
            error_code=None,
            msg_id=f"{outgoing.subjects.prefix}.command.done:{key}",
            trace=trace,
        )
        if len(outcome.payload) + headers_size(headers) > outgoing.room():
            raise ResultTooLarge(
                "The command's result is larger than the server's max_payload"
            )
        event: Publish = (subject, outcome.payload, headers)
        if not target:
            return [event]
        return [(target, outcome.payload, JSON_HEADERS), event]


def wire_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A manifest entry as the catalog reply writes it: its field entries `{"required", "jsonSchema"}`."""
    fields = {
        name: {"required": field["required"], "jsonSchema": field["json_schema"]}
        for name, field in entry["fields"].items()
    }
    return {**entry, "fields": fields}


class Catalogs:
    """Answers `P.command.catalog` with the commands the sandbox grants: their manifest and the
    model schema, built once."""

    def __init__(
        self, dispatcher: CommandDispatcher, sandbox: Sandbox, outgoing: Outgoing
    ) -> None:
        self.outgoing = outgoing
        protocol = dispatcher.protocol
        granted = [sandbox.allows("command_ids", name) for name in protocol.ids]
        manifest = [
            wire_entry(entry)
            for entry, ok in zip(dispatcher.catalog, granted, strict=True)
            if ok
        ]
        schemas = protocol.model_json_schema["anyOf"]
        offered = [schema for schema, ok in zip(schemas, granted, strict=True) if ok]
        # A schema no command matches: `anyOf` may not be empty (JSON Schema 2020-12).
        model_schema: Any = {"anyOf": offered} if offered else False
        self.payload = json.dumps(
            {
                "commandField": protocol.command_field,
                "commands": manifest,
                "modelJsonSchema": model_schema,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()

    identify = staticmethod(WIRE["catalog"].read_id)

    def id_names(self, body: dict[str, Any]) -> IdNames | None:
        return WIRE["catalog"].ids

    async def run(
        self, body: dict[str, Any], identifier: str | None, msg: Incoming
    ) -> bytes:
        if body:
            raise InvalidInput("A catalog request is the empty object {}")
        return self.payload

    def publishes(
        self, outcome: bytes, msg: Incoming, key: str, target: str | None
    ) -> list[Publish]:
        return self.outgoing.reply(
            target,
            outcome,
            "The command catalog is larger than the server's max_payload",
        )


_MAX_DEPTH = 512
_NO_HEADERS: Mapping[str, str] = MappingProxyType({})
# Random bits for the ids given to commands sent without one: unique, not secret (they key public
# events), so the process's seeded generator serves instead of a system call per command.
_random = random.Random()


def fresh_uuid() -> str:
    """A random (version 4) UUID, as `str(uuid.uuid4())` writes one."""
    bits = _random.getrandbits(128) & _UUID_CLEAR | _UUID_SET
    h = f"{bits:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# The version (4) and variant (RFC 4122) bits of a UUID.
_UUID_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_UUID_SET = (0x4000 << 64) | (0x8000 << 48)


def is_json_value(value: object) -> bool:
    """Whether `value` is made of JSON's types only: dicts with string keys, lists, strings, finite
    numbers, booleans and None (no tuples, sets, dates, NaN, cycles)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    # Containers checked once: a value shared twice is checked once, a cycle ends (and then fails
    # to serialise).
    seen: set[int] = set()
    while stack:
        item, depth = stack.pop()
        if item is None or isinstance(item, (str, bool, int)):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return False
            continue
        if depth >= _MAX_DEPTH:
            return False
        if id(item) in seen:
            continue
        seen.add(id(item))
        if type(item) is dict:
            if any(not isinstance(name, str) for name in item):
                return False
            stack.extend((child, depth + 1) for child in item.values())
        elif type(item) is list:
            stack.extend((child, depth + 1) for child in item)
        else:
            return False
    return True
