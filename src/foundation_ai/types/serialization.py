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

Limits (``docs/json-format.md``, "Limits"): a text whose arrays and objects nest deeper than
:data:`MAX_NESTING` levels is refused before it is decoded, so decoding never recurses without
bound; every decoding failure is a :class:`~foundation_ai.errors.JsonFormatError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, TypeVar, get_args, get_origin

import msgspec

from ..errors import JsonFormatError
from ._text import scrub_surrogates
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
    "MAX_NESTING",
    "dump_document",
    "from_json",
    "load_document",
    "register_union",
    "to_json",
]

FORMAT_NAME = "foundation-ai"
FORMAT_VERSION = 1
"""The version of the JSON format this library writes and the newest it reads."""

MAX_NESTING = 128
"""The deepest nesting of arrays and objects ``from_json`` and ``load_document`` accept (``[]`` and
``{}`` are depth 1, ``[[1]]`` depth 2). Deeper texts raise ``JsonFormatError`` before decoding
(``docs/json-format.md``, "Limits")."""

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
    """Encode any foundation_ai value (or list/dict of them) as JSON bytes (format version 1).

    A string holding a lone surrogate (text decoded with ``errors="surrogateescape"``, such as a
    non-UTF-8 file name) cannot be UTF-8: it is written with U+FFFD in its place
    (docs/json-format.md, "Text"), never raising ``UnicodeEncodeError``."""
    try:
        return _encoder.encode(value)
    except UnicodeEncodeError:
        return _encoder.encode(_scrubbed(msgspec.to_builtins(value)))


def _scrubbed(value: Any) -> Any:
    """A ``msgspec.to_builtins`` tree with every string passed through ``scrub_surrogates``."""
    if isinstance(value, str):
        return scrub_surrogates(value)
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    if isinstance(value, dict):
        return {scrub_surrogates(k) if isinstance(k, str) else k: _scrubbed(v) for k, v in value.items()}
    return value


def _format_error(exc: msgspec.DecodeError) -> JsonFormatError:
    text = str(exc)
    m = _PATH.search(text)
    if m:
        return JsonFormatError(text[: m.start()], m.group(1))
    return JsonFormatError(text, "$")


# The nesting scan keeps brackets (and quotes) only, every opener as "(" and closer as ")".
_NOT_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
_NOT_STRUCTURE = bytes(range(256)).translate(None, b'[]{}"')
_AS_PARENS = bytes.maketrans(b"[{]}", b"(())")
_STRING = re.compile(rb'"[^"]*"')


def nesting_exceeds(data: bytes, limit: int = MAX_NESTING) -> bool:
    """True when the JSON text ``data`` nests arrays/objects deeper than ``limit`` levels.

    Runs in C-speed passes over the bytes, without recursion or decoding. A first estimate
    counts every bracket (those inside strings too); only when it says "too deep" (or cannot
    tell) is the exact scan run, which drops string contents (escapes included) first. Each pass
    removes the innermost pairs, at most ``limit`` passes. Unbalanced (malformed) text is left to
    the decoder to report unless a run of openers alone exceeds the limit.
    """
    if len(data) <= limit:
        return False
    s = data.translate(_AS_PARENS, _NOT_BRACKETS)
    if s.count(b"(") <= limit or _depth_over(s, limit) is False:
        return False  # the estimate is exact unless strings hold unbalanced brackets
    if b"\\" in data:  # drop escaped backslashes, then escaped quotes: string bounds become exact
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    s = data.translate(_AS_PARENS, _NOT_STRUCTURE)
    if b'"' in s:
        s = _STRING.sub(b"", s.replace(b'""', b""))
    return _depth_over(s, limit) is True


def _depth_over(s: bytes, limit: int) -> bool | None:
    """Over a text of ``(`` and ``)`` only: True (deeper than ``limit``), False, or None
    (unbalanced)."""
    if b"(" * (limit + 1) in s:
        return True  # a run of openers alone is deeper than the limit
    for _ in range(limit):
        if not s:
            return False
        shorter = s.replace(b"()", b"")  # one level: the pairs adjacent before this pass
        if len(shorter) == len(s):
            return None
        s = shorter
    return bool(s)


def _as_bytes(data: bytes | str) -> bytes:
    if isinstance(data, str):
        try:
            return data.encode()
        except UnicodeEncodeError as exc:
            raise JsonFormatError(
                f"the text holds a character that is not valid Unicode ({exc.reason}, position {exc.start})",
                "$",
            ) from None
    if isinstance(data, bytes):
        return data
    try:
        return bytes(data)
    except TypeError:
        raise JsonFormatError(f"expected JSON text (bytes or str), got {type(data).__name__}", "$") from None


def _too_deep() -> JsonFormatError:
    return JsonFormatError(f"arrays and objects nested deeper than {MAX_NESTING} levels", "$")


def from_json(data: bytes | str, tp: type[T] | Any) -> T:
    """Decode JSON into ``tp`` (a library type such as ``Messages``, or ``list[Messages]``, …).

    Raises:
        JsonFormatError: the text is not JSON (or not valid UTF-8 / Unicode), nests deeper than
            :data:`MAX_NESTING`, or does not match the type; ``.path`` names where (e.g.
            ``"$.content.type"``). No other exception escapes for any input.
    """
    raw = _as_bytes(data)
    if nesting_exceeds(raw):
        raise _too_deep()
    value: T = _from_checked(raw, tp)
    return value


def _from_checked(data: bytes, tp: Any) -> Any:
    try:
        return _decode_typed(data, tp)
    except RecursionError:  # a backstop: the nesting scan refuses deep texts first
        raise _too_deep() from None
    except JsonFormatError:
        raise
    except ValueError as exc:  # e.g. UnicodeError: every decoding failure is the typed one
        raise JsonFormatError(f"{type(exc).__name__}: {exc}", "$") from None


def _decode_typed(data: bytes, tp: Any) -> Any:
    if tp is AgentProgress:
        return _decode_progress(data)
    if _holds_progress(tp):
        return _decode_with_progress(data, tp)
    try:
        dec = _decoder(tp)
    except TypeError:  # an unhashable generic alias
        dec = msgspec.json.Decoder(_resolve(tp))
    try:
        return dec.decode(data)
    except msgspec.DecodeError as exc:
        raise _format_error(exc) from None


def _decode_progress(data: bytes) -> AgentProgress:
    return _progress_from(_decode_typed(data, dict[str, Any]), "$")


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


def _decode_with_progress(data: bytes, tp: Any) -> Any:
    """Decode a container holding ``AgentProgress`` so unknown variants become ``Unknown``
    wherever they sit (a list of progress items, the ``Pending`` of an agent ``Stream``, …)."""
    return _restore_progress(_decode_typed(data, _progress_as_dicts(tp)), tp, "$")


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
        JsonFormatError: not a foundation-ai document, a newer format version, nested deeper than
            :data:`MAX_NESTING`, or a bad item (the path then names it, e.g.
            ``"$.items[3].message.role"``). No other exception escapes for any input.
    """
    raw = _as_bytes(data)
    if nesting_exceeds(raw):
        raise _too_deep()
    try:
        doc = msgspec.json.decode(raw, type=_Document)
    except msgspec.DecodeError as exc:
        raise _format_error(exc) from None
    except RecursionError:
        raise _too_deep() from None
    if doc.format != FORMAT_NAME:
        raise JsonFormatError(f"not a {FORMAT_NAME} document (format {doc.format!r})", "$.format")
    if doc.version > FORMAT_VERSION:
        raise JsonFormatError(
            f"document version {doc.version} is newer than this library reads ({FORMAT_VERSION})", "$.version"
        )
    try:
        return _from_checked(bytes(doc.items), list[item_type])  # type: ignore[no-any-return]
    except JsonFormatError as exc:
        raise JsonFormatError(exc.reason, "$.items" + exc.path[1:]) from None
