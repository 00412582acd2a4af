"""What ``foundation-ai run`` sends: the prompt, piped stdin, attachments and ``--schema``.

- ``run "PROMPT"`` with text piped on stdin sends the piped text, a blank line, then PROMPT
  (``cat notes.txt | foundation-ai run "summarize"``, as ``llm`` does); ``run -`` or no PROMPT
  reads the prompt from stdin.
- ``-a PATH`` attaches an image (PNG, JPEG, GIF, WebP: sent as image content) or a UTF-8 text
  file (sent as a text message naming the file); ``-a URL`` (``http(s)://``) is passed on as a
  text message giving the URL: the CLI never downloads it.
- Piped text and attached text files are read as UTF-8 (piped text: in the locale's encoding
  when that is not ASCII); bytes that are not valid there (Latin-1 ``caf\\xe9``) are replaced by
  U+FFFD, never an error. A file with NUL bytes is not text and is refused.
- ``--schema`` is a JSON Schema object, or ``name: type, ...`` (types ``str``, ``int``,
  ``float``, ``bool``, default ``str``): the answer must be a JSON object with those fields
  (``OutputFormat.JsonSchema``, sent as each provider's structured-output mode).
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from ..errors import ConfigurationError
from ..types import ImageContent, Messages, MimeType, UserMessage
from ..types._text import scrub_surrogates

__all__ = [
    "MAX_ATTACHMENT_BYTES",
    "attachment_messages",
    "decode_text",
    "parse_schema",
    "read_prompt",
    "tolerant_stdio",
]

MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024
"""Largest file ``-a`` accepts (20 MiB, the OpenAI and Anthropic image limit's order)."""

_IMAGE_MAGIC: tuple[tuple[bytes, MimeType], ...] = (
    (b"\x89PNG\r\n\x1a\n", MimeType.Png),
    (b"\xff\xd8\xff", MimeType.Jpeg),
    (b"GIF87a", MimeType.Gif),
    (b"GIF89a", MimeType.Gif),
)


def _is_ascii(encoding: str | None) -> bool:
    return (encoding or "").lower().replace("-", "").replace("_", "") in ("ascii", "usascii", "ansix3.41968")


def decode_text(data: bytes, encoding: str | None = None) -> str:
    """``data`` as text in ``encoding`` (default, and in place of ASCII: UTF-8), every byte
    sequence that is not valid in it replaced by U+FFFD (``errors="replace"``): text that is
    not UTF-8, such as Latin-1 ``caf\\xe9``, is sent as ``caf\\ufffd`` instead of failing."""
    codec = "utf-8" if encoding is None or _is_ascii(encoding) else encoding
    return data.decode(codec, errors="replace")


def tolerant_stdio() -> None:
    """Make the standard streams safe for any text: ``sys.stdin`` replaces undecodable input by
    U+FFFD instead of raising ``UnicodeDecodeError`` or passing lone surrogates on
    (``errors="replace"``), so a line typed or piped into ``chat`` or ``keys set`` in another
    encoding cannot crash them; and where the locale says ASCII (``LC_ALL=C``), which says
    nothing about the text, the three streams use UTF-8 instead, as Python's own C-locale
    coercion does (https://peps.python.org/pep-0538/). A stream that cannot be reconfigured
    is left as it is."""
    for stream, errors in ((sys.stdin, "replace"), (sys.stdout, None), (sys.stderr, None)):
        reconfigure = getattr(stream, "reconfigure", None)
        if not callable(reconfigure):
            continue
        changes: dict[str, str] = {} if errors is None else {"errors": errors}
        if _is_ascii(getattr(stream, "encoding", None)):
            changes["encoding"] = "utf-8"
        try:
            if changes:
                reconfigure(**changes)
        except (OSError, ValueError, AttributeError):
            pass


def _piped_text(stdin: TextIO) -> str:
    """All of stdin when it is not a terminal (``""`` when it is, or cannot be read), decoded
    with :func:`decode_text` (bytes that are not valid text become U+FFFD)."""
    try:
        if stdin.isatty():
            return ""
        buffer = getattr(stdin, "buffer", None)
        if buffer is not None:
            return decode_text(buffer.read(), getattr(stdin, "encoding", None))
        return scrub_surrogates(stdin.read())
    except (OSError, ValueError, AttributeError):
        return ""


def read_prompt(prompt: str | None, stdin: TextIO) -> str:
    """The prompt text of ``run``: ``prompt``, preceded by piped stdin when there is some
    (see the module docstring); ``-`` or ``None`` reads the whole prompt from stdin.

    Raises:
        ConfigurationError: the prompt is empty.
    """
    if prompt is None or prompt == "-":
        text = _piped_text(stdin)
    else:
        piped = _piped_text(stdin)
        text = f"{piped.rstrip()}\n\n{prompt}" if piped.strip() else prompt
    if not text.strip():
        raise ConfigurationError("the prompt is empty (give a PROMPT or pipe text on stdin)")
    return text


def _image_type(head: bytes) -> MimeType | None:
    for magic, mime in _IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return MimeType.Webp
    return None


def attachment_messages(items: list[str]) -> list[Messages]:
    """One user message per ``-a`` item, in order (see the module docstring).

    Raises:
        ConfigurationError: a missing or unreadable file, one larger than
            :data:`MAX_ATTACHMENT_BYTES`, or one neither an image nor text (NUL bytes).
    """
    out: list[Messages] = []
    for item in items:
        if item.lower().startswith(("http://", "https://")):
            out.append(Messages.user(f"Attachment (URL): {item}"))
            continue
        path = Path(item)
        try:
            size = path.stat().st_size
            if not path.is_file():
                raise ConfigurationError(f"-a {item}: not a file")
            if size > MAX_ATTACHMENT_BYTES:
                raise ConfigurationError(
                    f"-a {item}: {size:,} bytes is more than the {MAX_ATTACHMENT_BYTES:,}-byte limit"
                )
            data = path.read_bytes()
        except OSError as exc:
            raise ConfigurationError(f"-a {item}: {exc.strerror or exc}") from None
        mime = _image_type(data[:16])
        if mime is not None:
            b64 = base64.b64encode(data).decode("ascii")
            out.append(UserMessage(content=ImageContent(b64=b64, mime_type=mime)))
            continue
        if b"\x00" in data:  # text files hold no NUL bytes; binary files (PDF, zip, ...) do
            raise ConfigurationError(
                f"-a {item}: not an image (png, jpeg, gif, webp) nor UTF-8 text (it holds NUL bytes)"
            )
        out.append(Messages.user(f"Attachment {os.path.basename(item)}:\n{decode_text(data)}"))
    return out


_TYPES = {
    "str": "string",
    "string": "string",
    "int": "integer",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "bool": "boolean",
    "boolean": "boolean",
}


def parse_schema(text: str) -> dict[str, Any]:
    """``--schema``: a JSON Schema object (text starting with ``{``) or a ``name: type, ...``
    list, as a JSON Schema of an object with exactly those (required) fields.

    Raises:
        ConfigurationError: invalid JSON, a schema that is not an object, an empty list, a bad
            field name, an unknown type or a repeated field.
    """
    text = text.strip()
    if text.startswith("{"):
        try:
            schema = json.loads(text)
        except ValueError as exc:
            raise ConfigurationError(f"--schema is not valid JSON: {exc}") from None
        except RecursionError:
            raise ConfigurationError("--schema nests arrays/objects too deeply to parse") from None
        if not isinstance(schema, dict):
            raise ConfigurationError("--schema must be a JSON object")
        return schema
    properties: dict[str, Any] = {}
    for part in text.split(","):
        name, _, kind = part.partition(":")
        name, kind = name.strip(), (kind.strip().lower() or "str")
        if not name.isidentifier():
            raise ConfigurationError(f"--schema: {name!r} is not a field name (use 'name: type, ...')")
        if kind not in _TYPES:
            raise ConfigurationError(f"--schema: unknown type {kind!r} for {name} (str, int, float, bool)")
        if name in properties:
            raise ConfigurationError(f"--schema: {name} is given twice")
        properties[name] = {"type": _TYPES[kind]}
    if not properties:
        raise ConfigurationError("--schema is empty")
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
