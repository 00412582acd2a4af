"""Token counts for context assembly and memory triggers.

- :class:`EstimateCounter`: a documented estimate for models whose tokenizer is not in this
  process (HTTP providers): ``ceil(len(text) / 4)`` tokens, the usual "about 4 characters of
  English per token" rule (https://help.openai.com/en/articles/4936856), but never fewer than
  ``len(text.split())``.
- :class:`LlamaTokenCounter`: the exact count from a llama.cpp model's own tokenizer.
- :func:`counter_for`: the right one for a model.

A message costs its text's tokens plus :data:`MESSAGE_OVERHEAD` (role and framing tokens of a
chat template); a tool call counts its name and JSON arguments; an image counts
:data:`IMAGE_TOKENS`. See ``docs/memory.md``.
"""

from __future__ import annotations

import math
import threading
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


class EstimateCounter:
    """``max(ceil(len(text) / chars_per_token), words)``: see the module docstring."""

    name = "estimate"

    def __init__(self, chars_per_token: float = 4.0) -> None:
        self.chars_per_token = chars_per_token

    def count(self, text: str) -> int:
        if not text:
            return 0
        return max(math.ceil(len(text) / self.chars_per_token), len(text.split()))


class LlamaTokenCounter:
    """The exact count of a llama.cpp model's tokenizer (``Llama.tokenize``, no BOS)."""

    name = "tokenizer"

    def __init__(self, llama: Any) -> None:
        self._llama = llama
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        if not text:
            return 0
        with self._lock:
            return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))


def counter_for(model: Any) -> TokenCounter:
    """The tokenizer of an in-process llama.cpp model (``model.llama``), else the estimate."""
    llama = getattr(model, "llama", None)
    if llama is not None and hasattr(llama, "tokenize"):
        return LlamaTokenCounter(llama)
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
