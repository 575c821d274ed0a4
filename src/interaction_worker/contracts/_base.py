"""The base of every wire model: camelCase on the wire, snake_case in Python, absent fields omitted."""

from typing import Any, Self

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

    @classmethod
    def trusted(cls, **values: Any) -> Self:
        """Build from values a validator has already checked, as `model_construct` does, without its
        per-field work (it costs more than the whole validation on the hot path).

        The fields given are the fields set: only they are serialised (absent stays absent).
        """
        plan = _PLANS.get(cls) or _plan(cls)
        template, factories, allows_extra = plan
        # Serialisation follows the order of the model's __dict__: updating a copy of the template
        # keeps the declared order whatever the order of `values`.
        state = template.copy()
        extra = None
        if values.keys() <= template.keys():
            state.update(values)
            given = set(values)
        else:
            extra = {k: v for k, v in values.items() if k not in template}
            if not allows_extra:
                raise TypeError(f"{cls.__name__} has no fields {sorted(extra)}")
            given = set(values) - extra.keys()
            state.update((k, values[k]) for k in given)
        for name in factories:
            if name not in given:
                state[name] = cls.model_fields[name].get_default(
                    call_default_factory=True
                )
        model = cls.__new__(cls)
        _set(model, "__dict__", state)
        _set(model, "__pydantic_fields_set__", given)
        _set(
            model,
            "__pydantic_extra__",
            ({} if extra is None else extra) if allows_extra else None,
        )
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
# Per class, for `trusted` (filled on first use): every field in declared order with its default, the
# fields whose default is a factory's, and whether extra keys are kept. A module dict, not a class
# attribute: reading `cls.__dict__` builds a mapping proxy on every call.
_Plan = tuple[dict[str, Any], tuple[str, ...], bool]
_PLANS: dict[type[WireModel], _Plan] = {}


def _plan(cls: type[WireModel]) -> _Plan:
    fields = cls.model_fields
    plan = (
        {name: field.default for name, field in fields.items()},
        tuple(n for n, f in fields.items() if f.default_factory is not None),
        cls.model_config.get("extra") == "allow",
    )
    _PLANS[cls] = plan
    return plan
