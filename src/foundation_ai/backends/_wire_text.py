"""Text as it arrives on the wire: JSON event data that may hold half of a UTF-16 surrogate pair,
and text pieces joined across events.

Some proxies slice a stream by UTF-16 units, so an emoji sent as the JSON escape
``"\\ud83d\\ude00"`` can arrive as ``"\\ud83d"`` in one event and ``"\\ude00"`` in the next. Each
event alone is valid JSON (RFC 8259 allows lone surrogate escapes) but holds a lone surrogate,
which strict decoders reject and which cannot be encoded as UTF-8. The rules here:

- :func:`decode_event` decodes event data with msgspec, and, only when msgspec refuses a lone
  surrogate escape, with the standard library's ``json`` (which keeps lone surrogates as code
  points); anything else that is not JSON still raises ``msgspec.DecodeError``.
- :func:`join` appends a piece to the text so far, pairing a high surrogate left at the end of
  the text with a low surrogate starting the piece; any other lone surrogate becomes U+FFFD.
- :func:`visible` is the text without a trailing high surrogate still waiting for its pair (what
  a snapshot chunk shows); :func:`final` replaces that last one with U+FFFD at the end.

And reading fields of a decoded event whose types may be wrong: :func:`as_str`,
:func:`as_object`, :func:`as_key` read a wrongly typed value as absent; :data:`MALFORMED` is what
reading one can still raise (a parser turns those into its provider error, never lets them out).
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

__all__ = [
    "MALFORMED",
    "as_key",
    "as_name",
    "as_object",
    "as_str",
    "decode_event",
    "final",
    "has_surrogate_escape",
    "join",
    "join_all",
    "visible",
]

_DECODE = msgspec.json.Decoder().decode
_SURROGATE = re.compile("[\ud800-\udfff]")
_LONE = re.compile("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")


def decode_event(data: str | bytes) -> Any:
    """The JSON value of one event's data.

    Raises:
        msgspec.DecodeError: ``data`` is not JSON.
    """
    try:
        return _DECODE(data)
    except msgspec.DecodeError as exc:
        if not has_surrogate_escape(data):
            raise
        try:
            return json.loads(data)
        except (ValueError, RecursionError):
            raise exc from None


_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def has_surrogate_escape(data: str | bytes) -> bool:
    """True when ``data`` holds a ``\\uD800``-``\\uDFFF`` escape (msgspec rejects a lone one,
    with messages such as "Input data was truncated")."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return _ESCAPE.search(text) is not None


def _pair(text: str) -> str:
    """Surrogate pairs made into their characters; lone surrogates (but a trailing high one)
    replaced by U+FFFD."""
    tail = ""
    if "\ud800" <= text[-1] <= "\udbff":
        text, tail = text[:-1], text[-1]
    text = _LONE.sub("\ufffd", text)
    text = text.encode("utf-16", "surrogatepass").decode("utf-16")
    return text + tail


def join(text: str, piece: str) -> str:
    """``text + piece`` with a surrogate pair split between them joined (see the module doc).

    ``text`` is an earlier result of ``join`` (it may end with a high surrogate waiting for its
    pair). Strings without surrogates are simply concatenated.
    """
    if not isinstance(piece, str) or not piece:
        return text
    if (piece.isascii() or _SURROGATE.search(piece) is None) and not (
        text and "\ud800" <= text[-1] <= "\udbff"
    ):
        return text + piece
    return _pair(text + piece)


def join_all(pieces: list[str]) -> str:
    """The pieces joined by :func:`join`, then :func:`final`."""
    text = ""
    for p in pieces:
        text = join(text, p)
    return final(text)


def visible(text: str) -> str:
    """``text`` without a trailing high surrogate still waiting for its pair."""
    if text and "\ud800" <= text[-1] <= "\udbff":
        return text[:-1]
    return text


def final(text: str) -> str:
    """``text`` at the end of the stream: a trailing lone high surrogate becomes U+FFFD."""
    if text and "\ud800" <= text[-1] <= "\udbff":
        return text[:-1] + "\ufffd"
    return text


MALFORMED = (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError)
"""The exceptions reading a wrongly typed event can raise; the stream parsers turn them into
their provider error (the contract's error message), never letting them out of ``stream``."""


def as_str(value: Any) -> str:
    """``value`` when it is a string, else ``""`` (a wrongly typed field reads as absent)."""
    return value if isinstance(value, str) else ""


def as_name(value: Any) -> str:
    """An identifier-like field (an id, a name, a signature, a stop value): ``value`` when it is
    a string, with any lone surrogate replaced by U+FFFD (so the stored message can always be
    encoded), else ``""``."""
    if not isinstance(value, str):
        return ""
    if value.isascii():  # the common case, checked first (no regex search)
        return value
    return final(join("", value)) if _SURROGATE.search(value) else value


def as_object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else ``{}``."""
    return value if isinstance(value, dict) else {}


def as_key(value: Any) -> Any:
    """An ``index`` usable as a dict key (a list or object reads as its ``repr``)."""
    return value if isinstance(value, str | int | float | bool) or value is None else repr(value)
