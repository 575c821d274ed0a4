"""JSON Schemas of the wire payloads, generated from the contract models (wire.md section 9).

One schema per payload, named as in `interaction_worker.contracts` and written to `<name>.schema.json`.
Each schema is generated in the mode of the payload's direction: what the worker receives
(`ToolCallRequest`, `McpInput`, `ObserveRequest`, `OutputRequest`, `ToolListRequest`) in pydantic's "validation" mode, what it
publishes (`ExternalResult`, `McpOutput`, `Observation`, `OutputReceipt`, `ErrorReply`, `DeadLetter`,
`McpCapability`, `ToolDefinition`, `ToolList`) in "serialization" mode. The building blocks that travel both ways
(`InteractionError`, `Reference`, `Message`, `Artifact`) use "validation" mode: the worker publishes only
what passed their validation. Every schema carries `$schema` (draft 2020-12) and a `title` equal to the
payload's name, unique across the files, which identifies it as an `$id` would.

Three adjustments make pydantic's output say what the wire says (wire.md section 1):

- An optional field whose Python default is `None` is *absent* on the wire, never `null`: its schema is the
  field's type without the `null` branch and without `default: null`. Fields whose type admits `null` as a
  value (`content`, `structuredContent`, `metadata`: any JSON value) keep admitting it.
- A field typed with a single literal (the `operation` of the MCP union) is required: its Python default
  is a convenience, the wire names the operation in every payload.
- Property titles derived from field names (`Callid`) are left out; model titles stay.

A schema describes the shape only. The validators in `contracts.validation` add what JSON Schema cannot
say (blank strings, the safety rule of error messages, JSON depth) and fix the order of the checks and
their messages.
"""

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import CoreSchema, PydanticUndefined, core_schema

from .contracts import (
    Artifact,
    CommandCatalogReply,
    CommandCatalogRequest,
    CommandReply,
    CommandRequest,
    DeadLetter,
    ErrorReply,
    ExternalResult,
    InteractionError,
    McpCapability,
    McpDiscoverInput,
    McpDiscoverOutput,
    McpInput,
    McpInvokeInput,
    McpInvokeOutput,
    McpOutput,
    Message,
    Observation,
    ObserveRequest,
    OutputReceipt,
    OutputRequest,
    Reference,
    ToolCallRequest,
    ToolDefinition,
    ToolList,
    ToolListRequest,
)

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_SUFFIX = ".schema.json"

_Mode = Literal["validation", "serialization"]

# mypy's reading of an `Annotated[A | B, ...]` alias used as a value varies (a UnionType or a type
# form): `cast` keeps the check stable whichever it is.
_MCP_INPUT: TypeAdapter[McpDiscoverInput | McpInvokeInput] = TypeAdapter(
    cast(Any, McpInput)
)
_MCP_OUTPUT: TypeAdapter[McpDiscoverOutput | McpInvokeOutput] = TypeAdapter(
    cast(Any, McpOutput)
)

_PAYLOADS: tuple[tuple[str, type[BaseModel] | TypeAdapter[Any], _Mode], ...] = (
    ("ToolCallRequest", ToolCallRequest, "validation"),
    ("McpInput", _MCP_INPUT, "validation"),
    ("ObserveRequest", ObserveRequest, "validation"),
    ("OutputRequest", OutputRequest, "validation"),
    ("ToolListRequest", ToolListRequest, "validation"),
    ("CommandRequest", CommandRequest, "validation"),
    ("CommandCatalogRequest", CommandCatalogRequest, "validation"),
    ("ExternalResult", ExternalResult, "serialization"),
    ("McpOutput", _MCP_OUTPUT, "serialization"),
    ("Observation", Observation, "serialization"),
    ("OutputReceipt", OutputReceipt, "serialization"),
    ("ErrorReply", ErrorReply, "serialization"),
    ("DeadLetter", DeadLetter, "serialization"),
    ("McpCapability", McpCapability, "serialization"),
    ("ToolDefinition", ToolDefinition, "serialization"),
    ("ToolList", ToolList, "serialization"),
    ("CommandReply", CommandReply, "serialization"),
    ("CommandCatalogReply", CommandCatalogReply, "serialization"),
    ("InteractionError", InteractionError, "validation"),
    ("Reference", Reference, "validation"),
    ("Message", Message, "validation"),
    ("Artifact", Artifact, "validation"),
)


