"""A call's outcome as the MCP `CallToolResult` a host reads (docs/gateway.md, "What a host gets").

- `content`: a string is one text item; a list gives one item per element: a string is a text item,
  a text, image, audio, resource (embedded) or resource_link item passes through as it is, a message part of type `reference` becomes
  what the MCP adapter made it from (an image or audio item for a `data:` URI of that media type, an
  embedded resource for one with `text` or `blob`, else a `resource_link`), a `json` part and any
  other JSON become one text item holding its JSON. Each of the result's `references` is a
  `resource_link`.
- `structuredContent` as it is (a host of the 2025 protocol takes only an object: anything else is
  a JSON text item there); when the result has no content it is also a JSON text item, as the MCP
  specification recommends for hosts that do not read it.
- `isError`: false for `success`; true for `failed`, `timeout`, `cancelled` and `unknown`, whose
  code and message come first as text (`TOOL_TIMEOUT: …`), and for a refusal.
- `_meta`: `interaction/callId` and `interaction/status` (the result's status, or `refused`).
"""

import json
from collections.abc import Mapping
from typing import Any, cast

import mcp_types as types
from pydantic import JsonValue, TypeAdapter, ValidationError

from ..contracts import ExternalResult, Reference

CALL_ID = "interaction/callId"
STATUS = "interaction/status"
REFUSED = "refused"

_PASSING = frozenset(("text", "image", "audio", "resource", "resource_link"))
_MEDIA = ("image", "audio")
# A union alias as a value: `cast` keeps mypy's reading of it stable (as schema.py does).
_BLOCK: TypeAdapter[types.ContentBlock] = TypeAdapter(cast(Any, types.ContentBlock))


def call_result(
    result: ExternalResult, *, object_only: bool = False
) -> types.CallToolResult:
    """`result` for a host; `object_only`: the host's protocol takes only an object as
    `structuredContent` (2025-11-25 and before)."""
    items = content_items(result.content)
    items.extend(_link(reference) for reference in result.references or ())
    structured = result.structured_content
    if structured is not None:
        if object_only and not isinstance(structured, dict):
            items.append(_json_text(structured))
            structured = None
        elif not items:
            items.append(_json_text(structured))
    failed = result.status != "success"
    if failed:
        if result.error is not None:
            first = f"{result.error.code}: {result.error.message}"
        else:
            first = f"{result.status.upper()}: the call ended {result.status}"
        items.insert(0, types.TextContent(text=first))
    return types.CallToolResult(
        content=items,
        structured_content=structured,
        is_error=failed,
        _meta={CALL_ID: result.call_id, STATUS: result.status},
    )


def tool_error(
    call_id: str, code: str, message: str, *, status: str = REFUSED
) -> types.CallToolResult:
    """A call that has no result to show (refused, or not answered in time): `CODE: message`."""
    return types.CallToolResult(
        content=[types.TextContent(text=f"{code}: {message}")],
        is_error=True,
        _meta={CALL_ID: call_id, STATUS: status},
    )


def content_items(content: JsonValue) -> list[types.ContentBlock]:
    if content is None:
        return []
    if isinstance(content, str):
        return [types.TextContent(text=content)]
    if isinstance(content, list):
        return [_item(element) for element in content]
    return [_json_text(content)]


def _item(element: JsonValue) -> types.ContentBlock:
    if isinstance(element, str):
        return types.TextContent(text=element)
    if isinstance(element, dict):
        kind = element.get("type")
        built: types.ContentBlock | None = None
        if isinstance(kind, str) and kind in _PASSING:
            built = _block(element)
        elif kind == "reference" and isinstance(element.get("reference"), dict):
            built = _from_reference(element["reference"])  # type: ignore[arg-type]
        elif kind == "json" and "data" in element:
            return _json_text(element["data"])
        if built is not None:
            return built
    return _json_text(element)


def _from_reference(fields: Mapping[str, Any]) -> types.ContentBlock | None:
    """The MCP block the adapter turned into this reference (mcp/adapter.py), or a resource link."""
    uri, media = fields.get("uri"), fields.get("mediaType")
    if not isinstance(uri, str):
        return None
    kind = media.split("/", 1)[0] if isinstance(media, str) else None
    if kind in _MEDIA and uri.startswith(f"data:{media};base64,"):
        data = uri.removeprefix(f"data:{media};base64,")
        return _block({"type": kind, "data": data, "mimeType": media})
    for body in ("text", "blob"):
        if isinstance(fields.get(body), str):
            resource: dict[str, Any] = {"uri": uri, body: fields[body]}
            if isinstance(media, str):
                resource["mimeType"] = media
            return _block({"type": "resource", "resource": resource})
    return _block(_link_fields(fields))


def _link(reference: Reference) -> types.ContentBlock:
    fields = reference.model_dump(mode="json", by_alias=True, exclude_none=True)
    built = _block(_link_fields(fields))
    return built if built is not None else _json_text(fields)


def _link_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    uri = fields.get("uri")
    name = fields.get("name")
    link: dict[str, Any] = {
        "type": "resource_link",
        "uri": uri,
        "name": name if isinstance(name, str) else uri,
    }
    if isinstance(fields.get("mediaType"), str):
        link["mimeType"] = fields["mediaType"]
    for key in ("title", "description", "size"):
        if key in fields:
            link[key] = fields[key]
    return link


def _block(fields: Mapping[str, Any]) -> types.ContentBlock | None:
    """`fields` as the MCP content block their `type` names, or None when they do not make one
    (the caller shows them as JSON)."""
    try:
        return _BLOCK.validate_python(fields, by_name=False)
    except ValidationError:
        return None


def _json_text(value: object) -> types.TextContent:
    return types.TextContent(text=json.dumps(value, ensure_ascii=False))
