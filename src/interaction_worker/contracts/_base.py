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

    # Per class, for `trusted` (filled on first use): the fields in order with their defaults
    # (a factory's result is made per model), and whether extra keys are kept.
    _trusted_plan: ClassVar[tuple[tuple[tuple[str, Any, bool], ...], bool] | None] = (
        None
    )

    @classmethod
    def trusted(cls, **values: Any) -> Self:
        """Build from values a validator has already checked, as `model_construct` does, without its
        per-field work (it costs more than the whole validation on the hot path).

        The fields given are the fields set: only they are serialised (absent stays absent).
        """
        plan = cls.__dict__.get("_trusted_plan")
        if plan is None:
            plan = (
                tuple(
                    (name, field, field.default_factory is not None)
                    for name, field in cls.model_fields.items()
                ),
                cls.model_config.get("extra") == "allow",
            )
            cls._trusted_plan = plan
        fields, allows_extra = plan
        # Serialisation follows the order of the model's __dict__: keep the declared order.
        state: dict[str, Any] = {}
        given: set[str] = set()
        for name, field, has_factory in fields:
            if name in values:
                state[name] = values.pop(name)
                given.add(name)
            elif has_factory:
                state[name] = field.get_default(call_default_factory=True)
            else:
                state[name] = field.default
        if values and not allows_extra:
            raise TypeError(f"{cls.__name__} has no fields {sorted(values)}")
        model = cls.__new__(cls)
        _set(model, "__dict__", state)
        _set(model, "__pydantic_fields_set__", given)
        _set(model, "__pydantic_extra__", values if allows_extra else None)
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
