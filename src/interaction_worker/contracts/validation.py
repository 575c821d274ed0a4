"""The reference's contract validators, check by check in its order and with its messages.

Each takes a JSON value as parsed from the bus (or built by a tool in Python) and returns the model, or
raises `ContractError`. pydantic gives types, serialisation and schemas; these functions give the order
of checks and the messages, and tell a key set to `null` from an absent one (reference section 2).
"""

from typing import Any

from ._checks import (
    MAX_ID_LENGTH,
    ContractError,
    identifier,
    json_object,
    json_value,
    nonempty,
)
from ._safety import is_safe_message
from ._text import JS_WHITESPACE
from .bus import ToolListRequest
from .common import (
    MESSAGE_ROLES,
    RESULT_STATUSES,
    ExternalResult,
    InteractionError,
    Message,
    Reference,
    ToolCall,
)
from .mcp import McpDiscoverInput, McpInvokeInput
from .output import RECEIPT_STATUSES, Artifact, OutputReceipt, OutputRequest

_CODE_CHARS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
)
_ABSENT: Any = object()
_CONTAINERS = (dict, list)  # a tuple: `dict | list` builds a union per call


def interaction_error(value: object) -> InteractionError:
    """Validate an InteractionError and project it to `code`, `message` and `retryable`."""
    if not isinstance(value, _CONTAINERS):
        raise ContractError("Interaction error is required")
    fields: dict[str, Any] = value if isinstance(value, dict) else {}
    code = nonempty(fields.get("code"), "error.code")
    message = nonempty(fields.get("message"), "error.message")
    if len(code) > 64 or not _CODE_CHARS.issuperset(code):
        raise ContractError("Invalid error code")
    if not is_safe_message(message):
        raise ContractError("Unsafe interaction error message")
    if "retryable" not in fields:
        return InteractionError.trusted(code=code, message=message)
    retryable = fields["retryable"]
    if not isinstance(retryable, bool):
        raise ContractError("error.retryable must be boolean")
    return InteractionError.trusted(code=code, message=message, retryable=retryable)


def external_result(
    value: object, fallback: InteractionError | None = None
) -> ExternalResult:
    """Validate an ExternalResult; with a `fallback`, an invalid or missing error is replaced by it."""
    if not isinstance(value, _CONTAINERS):
        raise ContractError("External result is required")
    fields: dict[str, Any] = value if isinstance(value, dict) else {}
    call_id = identifier(fields.get("callId"), "callId")
    source = nonempty(fields.get("source"), "source")
    return external_result_of(fields, call_id, source, fallback)


def external_result_of(
    fields: dict[str, Any],
    call_id: str,
    source: str,
    fallback: InteractionError | None = None,
) -> ExternalResult:
    """`external_result` after its `callId` and `source` checks: for a registry that sets both from a
    call it has validated, without copying the tool's outcome to add them."""
    return ExternalResult.trusted(**_result_fields(fields, call_id, source, fallback))


def external_result_document(
    fields: dict[str, Any], call_id: str, source: str
) -> dict[str, Any]:
    """`external_result_of`, as the wire document its model would serialise to (camelCase, absent
    fields omitted, declared order): for the bus, which publishes it without building the model."""
    if len(fields) == 2:
        # A text tool's success, `{"status": "success", "content": "…"}`, passes every check
        # below as it is when its content is ASCII (no lone surrogate): the same document, at once.
        status = fields.get("status")
        content = fields.get("content")
        if (
            type(status) is str
            and status == "success"
            and type(content) is str
            and content.isascii()
        ):
            return {
                "callId": call_id,
                "source": source,
                "status": status,
                "content": content,
            }
    built = _result_fields(fields, call_id, source, None)
    document: dict[str, Any] = {
        "callId": call_id,
        "source": source,
        "status": built["status"],
    }
    if "content" in built:
        document["content"] = built["content"]
    if "structured_content" in built:
        document["structuredContent"] = built["structured_content"]
    if "references" in built:
        document["references"] = [r.to_wire() for r in built["references"]]
    if "error" in built:
        document["error"] = built["error"].to_wire()
    if "metadata" in built:
        document["metadata"] = built["metadata"]
    return document


