"""A fluent JSON Schema builder (docs/concepts.md: Tools).

Every builder method returns the builder; ``.build()`` returns the schema as a plain ``dict``
(JSON Schema draft 2020-12 keywords). Objects are closed (``additionalProperties: false``) unless
``.additional(True)`` is called, which is what strict tool-calling providers expect.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Self

__all__ = [
    "Schema",
    "any_of",
    "array",
    "boolean",
    "enum",
    "integer",
    "null",
    "number",
    "object",
    "raw",
    "string",
]


class Schema:
    """A schema under construction. Subclasses add keyword-specific methods."""

    __slots__ = ("_s",)

    def __init__(self, base: dict[str, Any] | None = None) -> None:
        self._s: dict[str, Any] = dict(base or {})

    def description(self, text: str) -> Self:
        """Set ``description``: what the value means, shown to the model."""
        self._s["description"] = text
        return self

    def title(self, text: str) -> Self:
        """Set ``title``."""
        self._s["title"] = text
        return self

    def default(self, value: Any) -> Self:
        """Set ``default`` (documentation only: validation does not fill defaults in)."""
        self._s["default"] = value
        return self

    def examples(self, *values: Any) -> Self:
        """Set ``examples``."""
        self._s["examples"] = list(values)
        return self

    def nullable(self) -> Self:
        """Also accept ``null``."""
        t = self._s.get("type")
        if isinstance(t, str):
            self._s["type"] = [t, "null"]
        elif isinstance(t, list) and "null" not in t:
            t.append("null")
        elif t is None:
            self._s = {"anyOf": [self._s, {"type": "null"}]}
        return self

    def extra(self, key: str, value: Any) -> Self:
        """Set any other keyword."""
        self._s[key] = value
        return self

    def build(self) -> dict[str, Any]:
        """The schema as a plain dict (a copy)."""
        copied: dict[str, Any] = _deep_copy(self._s)
        return copied


class StringSchema(Schema):
    __slots__ = ()

    def min_length(self, n: int) -> Self:
        self._s["minLength"] = n
        return self

    def max_length(self, n: int) -> Self:
        self._s["maxLength"] = n
        return self

    def pattern(self, regex: str) -> Self:
        self._s["pattern"] = regex
        return self

    def format(self, name: str) -> Self:
        """``format`` (``"date-time"``, ``"uri"``, …); annotation only unless the validator asserts it."""
        self._s["format"] = name
        return self


class NumberSchema(Schema):
    __slots__ = ()

    def minimum(self, n: float) -> Self:
        self._s["minimum"] = n
        return self

    def maximum(self, n: float) -> Self:
        self._s["maximum"] = n
        return self

    def exclusive_minimum(self, n: float) -> Self:
        self._s["exclusiveMinimum"] = n
        return self

    def exclusive_maximum(self, n: float) -> Self:
        self._s["exclusiveMaximum"] = n
        return self

    def multiple_of(self, n: float) -> Self:
        self._s["multipleOf"] = n
        return self


class ArraySchema(Schema):
    __slots__ = ()

    def min_items(self, n: int) -> Self:
        self._s["minItems"] = n
        return self

    def max_items(self, n: int) -> Self:
        self._s["maxItems"] = n
        return self

    def unique(self) -> Self:
        self._s["uniqueItems"] = True
        return self


class ObjectSchema(Schema):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__({"type": "object", "properties": {}, "required": [], "additionalProperties": False})

    def required(self, name: str, schema: Schema | dict[str, Any]) -> Self:
        """Add a required property."""
        self._s["properties"][name] = _as_dict(schema)
        if name not in self._s["required"]:
            self._s["required"].append(name)
        return self

    def optional(self, name: str, schema: Schema | dict[str, Any]) -> Self:
        """Add an optional property."""
        self._s["properties"][name] = _as_dict(schema)
        return self

    def additional(self, allowed: bool | Schema | dict[str, Any] = True) -> Self:
        """Allow (or describe) properties not listed."""
        self._s["additionalProperties"] = allowed if isinstance(allowed, bool) else _as_dict(allowed)
        return self


def string() -> StringSchema:
    """``{"type": "string"}``."""
    return StringSchema({"type": "string"})


def integer() -> NumberSchema:
    """``{"type": "integer"}``."""
    return NumberSchema({"type": "integer"})


def number() -> NumberSchema:
    """``{"type": "number"}``."""
    return NumberSchema({"type": "number"})


def boolean() -> Schema:
    """``{"type": "boolean"}``."""
    return Schema({"type": "boolean"})


def null() -> Schema:
    """``{"type": "null"}``."""
    return Schema({"type": "null"})


def array(items: Schema | dict[str, Any] | None = None) -> ArraySchema:
    """``{"type": "array", "items": ...}``."""
    s: dict[str, Any] = {"type": "array"}
    if items is not None:
        s["items"] = _as_dict(items)
    return ArraySchema(s)


def object() -> ObjectSchema:
    """A closed object; add properties with ``.required`` / ``.optional``."""
    return ObjectSchema()


def enum(values: Iterable[Any]) -> Schema:
    """``{"enum": [...]}``, with ``type`` when every value is a string."""
    vals = list(values)
    s: dict[str, Any] = {"enum": vals}
    if vals and all(isinstance(v, str) for v in vals):
        s["type"] = "string"
    return Schema(s)


def any_of(*schemas: Schema | dict[str, Any]) -> Schema:
    """``{"anyOf": [...]}``."""
    return Schema({"anyOf": [_as_dict(s) for s in schemas]})


def raw(schema: dict[str, Any]) -> Schema:
    """Wrap a schema written by hand."""
    return Schema(schema)


def _as_dict(schema: Schema | dict[str, Any]) -> dict[str, Any]:
    return schema.build() if isinstance(schema, Schema) else _deep_copy(schema)


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value
