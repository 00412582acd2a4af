"""JSON Schema building and validation (docs/concepts.md: Tools).

``scheme`` builds schemas fluently; :func:`validate` checks a value against a compiled schema
with ``jsonschema-rs`` and reports **every** violation with its JSON path::

    from foundation_ai.schema import scheme
    schema = (
        scheme.object()
        .required("q", scheme.string().description("The search query").min_length(1))
        .optional("limit", scheme.integer().minimum(1).default(10))
        .build()
    )
"""

from __future__ import annotations

from . import scheme
from ._validate import Validator, compile_schema, violations_of

__all__ = ["Validator", "compile_schema", "scheme", "violations_of"]