def _result_fields(
    fields: dict[str, Any],
    call_id: str,
    source: str,
    fallback: InteractionError | None,
) -> dict[str, Any]:
    status = fields.get("status")
    if not isinstance(status, str) or status not in RESULT_STATUSES:
        raise ContractError("Invalid external result status")
    error_value = fields.get("error", _ABSENT)
    if status == "success":
        if (
            "content" not in fields
            and "structuredContent" not in fields
            and "references" not in fields
        ):
            raise ContractError("Successful external result has no content")
    elif error_value is _ABSENT and fallback is None:
        raise ContractError("Interaction error is required")
    error: InteractionError | None = None
    if error_value is not _ABSENT:
        try:
            error = interaction_error(error_value)
        except ContractError:
            if fallback is None:
                raise
            error = fallback
    elif status != "success":
        error = fallback
    built: dict[str, Any] = {"call_id": call_id, "source": source, "status": status}
    for key, name in (
        ("content", "content"),
        ("structuredContent", "structured_content"),
    ):
        if key in fields:
            json_value(fields[key], key)
            built[name] = fields[key]
    if "metadata" in fields:
        json_value(fields["metadata"], "metadata")
    if "references" in fields:
        built["references"] = references(fields["references"])
    if error is not None:
        built["error"] = error
    if "metadata" in fields:
        built["metadata"] = fields["metadata"]
    return built


def references(value: object) -> list[Reference]:
    """The reference checks `uri`; beyond it, `mediaType` and `digest` must be strings when present
    (as for artifacts), and the whole must be JSON, so that what we publish matches the schema."""
    if not isinstance(value, list):
        raise ContractError("references must be an array")
    result: list[Reference] = []
    for item in value:
        if not isinstance(item, _CONTAINERS):
            raise ContractError("Invalid reference")
        fields: dict[str, Any] = item if isinstance(item, dict) else {}
        nonempty(fields.get("uri"), "reference.uri")
        result.append(_reference(fields, "reference"))
    return result


def _reference(fields: dict[str, Any], name: str) -> Reference:
    for key in ("mediaType", "digest"):
        if key in fields and not isinstance(fields[key], str):
            raise ContractError(f"{name}.{key} must be a string")
    json_value(fields, name)
    extra = {k: v for k, v in fields.items() if k not in ("uri", "mediaType", "digest")}
    built: dict[str, Any] = {"uri": fields["uri"]}
    if "mediaType" in fields:
        built["media_type"] = fields["mediaType"]
    if "digest" in fields:
        built["digest"] = fields["digest"]
    reference = Reference.trusted(**built)
    if extra:
        reference.__pydantic_extra__ = extra
    return reference


def tool_call(value: object) -> dict[str, Any]:
    """The checks of a tool call that come before the sandbox: the call, its id and its name.

    The reference checks only `call.id` here (a missing name reads as `tools:undefined` in the
    permission error); we also require a nonempty `call.name`. `call.arguments` is checked by the
    registry after the permission and existence checks, right before the tool's own `validate`.
    """
    if type(value) is dict:
        # Every check below at once, for the call that passes them (the bus's every call). An ASCII
        # string that is not all Python whitespace holds a character JavaScript does not trim.
        call_id = value.get("id")
        name = value.get("name")
        if (
            type(call_id) is str
            and type(name) is str
            and 0 < len(call_id) <= MAX_ID_LENGTH
            and name
            and (
                (call_id.isascii() and not call_id.isspace())
                or call_id.strip(JS_WHITESPACE)
            )
            and ((name.isascii() and not name.isspace()) or name.strip(JS_WHITESPACE))
        ):
            return value
    call = json_object(value, "call")
    identifier(call.get("id"), "call.id")
    nonempty(call.get("name"), "call.name")
    return call


def tool_list_request(value: object) -> ToolListRequest:
    """The body of `P.tool.list`: `{}`, or `{"name"}` naming one tool. Other keys are dropped."""
    fields = json_object(value, "tool list input")
    if "name" not in fields:
        return ToolListRequest.trusted()
    name = fields["name"]
    if not isinstance(name, str) or not 1 <= len(name) <= 64 or not name.strip():
        raise ContractError("name must be a tool name")
    return ToolListRequest.trusted(name=name)


