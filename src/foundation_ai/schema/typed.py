"""JSON Schemas from Python types, and JSON values decoded back into them.

Works for what ``msgspec`` describes (``msgspec.Struct``, dataclasses, ``TypedDict``,
``NamedTuple``, ``list[...]``, ``Literal``, ``enum.Enum``, primitives, ``X | None``, unions of
Structs, ``datetime``, ``UUID``…) and for pydantic models anywhere inside them when pydantic is
installed (never required): msgspec asks pydantic for the schema of a model and hands it the
decoded object to validate (``model_validate``), so a ``list[Invoice]`` of pydantic models works.

- :func:`type_schema`: the schema of a type, every local ``$ref`` inlined (a recursive type keeps
  its ``$defs``).
- :func:`decode_as`: a JSON value (text or already parsed) as an instance of the type.
- :func:`inline_refs`: replace local ``$ref`` by their definitions, keyword-aware: a property
  named ``title``, ``$ref`` or ``properties`` is a name, never a keyword.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..errors import ConfigurationError

__all__ = [
    "decode_as",
    "inline_refs",
    "is_pydantic_model",
    "pydantic_dec_hook",
    "pydantic_schema_hook",
    "type_schema",
]

_MAPS = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def is_pydantic_model(tp: Any) -> bool:
    """True for a pydantic ``BaseModel`` subclass (False when pydantic is not installed or was
    never imported: a pydantic model cannot exist without it)."""
    import sys

    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(tp, type):
        return False
    return issubclass(tp, pydantic.BaseModel)


def pydantic_schema_hook(tp: Any) -> dict[str, Any]:
    """``schema_hook`` for ``msgspec.json.schema``: a pydantic model's schema, refs inlined.

    A recursive model keeps its own ``$defs`` (embedded in msgspec's schema, its references
    still resolve there: see :func:`foundation_ai.schema.refs.self_contained`).

    Raises:
        NotImplementedError: ``tp`` is not a pydantic model (msgspec's protocol).
    """
    if is_pydantic_model(tp):
        raw = tp.model_json_schema()
        inlined = inline_refs(raw)
        if "$ref" in _all_refs(inlined):
            return raw  # type: ignore[no-any-return]
        return inlined
    raise NotImplementedError(f"no JSON Schema for {tp!r}")


def pydantic_dec_hook(tp: Any, obj: Any) -> Any:
    """``dec_hook`` for msgspec decoding: ``model_validate`` for a pydantic model.

    Raises:
        ValueError: the model rejects ``obj`` (every pydantic error, with its location).
        NotImplementedError: ``tp`` is not a pydantic model (msgspec's protocol).
    """
    if is_pydantic_model(tp):
        import pydantic

        try:
            return tp.model_validate(obj)
        except pydantic.ValidationError as exc:
            lines = [
                f"{'.'.join(str(p) for p in e['loc']) or '$'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            ]
            raise ValueError("; ".join(lines)) from None
    raise NotImplementedError(f"cannot decode {tp!r}")


def _all_refs(node: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            out.add("$ref")
        for v in node.values():
            out |= _all_refs(v)
    elif isinstance(node, list):
        for v in node:
            out |= _all_refs(v)
    return out


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) replaced by its
    definition and ``$defs`` dropped; keywords are told from property names by position (the
    values of ``properties``, ``$defs``… are maps of names to schemas). A recursive type is
    returned unchanged.
    """
    defs: dict[str, Any] = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}

    def target(ref: str) -> str | None:
        for prefix in ("#/$defs/", "#/definitions/"):
            if ref.startswith(prefix):
                return ref[len(prefix) :]
        return None

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = target(ref)
            if name is None or name in seen or name not in defs:
                raise RecursionError(ref)
            inner = walk(defs[name], (*seen, name))
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return {**inner, **walk(rest, seen)}
        out: dict[str, Any] = {}
        for k, v in node.items():
            if k in ("$defs", "definitions"):
                continue
            if k in _MAPS and isinstance(v, dict):
                out[k] = {name: walk(s, seen) for name, s in v.items()}
            elif k in _LISTS and isinstance(v, list):
                out[k] = [walk(s, seen) for s in v]
            elif k in (
                "items",
                "additionalProperties",
                "not",
                "if",
                "then",
                "else",
                "contains",
                "propertyNames",
            ):
                out[k] = walk(v, seen)
            else:
                out[k] = v
        return out

    try:
        result: dict[str, Any] = walk(schema, ())
        return result
    except RecursionError:
        return schema


def type_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of ``tp`` with local refs inlined (:func:`inline_refs`).

    Raises:
        ConfigurationError: msgspec (or pydantic) cannot describe ``tp``.
    """
    try:
        raw = msgspec.json.schema(tp, schema_hook=pydantic_schema_hook)
    except ConfigurationError:
        raise
    except (TypeError, ValueError, NotImplementedError) as exc:
        import importlib.util

        missing = importlib.util.find_spec("pydantic") is None
        hint = " (install pydantic for pydantic models)" if missing else ""
        raise ConfigurationError(f"cannot describe {tp!r} as a JSON Schema: {exc}{hint}") from exc
    return inline_refs(raw)


def decode_as(value: bytes | str | Any, tp: Any, *, parsed: bool = False) -> Any:
    """``value`` as an instance of ``tp``: JSON text (``parsed=False``) or an already parsed
    value (``parsed=True``), with the same rules as msgspec (no lax string-to-number casts)
    and pydantic validation for pydantic models.

    Raises:
        msgspec.ValidationError: the value does not match ``tp`` (the message names the path,
            e.g. ``"Expected `int`, got `str` - at `$.total`"``).
        msgspec.DecodeError: ``value`` is not JSON.
    """
    if parsed:
        return msgspec.convert(value, tp, dec_hook=pydantic_dec_hook)
    return msgspec.json.decode(value, type=tp, dec_hook=pydantic_dec_hook)
