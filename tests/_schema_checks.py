"""Checks of sent schemas, written independently of ``foundation_ai.schema.refs``: every
``$ref`` a JSON Pointer resolving from the document's root (self-contained), and every object
closed (``additionalProperties: false``) where a strict mode needs it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def schema_nodes(schema: Any, path: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every subschema at a keyword position, with its path."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key in _MAPS:
        sub = schema.get(key)
        if isinstance(sub, dict):
            for name, s in sub.items():
                yield from schema_nodes(s, f"{path}.{key}.{name}")
    for key in _ONE:
        yield from schema_nodes(schema.get(key), f"{path}.{key}")
    for key in _LISTS:
        sub = schema.get(key)
        if isinstance(sub, list):
            for i, s in enumerate(sub):
                yield from schema_nodes(s, f"{path}.{key}[{i}]")


def dangling_refs(doc: Any) -> list[str]:
    """``"<path>: <ref>"`` for each ``$ref`` that is not a pointer resolving from ``doc``'s root."""
    bad: list[str] = []
    for path, node in schema_nodes(doc):
        ref = node.get("$ref")
        if ref is None:
            continue
        if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
            bad.append(f"{path}: {ref!r}")
            continue
        target: Any = doc
        for token in ref[2:].split("/") if ref != "#" else []:
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and token in target:
                target = target[token]
            elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            else:
                bad.append(f"{path}: {ref!r}")
                break
    return bad


def nested_defs(doc: Any) -> list[str]:
    """Paths of ``$defs``/``definitions`` anywhere but the root."""
    return [p for p, n in schema_nodes(doc) if p != "$" and ("$defs" in n or "definitions" in n)]


def open_objects(doc: Any) -> list[str]:
    """Paths of object schemas that are not closed."""
    return [
        p
        for p, n in schema_nodes(doc)
        if (n.get("type") == "object" or "properties" in n) and n.get("additionalProperties") is not False
    ]


def sent_schemas(body: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every JSON Schema document in a request body of OpenAI Chat, Responses or Anthropic:
    tool parameters, ``response_format`` / ``text.format`` and ``input_schema``."""
    for i, t in enumerate(body.get("tools") or []):
        if "function" in t:
            yield f"tools[{i}].function.parameters", t["function"]["parameters"]
        elif "parameters" in t:
            yield f"tools[{i}].parameters", t["parameters"]
        elif "input_schema" in t:
            yield f"tools[{i}].input_schema", t["input_schema"]
    rf = body.get("response_format")
    if isinstance(rf, dict) and "json_schema" in rf:
        yield "response_format", rf["json_schema"]["schema"]
    fmt = (body.get("text") or {}).get("format")
    if isinstance(fmt, dict) and "schema" in fmt:
        yield "text.format", fmt["schema"]
    oc = (body.get("output_config") or {}).get("format")
    if isinstance(oc, dict) and "schema" in oc:
        yield "output_config.format", oc["schema"]
