"""Self-contained schemas: every ``$ref`` resolved inside the document, nothing ever fetched.

Every schema foundation-ai sends (tool parameters, an output format, a forced-call wrapper, a
grammar) goes through :func:`self_contained` where the backend builds what it sends, so a
provider or a grammar converter never meets a dangling or remote reference:

- a ``$ref`` that is not recursive is replaced by its target (inlined);
- a recursive one (``Node`` holding ``list[Node]``; ``A`` holding ``B`` holding ``A``) keeps a
  reference, to one root-level ``$defs`` entry (``#/$defs/<Name>``), which is the form OpenAI
  Structured Outputs (https://platform.openai.com/docs/guides/structured-outputs, "Recursive
  schemas are supported"), llama.cpp's JSON-Schema-to-grammar converters and JSON Schema
  2020-12 (https://json-schema.org/draft/2020-12/json-schema-core#section-8.2.3) read alike;
- nested ``$defs``/``definitions`` are dropped once resolved.

References are JSON Pointers (``#/$defs/X``, ``#/definitions/X``, ``#/properties/a``,
``#``) or plain-name anchors (``#name`` for an ``$anchor``). A schema embedded in another one
(a tool's ``parameters`` under ``arguments`` in a forced-call wrapper) keeps the meaning it had
on its own: a pointer is resolved against the nearest enclosing schema that holds ``$defs`` or
``definitions`` and in which it resolves, then outwards to the document root.

A reference to anything outside the document (``http://...``, ``other.json#/X``) is never
fetched: it is a :class:`SchemaRefError`, as is a reference that resolves nowhere (see
``docs/tools.md``, "Schemas are self-contained").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote

from ..errors import ConfigurationError
from .walk import SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_VALUES

__all__ = ["MAX_INLINED_NODES", "SchemaRefError", "has_refs", "self_contained"]

MAX_INLINED_NODES = 20_000
"""Schema nodes an inlined document may hold; past it (shared definitions referenced many times
over) every reference target is kept once in ``$defs`` instead of being copied."""

_DEFS = ("$defs", "definitions")
_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]+")


class SchemaRefError(ConfigurationError):
    """A ``$ref`` that cannot be resolved inside its schema.

    Attributes:
        ref: the reference as written.
        path: where it is, as a JSON path (``$.properties.a``).
        external: True for a reference to another document (never fetched).
    """

    def __init__(self, ref: str, path: str, *, external: bool) -> None:
        self.ref = ref
        self.path = path
        self.external = external
        why = (
            "refers to another document, which is never fetched; only references inside the schema are resolved"
            if external
            else "resolves to nothing in the schema"
        )
        super().__init__(f"{path}: $ref {ref!r} {why}")


def has_refs(schema: Any) -> bool:
    """True when ``schema`` holds a ``$ref`` at any keyword position."""
    return any("$ref" in node for node in _nodes(schema))


def _nodes(schema: Any) -> Iterator[dict[str, Any]]:
    stack = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield node
        for key, value in node.items():
            if key in SCHEMA_MAPS and isinstance(value, dict):
                stack.extend(value.values())
            elif key in SCHEMA_VALUES and isinstance(value, dict):
                stack.append(value)
            elif (key in SCHEMA_LISTS or key == "items") and isinstance(value, list):
                stack.extend(value)


def _map(schema: dict[str, Any], path: str, fn: Callable[[Any, str], Any]) -> dict[str, Any]:
    """``schema`` with each direct subschema ``s`` at ``path.key`` replaced by ``fn(s, path)``
    (keyword positions as in :func:`~foundation_ai.schema.walk.map_subschemas`)."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {
                n: fn(v, f"{path}.{key}.{n}") if isinstance(v, dict | bool) else v for n, v in value.items()
            }
        elif key in SCHEMA_VALUES and isinstance(value, dict | bool):
            out[key] = fn(value, f"{path}.{key}")
        elif (key in SCHEMA_LISTS or key == "items") and isinstance(value, list):
            out[key] = [fn(v, f"{path}.{key}[{i}]") for i, v in enumerate(value)]
        else:
            out[key] = value
    return out


