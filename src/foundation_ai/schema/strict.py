"""Strict structured-output schemas: make one from any JSON Schema, and check one.

Providers that constrain decoding to a schema accept only a subset of JSON Schema:

- OpenAI Structured Outputs (https://platform.openai.com/docs/guides/structured-outputs,
  "Supported schemas"): the root is an object (not ``anyOf``, not a ``$ref``); every object has
  ``additionalProperties: false`` and lists every property in ``required`` (an optional value is
  a required, nullable one); types are string, number, integer, boolean, object, array, null,
  plus ``enum``, ``const`` and ``anyOf``; ``allOf``, ``not``, ``if``/``then``/``else``,
  ``dependentRequired`` and ``dependentSchemas`` are not supported, nor ``patternProperties``,
  ``unevaluatedProperties``, ``propertyNames``, ``minProperties``, ``maxProperties``,
  ``unevaluatedItems``, ``contains``, ``minContains``, ``maxContains``, ``uniqueItems``,
  ``minLength``, ``maxLength``; ``format`` is one of date-time, time, date, duration, email,
  hostname, ipv4, ipv6, uuid. Limits: 5,000 object properties, 10 levels of object nesting,
  1,000 enum values, 120,000 characters of property names, definition names, enum and const
  values; a string enum of more than 250 values has at most 15,000 characters.
- Anthropic structured outputs (https://platform.claude.com/docs/en/build-with-claude/structured-outputs,
  "JSON Schema limitations"): the same object rules, and no recursive schemas (a recursive
  output type is sent to Anthropic as an instruction and validated locally), no
  ``minimum``/``maximum``/``multipleOf``, no ``minLength``/``maxLength``, ``minItems`` only 0
  or 1, no ``maxItems``.

:func:`strict_schema` rewrites a schema into the subset both accept (constraints they reject
move into the ``description``; the answer is still validated against the full type locally).
:func:`strict_violations` checks a schema against one provider's rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from ..errors import ConfigurationError

__all__ = ["allows_null", "strict_schema", "strict_violations"]

Provider = Literal["openai", "anthropic"]

_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
_COMPOSITION = ("allOf", "oneOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas")
_OPENAI_UNSUPPORTED = (
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "minLength",
    "maxLength",
)
_ANTHROPIC_UNSUPPORTED = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "maxItems",
)
_MOVED = (
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
)
"""Constraints some provider rejects: named in the description instead, checked locally."""
_DROPPED = frozenset(
    {
        "title",
        "default",
        "examples",
        "$schema",
        "$id",
        "$comment",
        "discriminator",
        "contentEncoding",
        "contentMediaType",
        "readOnly",
        "writeOnly",
        "deprecated",
    }
)
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")


def allows_null(schema: Any) -> bool:
    """True when ``schema`` accepts ``null`` at its top (a ``null`` type, a nullable type list,
    ``None`` among ``enum`` values, a ``const`` of ``None`` or a branch of ``anyOf``/``oneOf``
    that does)."""
    if not isinstance(schema, dict):
        return schema is True
    t = schema.get("type")
    if t == "null" or (isinstance(t, list) and "null" in t):
        return True
    if "enum" in schema and None in schema["enum"]:
        return True
    if "const" in schema and schema["const"] is None:
        return True
    return any(allows_null(b) for k in ("anyOf", "oneOf") for b in schema.get(k, ()))


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if allows_null(schema):
        return schema
    t = schema.get("type")
    if "enum" in schema:
        out = {**schema, "enum": [*schema["enum"], None]}
        if isinstance(t, str):
            out["type"] = [t, "null"]
        return out
    if isinstance(t, str) and "const" not in schema and "anyOf" not in schema:
        return {**schema, "type": [t, "null"]}
    if "anyOf" in schema and len(schema) == 1:
        return {"anyOf": [*schema["anyOf"], {"type": "null"}]}
    desc = schema.get("description")
    inner = {k: v for k, v in schema.items() if k != "description"}
    out = {"anyOf": [inner, {"type": "null"}]}
    if desc:
        out["description"] = desc
    return out


def _describe(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, default=str)


def strict_schema(schema: dict[str, Any], *, where: str = "$") -> dict[str, Any]:
    """A copy of ``schema`` in the strict subset providers accept (module docstring), made
    self-contained first (:func:`~foundation_ai.schema.refs.self_contained`: references inlined,
    a recursive type kept as root ``$defs`` entries its ``$ref`` nodes point at, each entry made
    strict too): every object closed with every property required, optional ones made nullable
    (``null`` means "the default"); ``oneOf`` becomes ``anyOf``; a one-item ``allOf`` is merged;
    ``title``, ``default`` and annotations are dropped; length, range, count and pattern
    constraints and unsupported formats move into the ``description`` (``docs/structured-output.md``,
    "What a grammar or strict mode cannot enforce"). Property names are never touched, whatever
    they are (``title``, ``type``…).

    Raises:
        ConfigurationError: a part no strict mode can express: an open mapping (an object with
            no ``properties``: ``dict``, ``dict[str, X]``, ``additionalProperties``), a
            fixed-length tuple or an unconstrained value (``Any``); the message names its path
            (``$.payload``).
        SchemaRefError: a reference to another document, or one that resolves nowhere.
    """
    from .refs import self_contained

    doc = self_contained(schema, where=where) if isinstance(schema, dict) else schema
    if not isinstance(doc, dict):
        raise ConfigurationError(f"{where}: a schema must be an object, got {schema!r:.60}")
    defs = doc.get("$defs")
    out = _strict({k: v for k, v in doc.items() if k != "$defs"}, where)
    if isinstance(defs, dict) and defs:
        out["$defs"] = {n: _strict(d, f"{where}.$defs.{n}") for n, d in defs.items()}
    return out


def _strict(schema: Any, where: str) -> dict[str, Any]:
    """One node of :func:`strict_schema` (its references already point at root ``$defs``)."""
    if not isinstance(schema, dict):
        raise ConfigurationError(f"{where}: a schema must be an object, got {schema!r:.60}")
    if "$ref" in schema:
        return {"$ref": schema["$ref"]}  # a recursive type: its definition is made strict at the root
    node = dict(schema)
    all_of = node.pop("allOf", None)
    if all_of is not None:
        if len(all_of) != 1:
            raise ConfigurationError(f"{where}: allOf with several schemas is not supported in strict mode")
        node = {**all_of[0], **node}
    if "oneOf" in node:
        node["anyOf"] = node.pop("oneOf")
    out: dict[str, Any] = {}
    notes: list[str] = []
    for key, value in node.items():
        if key in _DROPPED:
            if key == "default" and value is not None:
                notes.append(f"default {_describe(value)} (send null for it)")
            continue
        if key in _MOVED and not (key == "minItems" and value in (0, 1)):
            notes.append(f"{key} {_describe(value)}")
            continue
        if key == "format" and value not in _FORMATS:
            notes.append(f"format {_describe(value)}")
            continue
        if key in ("$defs", "definitions", "dependentSchemas", "patternProperties", "propertyNames"):
            continue
        out[key] = value
    if "prefixItems" in out:
        raise ConfigurationError(
            f"{where}: a fixed-length tuple cannot be sent in strict mode; use an object"
        )
    if "anyOf" in out:
        out["anyOf"] = [_strict(b, f"{where}.anyOf[{i}]") for i, b in enumerate(out["anyOf"])]
    if "items" in out:
        out["items"] = _strict(out["items"], f"{where}[]")
    is_object = out.get("type") == "object" or "properties" in out
    if is_object:
        extra = out.get("additionalProperties")
        props = out.get("properties") or {}
        # an object with no ``properties`` is open unless it says ``additionalProperties: false``
        # (JSON Schema's default is open): a ``dict`` field of a dataclass or msgspec Struct
        # (``{"type": "object"}``) as much as pydantic's ``dict[str, Any]``
        open_map = isinstance(extra, dict) or extra is True or (extra is None and "properties" not in out)
        if not props and open_map:
            raise ConfigurationError(
                f"{where}: an open mapping (dict) cannot be sent in strict mode (a strict provider could only"
                " ever fill it with {}); use a list of objects, or pass strict=False to send a non-strict"
                " schema (the answer is still validated locally)"
            )
        required = set(out.get("required") or ())
        new_props: dict[str, Any] = {}
        for name, sub in props.items():
            s = _strict(sub, f"{where}.{name}")
            new_props[name] = s if name in required else _nullable(s)
        out["type"] = "object"
        out["properties"] = new_props
        out["required"] = list(new_props)
        out["additionalProperties"] = False
    elif not any(k in out for k in ("type", "enum", "const", "anyOf")):
        raise ConfigurationError(f"{where}: an unconstrained value (Any) cannot be sent in strict mode")
    if notes:
        text = "; ".join(notes)
        out["description"] = (
            f"{out['description']} ({text})" if out.get("description") else text[0].upper() + text[1:]
        )
    return out


def _nodes(schema: Any, path: str, depth: int) -> Iterator[tuple[dict[str, Any], str, int]]:
    """Every schema node with its path and object-nesting depth (property names are map keys,
    never mistaken for keywords)."""
    if not isinstance(schema, dict):
        return
    yield schema, path, depth
    inner = depth + (1 if schema.get("type") == "object" or "properties" in schema else 0)
    for key in _SUBSCHEMA_MAPS:
        sub = schema.get(key)
        if isinstance(sub, dict):
            d = inner if key == "properties" else depth
            for name, s in sub.items():
                yield from _nodes(s, f"{path}.{key}.{name}", d)
    for key in _SUBSCHEMA_LISTS:
        sub = schema.get(key)
        if isinstance(sub, list):
            for i, s in enumerate(sub):
                yield from _nodes(s, f"{path}.{key}[{i}]", depth)
    for key in _SUBSCHEMA_ONE:
        yield from _nodes(schema.get(key), f"{path}.{key}", depth)


def _refs(node: dict[str, Any]) -> Iterator[str]:
    ref = node.get("$ref")
    if isinstance(ref, str):
        yield ref


def strict_violations(schema: Any, provider: Provider = "openai") -> list[str]:
    """Every rule of ``provider``'s strict structured-output mode that ``schema`` breaks (module
    docstring; sources: OpenAI's "Supported schemas" and Anthropic's "JSON Schema limitations"),
    one ``"<path>: <rule>"`` line each; ``[]`` when the provider would accept it.
    """
    found: list[str] = []
    if not isinstance(schema, dict):
        return ["$: the root must be a JSON object schema"]
    if schema.get("type") != "object" or "anyOf" in schema or "$ref" in schema:
        found.append("$: the root must be an object schema (not anyOf, not a $ref)")
    properties = 0
    enum_values = 0
    chars = 0
    for name in (schema.get("$defs") or {}) | (schema.get("definitions") or {}):
        chars += len(name)
    for node, path, depth in _nodes(schema, "$", 0):
        t = node.get("type")
        types = t if isinstance(t, list) else [t] if t is not None else []
        for x in types:
            if x not in _TYPES:
                found.append(f"{path}: unsupported type {x!r}")
        for key in _COMPOSITION:
            if key in node:
                found.append(f"{path}: {key} is not supported")
        unsupported = (
            _OPENAI_UNSUPPORTED if provider == "openai" else _OPENAI_UNSUPPORTED + _ANTHROPIC_UNSUPPORTED
        )
        for key in unsupported:
            if key in node:
                found.append(f"{path}: {key} is not supported")
        if provider == "anthropic" and node.get("minItems") not in (None, 0, 1):
            found.append(f"{path}: minItems must be 0 or 1")
        if "format" in node and node["format"] not in _FORMATS:
            found.append(f"{path}: format {node['format']!r} is not supported")
        for ref in _refs(node):
            if not ref.startswith("#"):
                found.append(f"{path}: only local $ref is supported")
            elif provider == "anthropic":
                found.append(f"{path}: $ref (recursive schemas are not supported)")
        if "object" in types or "properties" in node:
            if node.get("additionalProperties") is not False:
                found.append(f"{path}: additionalProperties must be false")
            props = node.get("properties") or {}
            missing = [p for p in props if p not in (node.get("required") or [])]
            if missing:
                found.append(f"{path}: every property must be required (missing {missing})")
            properties += len(props)
            chars += sum(len(p) for p in props)
            if depth + 1 > 10:
                found.append(f"{path}: more than 10 levels of object nesting")
        if "enum" in node:
            values = node["enum"]
            enum_values += len(values)
            strs = [v for v in values if isinstance(v, str)]
            chars += sum(len(v) for v in strs)
            if len(strs) > 250 and sum(len(v) for v in strs) > 15_000:
                found.append(f"{path}: a string enum of more than 250 values exceeds 15,000 characters")
        if isinstance(node.get("const"), str):
            chars += len(node["const"])
    if properties > 5000:
        found.append(f"$: {properties} object properties (at most 5,000)")
    if enum_values > 1000:
        found.append(f"$: {enum_values} enum values (at most 1,000)")
    if chars > 120_000:
        found.append(f"$: {chars} characters of names and values (at most 120,000)")
    return found