class _WireJsonSchema(GenerateJsonSchema):
    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        if schema.get("default", PydanticUndefined) is not None:
            return super().default_schema(schema)
        inner: CoreSchema = schema["schema"]
        if inner["type"] == "nullable":
            inner = inner["schema"]
        return self.generate_inner(inner)

    def field_is_required(
        self,
        field: core_schema.ModelField
        | core_schema.DataclassField
        | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        inner = field["schema"]
        if (
            inner["type"] == "default"
            and inner["schema"]["type"] == "literal"
            and len(inner["schema"]["expected"]) == 1
        ):
            return True
        return super().field_is_required(field, total)

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def wire_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of every wire payload, by payload name."""
    schemas: dict[str, dict[str, Any]] = {}
    for name, source, mode in _PAYLOADS:
        if isinstance(source, TypeAdapter):
            generated = source.json_schema(
                by_alias=True, mode=mode, schema_generator=_WireJsonSchema
            )
        else:
            generated = source.model_json_schema(
                by_alias=True, mode=mode, schema_generator=_WireJsonSchema
            )
        schemas[name] = {"$schema": JSON_SCHEMA_DIALECT, **generated, "title": name}
    return schemas


def schema_text(schema: dict[str, Any]) -> str:
    """A schema as its file holds it: sorted keys, indent 2, UTF-8 text, trailing newline."""
    return json.dumps(schema, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


# A file this large is no document this package wrote; it is not read to find out.
_LARGEST_OWN = 16 * 1024 * 1024


class NotOurs(Exception):
    """A file `write_documents` would replace holds something it did not write: it is left alone.

    Attributes:
        path: that file.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} is not a document this command wrote")
        self.path = path


Document = tuple[str, Callable[[Any], bool]]
"""A file's text, and how to recognise an earlier version of it (its parsed JSON) as one's own."""


def write_documents(directory: Path, documents: Mapping[str, Document]) -> list[Path]:
    """Write each document to `directory/<file name>`, creating the directory; returns the paths.

    A file already there is replaced only when its JSON is recognised as an earlier version of the
    same document; otherwise nothing at all is written. Each file is written beside its name and
    renamed onto it, so an interrupted write leaves the earlier file, never half of the new one.
    Files of other names are never touched (a schema of a payload that no longer exists stays).

    Raises:
        NotOurs: a file of one of these names holds something else.
        OSError: the directory or a file cannot be written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    paths = {directory / name: document for name, document in documents.items()}
    for path, (_, ours) in paths.items():
        if path.exists() and not ours(_read_json(path)):
            raise NotOurs(path)
    for path, (text, _) in paths.items():
        _replace(path, text)
    return sorted(paths)


def write_schemas(directory: Path) -> list[Path]:
    """Write `<name>.schema.json` for every payload (`write_documents`)."""
    return write_documents(
        directory,
        {
            f"{name}{SCHEMA_SUFFIX}": (schema_text(schema), titled(name))
            for name, schema in wire_schemas().items()
        },
    )


def titled(name: str) -> Callable[[Any], bool]:
    """Recognises a schema this package wrote for `name`: the dialect, and the payload's name as
    its title."""

    def ours(document: Any) -> bool:
        return (
            isinstance(document, dict)
            and document.get("$schema") == JSON_SCHEMA_DIALECT
            and document.get("title") == name
        )

    return ours


def _read_json(path: Path) -> Any:
    """The file's JSON, or None for anything else (too large, unreadable, not JSON)."""
    try:
        if path.stat().st_size > _LARGEST_OWN:
            return None
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _replace(path: Path, text: str) -> None:
    fd, aside = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # as a plain open() would create it
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(aside, path)
    except BaseException:
        Path(aside).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
