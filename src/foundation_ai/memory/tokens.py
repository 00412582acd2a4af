"""Token counts for context assembly and memory triggers.

- :class:`EstimateCounter`: a documented, deliberately conservative estimate for models whose
  tokenizer is not in this process (HTTP providers): a weight per character class, from the
  text's UTF-8 bytes (lowercase ASCII letter 0.2, uppercase 1, digit 1, whitespace 0.3, other
  ASCII 1, 2-byte character 1.25, 3-byte 2, Hangul 3, 4-byte such as emoji 4), never fewer than
  the whitespace-separated words. See ``docs/memory.md`` ("Token counts") for the rule's
  measured error per script.
- :class:`LlamaTokenCounter`: the exact count from a llama.cpp model's own tokenizer.
- :func:`counter_for`: the right one for a model.

A message costs its text's tokens plus :data:`MESSAGE_OVERHEAD` (role and framing tokens of a
chat template); a tool call counts its name and JSON arguments; an image counts
:data:`IMAGE_TOKENS`. See ``docs/memory.md``.
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

import msgspec

from ..types import (
    AssistantMessage,
    ImageContent,
    Messages,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "EstimateCounter",
    "LlamaTokenCounter",
    "MessageTokens",
    "TokenCounter",
    "counter_for",
    "message_text",
]

MESSAGE_OVERHEAD = 4
"""Tokens a chat template adds around each message (role marker, separators)."""
IMAGE_TOKENS = 800
"""Tokens counted for one image (providers charge from ~85 to ~1,600 depending on size)."""


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text for one model. ``name`` says how (shown in progress)."""

    name: str

    def count(self, text: str) -> int:
        """Tokens in ``text`` (>= 0)."""
        ...


def _class_table() -> bytes:
    """Byte -> class letter for :class:`EstimateCounter` (one ``bytes.translate`` pass)."""
    table = bytearray(b"p" * 256)  # other ASCII: punctuation, symbols, controls
    for b in range(256):
        if 0x61 <= b <= 0x7A:
            table[b] = ord("l")  # lowercase letter
        elif 0x41 <= b <= 0x5A:
            table[b] = ord("p")  # uppercase letter: weighs as punctuation
        elif 0x30 <= b <= 0x39:
            table[b] = ord("d")  # digit
        elif b in (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20):
            table[b] = ord("s")  # whitespace
        elif 0x80 <= b <= 0xBF:
            table[b] = ord("c")  # UTF-8 continuation byte: not counted
        elif 0xC0 <= b <= 0xDF:
            table[b] = ord("2")  # starts a 2-byte character (Latin accents, Cyrillic, Arabic...)
        elif 0xEA <= b <= 0xED:
            table[b] = ord("h")  # starts U+A000-U+DFFF: Hangul syllables
        elif 0xE0 <= b <= 0xEF:
            table[b] = ord("3")  # starts another 3-byte character (CJK, kana, Indic, Thai...)
        elif b >= 0xF0:
            table[b] = ord("4")  # starts a 4-byte character (emoji, rare CJK)
    return bytes(table)


_CLASSES = _class_table()
_WIDE_WEIGHTS = ((b"2", 1.25), (b"3", 2.0), (b"h", 3.0), (b"4", 4.0))