def tool_call_model(call: dict[str, Any], arguments: dict[str, Any]) -> ToolCall:
    return ToolCall.trusted(id=call["id"], name=call["name"], arguments=arguments)


def mcp_input(value: object) -> McpDiscoverInput | McpInvokeInput:
    """Reference `validateMcpInput`, plus the id length rule on `server` and `call.id`."""
    fields = json_object(value, "MCP input")
    operation = fields.get("operation")
    if operation == "discover":
        if "server" not in fields:
            return McpDiscoverInput.trusted(operation="discover")
        server = identifier(fields["server"], "server")
        return McpDiscoverInput.trusted(operation="discover", server=server)
    if operation == "invoke":
        server = identifier(fields.get("server"), "server")
        call = json_object(fields.get("call"), "call")
        identifier(call.get("id"), "call.id")
        nonempty(call.get("name"), "call.name")
        arguments = json_object(call.get("arguments"), "call.arguments")
        json_value(arguments, "call.arguments")
        return McpInvokeInput.trusted(
            operation="invoke", server=server, call=tool_call_model(call, arguments)
        )
    raise ContractError("Invalid MCP operation")


def output_request(value: object) -> OutputRequest:
    """Reference `validateOutputInput`, plus the id length rule on `deliveryId`."""
    fields = json_object(value, "OUTPUT input")
    delivery_id = identifier(fields.get("deliveryId"), "deliveryId")
    message = json_object(fields.get("message"), "message")
    role = message.get("role")
    if not isinstance(role, str) or role not in MESSAGE_ROLES:
        raise ContractError("Invalid message role")
    if "content" not in message:
        raise ContractError("message.content is required")
    json_value(message["content"], "message.content")
    if "name" in message and not isinstance(message["name"], str):
        raise ContractError("message.name must be a string")
    built: dict[str, Any] = {"delivery_id": delivery_id, "message": _message(message)}
    if "artifacts" in fields:
        built["artifacts"] = artifacts(fields["artifacts"])
    return OutputRequest.trusted(**built)


def _message(fields: dict[str, Any]) -> Message:
    extra = {k: v for k, v in fields.items() if k not in ("role", "content", "name")}
    if extra:
        json_value(extra, "message")
    built: dict[str, Any] = {"role": fields["role"], "content": fields["content"]}
    if "name" in fields:
        built["name"] = fields["name"]
    message = Message.trusted(**built)
    if extra:
        message.__pydantic_extra__ = extra
    return message


def artifacts(value: object) -> list[Artifact]:
    if not isinstance(value, list):
        raise ContractError("artifacts must be an array")
    result: list[Artifact] = []
    for item in value:
        artifact = json_object(item, "artifact")
        name = nonempty(artifact.get("name"), "artifact.name")
        reference = json_object(artifact.get("reference"), "artifact.reference")
        nonempty(reference.get("uri"), "artifact.reference.uri")
        built = Artifact.trusted(
            name=name, reference=_reference(reference, "artifact.reference")
        )
        extra = {k: v for k, v in artifact.items() if k not in ("name", "reference")}
        if extra:
            json_value(extra, "artifact")
            built.__pydantic_extra__ = extra
        result.append(built)
    return result


def output_receipt(value: object) -> OutputReceipt:
    """Reference `outputReceipt`: an unsafe error is refused (OUTPUT has no fallback)."""
    fields = json_object(value, "Output receipt")
    delivery_id = nonempty(fields.get("deliveryId"), "deliveryId")
    status = fields.get("status")
    if not isinstance(status, str) or status not in RECEIPT_STATUSES:
        raise ContractError("Invalid output status")
    if status != "accepted" and "error" not in fields:
        raise ContractError("Interaction error is required")
    built: dict[str, Any] = {"delivery_id": delivery_id, "status": status}
    if "error" in fields:
        built["error"] = interaction_error(fields["error"])
    if "metadata" in fields:
        metadata = json_object(fields["metadata"], "metadata")
        json_value(metadata, "metadata")
        built["metadata"] = metadata
    if "artifacts" in fields:
        built["artifacts"] = artifacts(fields["artifacts"])
    return OutputReceipt.trusted(**built)
