"""Context-overflow detection across providers and servers.

``is_overflow_text(text)`` recognises the error strings that ~30 providers and inference
servers return when a prompt does not fit the model's context window (the list, with a sample of
each wording and where it comes from, is in docs/providers.md, "Context overflow"). The patterns
are compiled once, into one regex, on first use.
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
    ("vLLM", r"is too long to fit into the model"),
    ("vLLM", r"longer than the maximum model length"),
    ("vLLM", r"input prompt \(\d+ tokens\) is too long and exceeds limit of \d+"),
    ("SGLang, Fireworks", r"exceeds the model's maximum context length"),
    ("SGLang", r"exceeds the maximum allowed length"),
    ("HF TGI, Together", r"inputs.? must have less than \d+ tokens"),
    ("Ollama, LM Studio", r"input (?:length )?(?:\d+ )?exceeds (?:the )?context length"),
    ("LM Studio", r"when context the overflows"),
    ("LM Studio, llama.cpp", r"n_keep \(?\d+\)? >= n_ctx"),
    ("llama.cpp server", r"exceed_context_size_error"),
)
"""(provider, pattern) pairs, matched case-insensitively; the wordings are listed with samples and
sources in docs/providers.md ("Context overflow")."""


@functools.cache
def _overflow_regex() -> re.Pattern[str]:
    """All patterns as one regex, compiled on first use (keeps ``import foundation_ai`` fast)."""
    return re.compile("|".join(f"(?:{p})" for _, p in OVERFLOW_PATTERNS), re.IGNORECASE | re.DOTALL)


def is_overflow_text(text: str) -> bool:
    """True when ``text`` (a provider error message or code) reports a context overflow.

    Rate limits (HTTP 429, including Groq's "Request too large ... tokens per minute") and
    OpenAI's ``string_above_max_length`` are not overflows.
    """
    return _overflow_regex().search(text.strip()) is not None
