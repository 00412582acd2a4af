"""Walking a JSON Schema by keyword position: subschemas are rewritten, names and data never are.

A schema's keys are keywords, but the values of some keywords are maps whose keys are *names*
chosen by the user (``properties``, ``$defs``, …), and others are plain data (``enum``,
``const``, ``default``, ``examples``, ``required``). Post-processing that looks for a keyword
(``title``, ``$ref``, ``type``) must only look where a keyword can be: :func:`map_subschemas`
applies a function to each direct subschema of a schema and copies everything else unchanged,
so a property named ``title`` or ``$ref`` survives. Keyword lists follow JSON Schema 2020-12
(https://json-schema.org/draft/2020-12/json-schema-core) plus the draft-07 spellings
(``definitions``, ``dependencies``, ``additionalItems``, ``items`` as a list).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["SCHEMA_LISTS", "SCHEMA_MAPS", "SCHEMA_VALUES", "map_subschemas"]

SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
"""Keywords whose value maps user-chosen names to subschemas."""

SCHEMA_VALUES = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "propertyNames",
        "contains",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
"""Keywords whose value is one subschema (``items`` may also be a list, draft-07)."""

SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
"""Keywords whose value is a list of subschemas."""


def map_subschemas(schema: dict[str, Any], fn: Callable[[Any], Any]) -> dict[str, Any]:
    """A shallow copy of ``schema`` whose direct subschemas are replaced by ``fn(subschema)``.

    Names (the keys of ``properties``, ``$defs``, …) and data keywords (``enum``, ``const``,
    ``default``, ``examples``, ``required``, ``description``, ``title``, unknown keywords) are
    copied as they are. ``fn`` receives every subschema, booleans included.
    """
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in SCHEMA_MAPS and isinstance(value, dict):
            # ``dependencies`` (draft-07) may map a name to a list of names: data, kept as is
            out[key] = {n: fn(v) if isinstance(v, dict | bool) else v for n, v in value.items()}
        elif key in SCHEMA_VALUES and isinstance(value, dict | bool):
            out[key] = fn(value)
        elif (key in SCHEMA_LISTS or key == "items") and isinstance(value, list):
            out[key] = [fn(v) for v in value]
        else:
            out[key] = value
    return out
