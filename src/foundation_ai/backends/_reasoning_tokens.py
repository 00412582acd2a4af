"""Reasoning tokens counted exactly once, whatever the server's usage convention."""

from __future__ import annotations

__all__ = ["billed_output"]


def billed_output(completion: float, reasoning: float, prompt: float, total: float | None) -> float:
    """Output tokens as billed, reasoning tokens counted exactly once.

    OpenAI, DeepSeek, Groq and OpenRouter include reasoning tokens in ``completion_tokens``
    (``completion_tokens_details.reasoning_tokens`` is a part of it; ``total_tokens`` = prompt +
    completion). xAI leaves them out of ``completion_tokens`` and counts them in
    ``total_tokens`` (= prompt + completion + reasoning) and in the bill. So: when
    ``total_tokens`` equals prompt + completion + reasoning (and not prompt + completion), the
    reasoning tokens are added; else ``completion_tokens`` is the output. Units: tokens.
    Sources: https://platform.openai.com/docs/guides/reasoning (usage),
    https://docs.x.ai/docs/guides/reasoning ("reasoning_tokens ... billed as output"),
    https://api-docs.deepseek.com/api/create-chat-completion (usage),
    https://openrouter.ai/docs/use-cases/usage-accounting; see docs/providers.md.
    """
    if (
        reasoning > 0
        and total is not None
        and total == prompt + completion + reasoning
        and total != prompt + completion
    ):
        return completion + reasoning
    return completion