class _Doc:
    """One document's reference resolution (see the module docstring)."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.recursive: set[int] = set()
        self.names: dict[int, str] = {}
        self.defs: dict[str, Any] = {}
        self.hoist_all = False
        self.count = 0

    # -- resolution ------------------------------------------------------------------------------

    def resolve(self, ref: str, scopes: tuple[Any, ...], path: str) -> tuple[Any, tuple[Any, ...], str]:
        """(target, the target's enclosing scopes, a name for it)."""
        if not ref.startswith("#"):
            raise SchemaRefError(ref, path, external=True)
        fragment = unquote(ref[1:])
        for i in range(len(scopes) - 1, -1, -1):
            found = self._pointer(scopes[i], fragment) if not fragment or fragment.startswith("/") else None
            if found is None and fragment and not fragment.startswith("/"):
                found = self._anchor(scopes[i], fragment)
            if found is not None:
                target, inner, name = found
                return target, (*scopes[: i + 1], *inner), name
        raise SchemaRefError(ref, path, external=False)

    @staticmethod
    def _pointer(scope: Any, fragment: str) -> tuple[Any, tuple[Any, ...], str] | None:
        node = scope
        inner: list[Any] = []
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in fragment.split("/")[1:]]
        for token in tokens:
            if node is not scope and isinstance(node, dict) and any(k in node for k in _DEFS):
                inner.append(node)
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return None
        if not isinstance(node, dict | bool):
            return None
        return node, tuple(inner), tokens[-1] if tokens else "Root"

    @staticmethod
    def _anchor(scope: Any, name: str) -> tuple[Any, tuple[Any, ...], str] | None:
        for node in _nodes(scope):
            if node.get("$anchor") == name:
                return node, (), name
        return None

    # -- the walk --------------------------------------------------------------------------------

    def walk(self, node: Any, scopes: tuple[Any, ...], path: str, active: tuple[int, ...], mark: bool) -> Any:
        """``node`` rewritten; ``mark``: the first pass, which only finds the recursive targets."""
        if not isinstance(node, dict):
            return node
        self.count += 1
        if self.count > MAX_INLINED_NODES and not self.hoist_all:
            raise _TooLarge
        if any(k in node for k in _DEFS):
            scopes = (*scopes, node)
        ref = node.get("$ref")
        rest = {k: v for k, v in node.items() if k not in ("$ref", *_DEFS, "$anchor", "$id", "$schema")}
        rewritten = _map(rest, path, lambda s, p: self.walk(s, scopes, p, active, mark))
        if not isinstance(ref, str):
            return rewritten
        target, tscopes, name = self.resolve(ref, scopes, path)
        key = id(target)
        if key in active:
            self.recursive.add(key)
            if mark:
                return rewritten
        if not mark and (key in self.recursive or self.hoist_all):
            return {"$ref": "#/$defs/" + self._define(key, target, tscopes, name, path), **rewritten}
        inner = self.walk(target, tscopes, path, (*active, key), mark)
        if not isinstance(inner, dict):
            return inner if not rewritten else {"allOf": [inner], **rewritten}
        return {**inner, **rewritten}

    def _define(self, key: int, target: Any, scopes: tuple[Any, ...], name: str, path: str) -> str:
        known = self.names.get(key)
        if known is not None:
            return known
        base = _NAME_BAD.sub("_", name).strip("_") or "Def"
        unique, k = base, 2
        while unique in self.defs:
            unique, k = f"{base}_{k}", k + 1
        self.names[key] = unique
        self.defs[unique] = None  # taken before the body is walked (it refers to itself)
        self.defs[unique] = self.walk(target, scopes, path, (key,), False)
        return unique


class _TooLarge(Exception):
    """The inlined document passed :data:`MAX_INLINED_NODES`."""


def self_contained(schema: dict[str, Any], *, where: str = "$") -> dict[str, Any]:
    """A copy of ``schema`` in which every ``$ref`` resolves inside it (module docstring): the
    non-recursive ones inlined, the recursive ones pointing at root ``$defs`` entries; no nested
    ``$defs``/``definitions`` left. A schema without any ``$ref`` comes back equal, minus its
    unused definitions.

    Raises:
        SchemaRefError: a reference to another document (``http://…``: never fetched), or one
            that resolves to nothing (``where`` prefixes the path in the message).
    """
    if not isinstance(schema, dict):
        return schema
    cached = _CACHE.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    result = _self_contained(schema, where)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[id(schema)] = (schema, result)  # the input is kept: its id is not reused meanwhile
    return result


_CACHE: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
"""Recent results by input identity (a tool's schema is sent with every request; schemas are
never changed in place once built)."""
_CACHE_SIZE = 1024


def _self_contained(schema: dict[str, Any], where: str) -> dict[str, Any]:
    if not has_refs(schema) and not any(k in node for node in _nodes(schema) for k in _DEFS):
        return schema
    doc = _Doc(schema)
    try:
        doc.walk(schema, (schema,), where, (id(schema),), True)
        doc.count = 0
        out = doc.walk(schema, (schema,), where, (id(schema),), False)
    except _TooLarge:
        doc = _Doc(schema)
        doc.hoist_all = True
        out = doc.walk(schema, (schema,), where, (id(schema),), False)
    if isinstance(out, dict) and isinstance(out.get("$ref"), str) and doc.defs:
        # the root itself is a recursive definition: its body at the root (a provider wants an
        # object there, not a reference), the definition kept for the references inside
        name = out["$ref"].removeprefix("#/$defs/")
        out = {**doc.defs[name], **{k: v for k, v in out.items() if k != "$ref"}}
    if doc.defs:
        out = {**out, "$defs": doc.defs}
    result: dict[str, Any] = out
    return result