class EstimateCounter:
    """A conservative token estimate from character classes, for tokenizers not in this process.

    Weights per character (measured against the SmolLM2 and Llama 2 tokenizers, byte-level and
    byte-fallback BPE, to be at or above their counts for most scripts; the table of measured
    error per script is in ``docs/memory.md``, "Token counts"):

    ========================================  ======
    class                                     tokens
    ========================================  ======
    ASCII lowercase letter                    0.2
    ASCII whitespace                          0.3
    ASCII uppercase letter, digit, other      1
    2-byte UTF-8 character (U+0080-U+07FF)    1.25
    3-byte character (CJK, kana, Indic...)    2
    Hangul and U+A000-U+DFFF                  3
    4-byte character (emoji, rare CJK)        4
    ========================================  ======

    The sum is rounded up and never below the whitespace-separated word count. Cost: one UTF-8
    encode, one ``bytes.translate`` and a few ``bytes.count`` passes, all in C; a text of
    ASCII only skips the non-ASCII counts.

    Args:
        scale: a factor applied to the sum (default 1.0); e.g. 0.8 for a provider known to
            tokenize more compactly.

    Raises:
        ValueError: ``scale`` is not positive.
    """

    name = "estimate"

    def __init__(self, scale: float = 1.0) -> None:
        if not scale > 0:
            raise ValueError(f"scale must be positive, got {scale!r}")
        self.scale = scale

    def count(self, text: str) -> int:
        """Estimated tokens in ``text`` (>= 0); see the class docstring for the rule."""
        if not text:
            return 0
        if text.isascii():
            classes = text.encode("ascii").translate(_CLASSES)
            total = 0.2 * len(text)
        else:
            classes = text.encode("utf-8", "surrogatepass").translate(_CLASSES)
            ascii_n = len(text)
            total = 0.0
            for c, w in _WIDE_WEIGHTS:
                k = classes.count(c)
                ascii_n -= k
                total += w * k
            total += 0.2 * ascii_n
        # Above the 0.2 of every ASCII character: whitespace 0.1, the rest but lowercase 0.8.
        spaces = classes.count(b"s")
        total += 0.1 * spaces + 0.8 * classes.count(b"p")
        digits = classes.count(b"d")
        if digits:
            total += 0.8 * digits
            if digits * 16 > len(classes):  # number-heavy: a space before a digit and a letter
                # after one are tokens of their own (tokenizers that split digits one by one)
                total += 0.7 * classes.count(b"sd") + 0.8 * classes.count(b"dl")
        n = math.ceil(total * self.scale)
        if n <= spaces:  # only then can the words outnumber the estimate
            n = max(n, len(text.split()))
        return n


class LlamaTokenCounter:
    """The exact count of a llama.cpp model's tokenizer (``LlamaCppModel.count_tokens``: no BOS,
    special tokens counted as text)."""

    name = "tokenizer"

    def __init__(self, model: Any) -> None:
        self._model = model

    def count(self, text: str) -> int:
        if not text:
            return 0
        return int(self._model.count_tokens(text))


def counter_for(model: Any) -> TokenCounter:
    """The tokenizer of an in-process llama.cpp model (one with ``count_tokens``), else the estimate."""
    if callable(getattr(model, "count_tokens", None)):
        return LlamaTokenCounter(model)
    return EstimateCounter()


def message_text(m: Messages) -> str:
    """The text a message puts in a request: its text, thinking, tool call (name + JSON
    arguments) or tool result; ``""`` for an image."""
    content: Any = getattr(m, "content", None)
    if isinstance(content, TextContent):
        return content.content
    if isinstance(content, ThinkingContent):
        return content.thinking
    if isinstance(content, ToolCall):
        args = content.arguments if content.arguments is not None else content.raw_arguments
        return content.name + " " + msgspec.json.encode(args).decode()
    return ""


class MessageTokens:
    """Token counts of messages, memoised by message id (messages are immutable).

    Args:
        counter: how to count.
        max_entries: ids remembered (the oldest forgotten first).
    """

    def __init__(self, counter: TokenCounter, max_entries: int = 200_000) -> None:
        self.counter = counter
        self.max_entries = max_entries
        self._cache: dict[str, int] = {}

    def __call__(self, m: Messages) -> int:
        """Tokens of ``m`` including :data:`MESSAGE_OVERHEAD`."""
        n = self._cache.get(m.id)
        if n is None:
            content: Any = getattr(m, "content", None)
            n = MESSAGE_OVERHEAD + (
                IMAGE_TOKENS if isinstance(content, ImageContent) else self.counter.count(message_text(m))
            )
            if isinstance(m, ToolResultMessage):
                n += self.counter.count(m.name) + (
                    self.counter.count(m.error_detail) if m.error_detail else 0
                )
            if len(self._cache) >= self.max_entries:
                self._cache.pop(next(iter(self._cache)))
            self._cache[m.id] = n
        return n

    def text(self, text: str) -> int:
        """Tokens of a text block sent as one message (with :data:`MESSAGE_OVERHEAD`)."""
        return MESSAGE_OVERHEAD + self.counter.count(text)


def is_user(m: Messages) -> bool:
    """True for a ``Messages.User``."""
    return isinstance(m, UserMessage)


def is_call(m: Messages) -> bool:
    """True for an assistant tool call."""
    return isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall)
