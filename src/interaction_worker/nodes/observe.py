"""INTERACTION.OBSERVE: shape an ExternalResult into a tool message (reference section 5).

Pure and deterministic: the same result always gives an equal observation, and the result is not
modified (content parts are shared, as the reference shares them, never copied and changed).
"""

from typing import Any

from pydantic_core import to_json

from ..contracts import ContractError, ExternalResult, Observation
from ..contracts import validation as check
from ..errors import InvalidInput


def observe_request(value: object) -> Observation:
    """The `P.observe` body `{"result": …}`: validate the result (no fallback), then observe it."""
    result = value.get("result") if isinstance(value, dict) else None
    try:
        validated = check.external_result(result)
    except ContractError as error:
        raise InvalidInput(error.message) from None
    return _observe(validated)


def observe_external_result(result: ExternalResult) -> Observation:
    """Observe a result, validated first as the reference does: a model built in code may still be
    invalid (a failure without an error, an unsafe error message), and is then INVALID_INPUT."""
    return observe_request({"result": result.to_wire()})


def observe_validated_result(result: ExternalResult) -> Observation:
    """Observe a result that a validator produced (a registry's output): no second validation."""
    return _observe(result)


def _observe(result: ExternalResult) -> Observation:
    return Observation.model_validate(observation_document(result))


def observation_document(result: ExternalResult) -> dict[str, Any]:
    """The observation of a validated result as wire data (camelCase, absent fields omitted, keys in
    the reference's order)."""
    return wire_observation(result.to_wire())


def wire_observation(result: dict[str, Any]) -> dict[str, Any]:
    """`observation_document` of a validated result given as its wire document, which the bus
    serialises without building either model."""
    status = result["status"]
    source = result["source"]
    error = result.get("error")
    parts: list[Any] = []
    if status != "success" and error is not None:
        parts.append(
            {"type": "text", "text": f"{status}: {error['code']}: {error['message']}"}
        )
    if "content" in result:
        parts.extend(_content_parts(result["content"]))
    if "structuredContent" in result:
        parts.append({"type": "json", "data": result["structuredContent"]})
    for reference in result.get("references") or ():
        parts.append({"type": "reference", "reference": reference})
    content: Any = parts
    # The reference collapses one text part to its text; a part without a string `text` stays a
    # list here, where the reference would drop `content` from the message altogether.
    if (
        len(parts) == 1
        and parts[0].get("type") == "text"
        and isinstance(parts[0].get("text"), str)
    ):
        content = parts[0]["text"]
    document: dict[str, Any] = {
        "callId": result["callId"],
        "source": source,
        "status": status,
        "message": {"role": "tool", "name": source, "content": content},
    }
    if "structuredContent" in result:
        document["structuredContent"] = result["structuredContent"]
    if "references" in result:
        document["references"] = result["references"]
    if error is not None:
        document["error"] = error
    if "metadata" in result:
        document["metadata"] = result["metadata"]
    return document


# What a text result's observation writes in place of its content's key, by source: the sources a worker
# answers for are its tools' names, a few; past this many, the rest are written each time.
_MESSAGE_HEADS: dict[str, bytes] = {}
_MAX_MESSAGE_HEADS = 256


def wire_json(result: dict[str, Any]) -> tuple[bytes, bytes]:
    """`to_json(result)` and `to_json(wire_observation(result))`, byte for byte, for a validated
    result's wire document (its keys in the declared order, as the validators write them).

    A success whose only content is a string is observed as that string, under a message of its
    source: its observation is the result's own JSON with the message written around the content,
    never built as a dict nor serialised again."""
    result_json = to_json(result)
    if (
        len(result) == 4
        and type(result.get("content")) is str
        and result["status"] == "success"
    ):
        # callId, source, status, content: the message goes around the content. The content's key
        # is written with unescaped quotes, which no JSON string holds: the first one is it.
        source = result["source"]
        head = _MESSAGE_HEADS.get(source) or _message_head(source)
        return result_json, result_json.replace(b',"content":"', head, 1) + b"}"
    return result_json, to_json(wire_observation(result))


def _message_head(source: str) -> bytes:
    head = b',"message":{"role":"tool","name":%b,"content":"' % to_json(source)
    if len(_MESSAGE_HEADS) < _MAX_MESSAGE_HEADS:
        _MESSAGE_HEADS[source] = head
    return head


def _content_parts(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list) and all(
        isinstance(part, dict) and "type" in part for part in content
    ):
        return list(content)
    return [{"type": "json", "data": content}]


# What an event keeps for its headers below the server's max_payload (wire.md 1: 2 KiB).
EVENT_HEADERS_ROOM = 2048


def observation_json(result: dict[str, Any], room: int) -> bytes:
    """The body of the observation event of `result` (a validated result's wire document) when an
    event may take `room` bytes: its observation, shortened when it does not fit (wire.md 1).

    The worker publishes it, and a client computes it from the result it was answered, so that it
    need not believe an event subject anyone may publish on (docs/wire.md 7)."""
    observation = wire_observation(result)
    encoded = to_json(observation)
    if len(encoded) <= room:
        return encoded
    return shortened_json(observation, len(encoded), room)


def shortened_json(observation: dict[str, Any], size: int, room: int) -> bytes:
    """The event body of an observation whose JSON (`size` bytes) does not fit in `room` bytes:
    shortened, and with only the mark left of its metadata when even that does not fit."""
    shortened = shortened_observation(observation, size)
    encoded = to_json(shortened)
    if len(encoded) > room:
        # Metadata as large as the room: only the mark stays.
        shortened["metadata"] = {"truncated": True}
        encoded = to_json(shortened)
    return encoded


def shortened_observation(observation: dict[str, Any], size: int) -> dict[str, Any]:
    """The observation event of a result whose observation does not fit (wire.md 1): its content
    replaced by a pointer to the result event, which carries it all, and marked `truncated`.

    `size` is the byte size of the observation that did not fit. Metadata that is not an object
    cannot carry the mark and is replaced by it."""
    shortened = {
        key: value
        for key, value in observation.items()
        if key not in ("structuredContent", "references")
    }
    message = dict(observation["message"])
    message["content"] = f"Content omitted ({size} bytes): see the result event"
    shortened["message"] = message
    metadata = observation.get("metadata")
    shortened["metadata"] = (
        {**metadata, "truncated": True}
        if isinstance(metadata, dict)
        else {"truncated": True}
    )
    return shortened
