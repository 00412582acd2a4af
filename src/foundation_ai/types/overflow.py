"""Context-overflow detection across providers (seed 000, section 1; wire-notes section 1).

``is_overflow_text(text)`` recognises the error strings that ~20 providers return when a prompt
does not fit the model's context window. The patterns are compiled once, into one regex, on first use.
"""

from __future__ import annotations

import functools
import re

__all__ = ["OVERFLOW_PATTERNS", "is_overflow_text"]

OVERFLOW_PATTERNS: tuple[tuple[str, str], ...] = (
    ("Anthropic", r"prompt is too long"),
    ("Anthropic", r"input length and .?max_tokens.? exceed context limit"),
    ("Amazon Bedrock", r"input is too long for requested model"),
    ("Amazon Bedrock", r"too many input tokens"),
    ("OpenAI", r"exceeds the context window"),
    ("OpenAI, vLLM, OpenRouter", r"maximum context length is \d+ tokens"),
    ("Azure OpenAI", r"input tokens exceed the configured limit"),
    ("Google Gemini / Vertex", r"input token count.*exceeds the maximum"),
    ("xAI", r"maximum prompt length is \d+"),
    ("Groq", r"reduce the length of the messages"),
    ("Mistral", r"too large for model with \d+ maximum context length"),
    ("Perplexity", r"total length of all messages is too long"),
    ("GitHub Copilot", r"exceeds the limit of \d+"),
    ("llama.cpp server", r"exceeds the available context size"),
    ("LM Studio", r"greater than the context length"),
    ("SGLang", r"is longer than the model's context length"),
    ("Cerebras", r"current length is \d+ while limit is \d+"),
    ("MiniMax", r"context window exceeds limit"),
    ("Kimi", r"exceeded model token limit"),
    ("HF TGI", r"inputs.? tokens \+ .?max_new_tokens.? must be"),
    ("OpenAI code, generic", r"context[_ ]length[_ ]exceeded"),
    ("generic", r"too many tokens"),
    ("generic", r"token limit exceeded"),
    ("Cerebras, Mistral (no body)", r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)"),
)
"""(provider, pattern) pairs, matched case-insensitively; source: wire-notes section 1."""


@functools.cache
def _overflow_regex() -> re.Pattern[str]:
    """All patterns as one regex, compiled on first use (keeps ``import foundation_ai`` fast)."""
    return re.compile("|".join(f"(?:{p})" for _, p in OVERFLOW_PATTERNS), re.IGNORECASE | re.DOTALL)


def is_overflow_text(text: str) -> bool:
    """True when ``text`` (a provider error message or code) reports a context overflow.

    Rate limits (HTTP 429) and OpenAI's ``string_above_max_length`` are not overflows.
    """
    return _overflow_regex().search(text.strip()) is not None
