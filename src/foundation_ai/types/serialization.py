"""The foundation_ai JSON format, version 1 (documented in ``docs/json-format.md``).

- Every enum-like type is an object tagged by ``"type"`` (``{"type": "tool_call", ...}``).
- Roles are lowercase strings; timestamps RFC 3339 in UTC (``"2026-11-29T21:58:04.702893Z"``);
  ids 25-character SCRU128 strings.
- Fields equal to their default are omitted when writing and filled in when reading; unknown
  fields are ignored; a message without ``id`` gets a fresh one.
- A *document* wraps a list of items with the format name and version:
  ``{"format": "foundation-ai", "version": 1, "kind": "...", "items": [...]}``.

``to_json(value)`` -> bytes; ``from_json(data, Messages)`` -> a typed value. Pass an enum-like base
class (``Messages``, ``ModelOutput``, ``SessionRecord``, …), ``list[...]`` of one, or
``Stream[Messages, ModelState]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, TypeVar, get_args, get_origin

import msgspec

from ..errors import JsonFormatError
from .content import (
    GenerationMetadata,
    GenerationMetadataT,
    ModelOutput,
    ModelOutputT,
    StopReason,
    StopReasonT,
    UserModelContent,
    UserModelContentT,
)
from .interaction import OutputFormat, OutputFormatT
from .messages import Messages, MessagesT
from .model_id import ModelId, ModelIdT
from .records import AGENT_PROGRESS_TAGS, AgentProgress, AgentProgressT, SessionRecord, SessionRecordT
from .stream import ModelState, ModelStateT, Stream, stream_union
from .tools import Tool, ToolChoice, ToolChoiceT, ToolT

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "dump_document",
    "from_json",
    "load_document",
    "register_union",
    "to_json",
]

FORMAT_NAME = "foundation-ai"
FORMAT_VERSION = 1
"""The version of the JSON format this library writes and the newest it reads."""

T = TypeVar("T")

_UNIONS: dict[Any, Any] = {
    Messages: MessagesT,
    ModelOutput: ModelOutputT,
    UserModelContent: UserModelContentT,
    StopReason: StopReasonT,
    GenerationMetadata: GenerationMetadataT,
    ModelId: ModelIdT,
    Tool: ToolT,
    ToolChoice: ToolChoiceT,
    OutputFormat: OutputFormatT,
    ModelState: ModelStateT,
    SessionRecord: SessionRecordT,
    AgentProgress: AgentProgressT,
}


def register_union(base: type, union: Any) -> None:
    """Let ``from_json(data, base)`` decode ``base``'s variants (for enums defined outside
    ``types``, such as ``agentic.TurnEvent``). ``union`` is the ``A | B | ...`` of its variants."""
    _UNIONS[base] = union
    _decoder.cache_clear()


_encoder = msgspec.json.Encoder()
_PATH = re.compile(r" - at `(\$[^`]*)`$")


def _resolve(tp: Any) -> Any:
    """Map enum-like base classes (and containers of them) to their decodable unions."""
    if tp in _UNIONS:
        return _UNIONS[tp]
    origin = get_origin(tp)
    if origin is Stream:
        d, p = get_args(tp)
        return stream_union(_resolve(d), _resolve(p))
    if origin in (list, tuple, dict) or (origin is not None and get_args(tp)):
        args = tuple(_resolve(a) for a in get_args(tp))
        return origin[args] if origin in (list, tuple, dict) else tp
    return tp


@lru_cache(maxsize=128)
def _decoder(tp: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(_resolve(tp))


def to_json(value: Any) -> bytes:
    """Encode any foundation_ai value (or list/dict of them) as JSON bytes (format version 1)."""
    return _encoder.encode(value)


def _format_error(exc: msgspec.DecodeError) -> JsonFormatError:
    text = str(exc)
    m = _PATH.search(text)
    if m:
        return JsonFormatError(text[: m.start()], m.group(1))
    return JsonFormatError(text, "$")


def from_json(data: bytes | str, tp: type[T] | Any) -> T:
    """Decode JSON into ``tp`` (a library type such as ``Messages``, or ``list[Messages]``, …).

    Raises:
        JsonFormatError: the text is not JSON or does not match the type; ``.path`` names where
            (e.g. ``"$.content.type"``).
    """
    if tp is AgentProgress:
        return _decode_progress(data)  # type: ignore[return-value]
    if _holds_progress(tp):
        return _decode_with_progress(data, tp)  # type: ignore[no-any-return]
    try:
        dec = _decoder(tp)  # type: ignore[arg-type]
    except TypeError:  # an unhashable generic alias
        dec = msgspec.json.Decoder(_resolve(tp))
    try:
        return dec.decode(data)  # type: ignore[no-any-return]
    except msgspec.DecodeError as exc:
        raise _format_error(exc) from None


def _decode_progress(data: bytes | str) -> AgentProgress:
    return _progress_from(from_json(data, dict[str, Any]), "$")


def _progress_from(raw: dict[str, Any], path: str) -> AgentProgress:
    """One ``AgentProgress`` from its JSON object; an unknown ``type`` becomes ``Unknown``."""
    kind = raw.get("type")
    if isinstance(kind, str) and kind not in AGENT_PROGRESS_TAGS:
        rest = {k: v for k, v in raw.items() if k != "type"}
        return AgentProgress.Unknown(kind=kind, data=rest)
    try:
        progress: AgentProgress = msgspec.convert(raw, AgentProgressT)
        return progress
    except msgspec.ValidationError as exc:
        err = _format_error(exc)
        raise JsonFormatError(err.reason, path + err.path[1:]) from None


def _holds_progress(tp: Any) -> bool:
    """True when ``tp`` is a container (list, dict, ``Stream``) with ``AgentProgress`` inside."""
    return any(_has_progress(a) for a in get_args(tp))


def _has_progress(tp: Any) -> bool:
    return tp is AgentProgress or _holds_progress(tp)


def _progress_as_dicts(tp: Any) -> Any:
    """``tp`` with every ``AgentProgress`` replaced by ``dict[str, Any]`` (decoded untyped)."""
    if tp is AgentProgress:
        return dict[str, Any]
    origin, args = get_origin(tp), get_args(tp)
    if not args:
        return tp
    return origin[tuple(_progress_as_dicts(a) for a in args)]


def _decode_with_progress(data: bytes | str, tp: Any) -> Any:
    """Decode a container holding ``AgentProgress`` so unknown variants become ``Unknown``
    wherever they sit (a list of progress items, the ``Pending`` of an agent ``Stream``, …)."""
    return _restore_progress(from_json(data, _progress_as_dicts(tp)), tp, "$")


def _restore_progress(value: Any, tp: Any, path: str) -> Any:
    if tp is AgentProgress:
        return _progress_from(value, path)
    origin, args = get_origin(tp), get_args(tp)
    if origin is list:
        return [_restore_progress(v, args[0], f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is tuple:
        return tuple(
            _restore_progress(v, args[i if len(args) > 1 else 0], f"{path}[{i}]") for i, v in enumerate(value)
        )
    if origin is dict:
        return {k: _restore_progress(v, args[1], f"{path}.{k}") for k, v in value.items()}
    if origin is Stream:
        data_tp, progress_tp = args
        if isinstance(value, Stream.Pending) and _has_progress(progress_tp):
            return Stream.Pending(_restore_progress(value.value, progress_tp, path + ".value"))
        if isinstance(value, Stream.Next) and _has_progress(data_tp):
            return Stream.Next(_restore_progress(value.value, data_tp, path + ".value"))
        if isinstance(value, Stream.Spread) and _has_progress(data_tp):
            return Stream.Spread(_restore_progress(value.value, list[data_tp], path + ".value"))  # type: ignore[valid-type]
    return value


def dump_document(items: Iterable[Any], kind: str = "records") -> bytes:
    """Encode a list of items as a versioned document: ``{"format", "version", "kind", "items"}``."""
    return _encoder.encode(
        {"format": FORMAT_NAME, "version": FORMAT_VERSION, "kind": kind, "items": list(items)}
    )


class _Document(msgspec.Struct):
    format: str
    version: int
    items: msgspec.Raw
    kind: str = "records"


def load_document(data: bytes | str, item_type: Any) -> list[Any]:
    """Decode a document written by :func:`dump_document` into a list of ``item_type``.

    Raises:
        JsonFormatError: not a foundation-ai document, a newer format version, or a bad item
            (the path then names it, e.g. ``"$.items[3].message.role"``).
    """
    try:
        doc = msgspec.json.decode(data, type=_Document)
    except msgspec.DecodeError as exc:
        raise _format_error(exc) from None
    if doc.format != FORMAT_NAME:
        raise JsonFormatError(f"not a {FORMAT_NAME} document (format {doc.format!r})", "$.format")
    if doc.version > FORMAT_VERSION:
        raise JsonFormatError(
            f"document version {doc.version} is newer than this library reads ({FORMAT_VERSION})", "$.version"
        )
    try:
        return from_json(bytes(doc.items), list[item_type])
    except JsonFormatError as exc:
        raise JsonFormatError(exc.reason, "$.items" + exc.path[1:]) from None
