"""What ``foundation-ai run`` sends: the prompt, piped stdin, attachments and ``--schema``.

- ``run "PROMPT"`` with text piped on stdin sends the piped text, a blank line, then PROMPT
  (``cat notes.txt | foundation-ai run "summarize"``, as ``llm`` does); ``run -`` or no PROMPT
  reads the prompt from stdin.
- ``-a PATH`` attaches an image (PNG, JPEG, GIF, WebP: sent as image content) or a UTF-8 text
  file (sent as a text message naming the file); ``-a URL`` (``http(s)://``) is passed on as a
  text message giving the URL: the CLI never downloads it.
- ``--schema`` is a JSON Schema object, or ``name: type, ...`` (types ``str``, ``int``,
  ``float``, ``bool``, default ``str``): the answer must be a JSON object with those fields
  (``OutputFormat.JsonSchema``, sent as each provider's structured-output mode).
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any, TextIO

from ..errors import ConfigurationError
from ..types import ImageContent, Messages, MimeType, UserMessage

__all__ = ["MAX_ATTACHMENT_BYTES", "attachment_messages", "parse_schema", "read_prompt"]

MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024
"""Largest file ``-a`` accepts (20 MiB, the OpenAI and Anthropic image limit's order)."""

_IMAGE_MAGIC: tuple[tuple[bytes, MimeType], ...] = (
    (b"\x89PNG\r\n\x1a\n", MimeType.Png),
    (b"\xff\xd8\xff", MimeType.Jpeg),
    (b"GIF87a", MimeType.Gif),
    (b"GIF89a", MimeType.Gif),
)


def _piped_text(stdin: TextIO) -> str:
    """All of stdin when it is not a terminal (``""`` when it is, or cannot be read)."""
    try:
        if stdin.isatty():
            return ""
        return stdin.read()
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
            :data:`MAX_ATTACHMENT_BYTES`, or one neither an image nor UTF-8 text.
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
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigurationError(
                f"-a {item}: not an image (png, jpeg, gif, webp) nor UTF-8 text"
            ) from None
        out.append(Messages.user(f"Attachment {os.path.basename(item)}:\n{text}"))
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
