"""The base of every wire model: camelCase on the wire, snake_case in Python, absent fields omitted."""

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    """A payload of the wire contract.

    Serialise with `to_wire()` / `to_json()`: they omit fields that were never set, and keep a field set
    to `None` (a JSON `null` is a value, e.g. `content: null`).
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",
    )

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        # Frameworks that serialise models themselves (FastStream) must not turn "absent" into null.
        kwargs.setdefault("by_alias", True)
        kwargs.setdefault("exclude_unset", True)
        return super().model_dump(**kwargs)

    def model_dump_json(self, **kwargs: Any) -> str:
        kwargs.setdefault("by_alias", True)
        kwargs.setdefault("exclude_unset", True)
        return super().model_dump_json(**kwargs)

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def to_json(self) -> bytes:
        return self.__pydantic_serializer__.to_json(
            self, by_alias=True, exclude_unset=True
        )
