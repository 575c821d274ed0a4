"""Which reply a client believes (docs/wire.md 7): the answer to its own request, and nothing else
that reaches its inbox.

Anyone who learns an inbox can publish on it, and a worker answers an `Interaction-Reply-To` under
any allowed reply prefix, so a message on the inbox proves nothing by itself. A result, receipt,
observation or command reply is taken only when the id (and the `source`) it carries are the
request's; a reply that carries no id (an error reply, a tool list, a discover, the catalog) only
on the inbox of the one request it answers, whose name is not predictable from the client's others.
"""

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..contracts.wire import WIRE

# The reply's parsed body → whether it answers the request.
Matcher = Callable[[Any], bool]


def matcher(subject: str, body: object) -> Matcher | None:
    """How to recognise the answer to a request of `P.<subject>` with `body`.

    None for a request whose answer carries no id (`tool.list`, `command.catalog`, an MCP discover):
    any answer on its own inbox is taken. A request that should carry an id but whose id cannot be
    read gets a matcher that takes nothing: the worker refuses such a request, and its error reply
    is taken before any matcher is asked."""
    if subject == WIRE["list"].request or subject == WIRE["catalog"].request:
        return None
    if not isinstance(body, Mapping):
        return _nothing
    if subject == WIRE["tool"].request:
        call = body.get("call")
        if isinstance(call, Mapping):
            return _result(call.get("id"), call.get("name"))
    elif subject == WIRE["mcp"].request:
        if body.get("operation") == "discover":
            return None
        call, server = body.get("call"), body.get("server")
        if isinstance(call, Mapping) and isinstance(server, str):
            name = call.get("name")
            source = f"{server}:{name}" if isinstance(name, str) else None
            within = _result(call.get("id"), source)
            return lambda reply: isinstance(reply, dict) and within(reply.get("result"))
    elif subject == WIRE["observe"].request:
        result = body.get("result")
        if isinstance(result, Mapping):
            return _result(result.get("callId"), result.get("source"))
    elif subject == WIRE["output"].request:
        return _field("deliveryId", body.get("deliveryId"))
    elif subject == WIRE["command"].request:
        # The reply's `id` is the command id the protocol read from the field it selects commands
        # by, which a client need not know: it is one of the request's own string values.
        chosen = frozenset(value for value in body.values() if isinstance(value, str))
        return lambda reply: isinstance(reply, dict) and reply.get("id") in chosen
    else:
        return None
    return _nothing


def matcher_of_bytes(subject: str, data: bytes) -> Matcher | None:
    """`matcher` of a request given as the bytes it is sent as."""
    try:
        body = json.loads(data)
    except ValueError:  # not JSON (or not UTF-8): the worker refuses it
        return _nothing
    return matcher(subject, body)


def _result(call_id: object, source: object) -> Matcher:
    if not isinstance(call_id, str) or not isinstance(source, str):
        return _nothing
    return lambda reply: (
        isinstance(reply, dict)
        and reply.get("callId") == call_id
        and reply.get("source") == source
    )


def _field(name: str, value: object) -> Matcher:
    if not isinstance(value, str):
        return _nothing
    return lambda reply: isinstance(reply, dict) and reply.get(name) == value


def _nothing(reply: Any) -> bool:
    return False
