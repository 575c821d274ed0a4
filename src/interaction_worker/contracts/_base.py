"""The base of every wire model: camelCase on the wire, snake_case in Python, absent fields omitted."""

from typing import Any, ClassVar, Self

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

    # Per class, for `trusted` (filled on first use): plain defaults, and fields with a factory.
    _trusted_defaults: ClassVar[tuple[dict[str, Any], tuple[str, ...], bool] | None] = (
        None
    )

    @classmethod
    def trusted(cls, **values: Any) -> Self:
        """Build from values a validator has already checked, as `model_construct` does, without its
        per-field work (it costs more than the whole validation on the hot path).

        The fields given are the fields set: only they are serialised (absent stays absent).
        """
        prepared = cls.__dict__.get("_trusted_defaults")
        if prepared is None:
            fields = cls.model_fields
            prepared = (
                {
                    name: field.default
                    for name, field in fields.items()
                    if not field.is_required() and field.default_factory is None
                },
                tuple(n for n, f in fields.items() if f.default_factory is not None),
                cls.model_config.get("extra") == "allow",
            )
            cls._trusted_defaults = prepared
        defaults, factories, allows_extra = prepared
        model = cls.__new__(cls)
        state = dict(defaults)
        for name in factories:
            if name not in values:
                state[name] = cls.model_fields[name].get_default(
                    call_default_factory=True
                )
        extra: dict[str, Any] | None = None
        if allows_extra:
            extra = {}
            known = defaults.keys() | set(factories) | cls.__pydantic_fields__.keys()
            for name in [n for n in values if n not in known]:
                extra[name] = values.pop(name)
        state.update(values)
        _set(model, "__dict__", state)
        _set(model, "__pydantic_fields_set__", set(values))
        _set(model, "__pydantic_extra__", extra)
        _set(model, "__pydantic_private__", None)
        return model

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


_set = object.__setattr__
