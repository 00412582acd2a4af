"""Compiling schemas and collecting violations with jsonschema-rs."""

from __future__ import annotations

from typing import Any, Protocol

from ..errors import ConfigurationError, SchemaViolation

__all__ = ["Validator", "compile_schema", "json_path", "violations_of"]


class Validator(Protocol):
    """A compiled schema (``jsonschema_rs`` validator)."""

    def is_valid(self, instance: Any) -> bool: ...
    def iter_errors(self, instance: Any) -> Any: ...


def compile_schema(schema: dict[str, Any]) -> Validator:
    """Compile a JSON Schema once (draft chosen by ``$schema``, default 2020-12). A ``$ref`` to
    another document is never fetched (jsonschema-rs would, by default: a request forgery from
    whoever wrote the schema); only references inside it resolve (``docs/tools.md``).

    Raises:
        ConfigurationError: the schema itself is invalid, or refers to another document.
    """
    import jsonschema_rs  # imported on first use: keeps `import foundation_ai` fast

    try:
        return jsonschema_rs.validator_for(schema, retriever=_never_fetch)  # type: ignore[no-any-return,unused-ignore]
    except (jsonschema_rs.ValidationError, ValueError, TypeError) as exc:
        raise ConfigurationError(f"invalid JSON Schema: {exc}") from exc


def _never_fetch(uri: str) -> Any:
    """jsonschema-rs's ``retriever``: every remote document is refused."""
    raise ValueError(f"the schema refers to {uri}, which is never fetched")


def json_path(parts: Any) -> str:
    """Render a path (a sequence of keys and indices) as ``$.a[0].b``."""
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def violations_of(validator: Validator, instance: Any) -> list[SchemaViolation]:
    """Every violation of ``instance`` against ``validator``, in the validator's order.

    A fast path returns ``[]`` without building errors when the instance is valid.
    """
    if validator.is_valid(instance):
        return []
    return [
        SchemaViolation(json_path(e.instance_path), e.message, json_path(e.schema_path))
        for e in validator.iter_errors(instance)
    ]
