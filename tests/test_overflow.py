"""``Messages.is_context_overflow`` (seed 000 section 1; every pattern of wire-notes section 1).

Each pattern is checked with a realistic provider error text, as the backends put it in
``error_detail`` of an Assistant message with ``StopReason.Error``.
"""

from __future__ import annotations

import pytest

from foundation_ai.types import (
    OVERFLOW_PATTERNS,
    Messages,
    ModelId,
    ModelOutput,
    StopReason,
    TextContent,
    UsageReport,
    is_overflow_text,
)

# (provider, pattern as listed in wire-notes section 1, realistic error text)
CASES: list[tuple[str, str, str]] = [
    ("Anthropic", r"prompt is too long", "prompt is too long: 213462 tokens > 200000 maximum"),
    (
        "Anthropic",
        r"input length and .?max_tokens.? exceed context limit",
        "input length and `max_tokens` exceed context limit: 150000 + 64000 > 200000, decrease input length or "
        "`max_tokens` and try again",
    ),
    (
        "Amazon Bedrock",
        r"input is too long for requested model",
        "ValidationException: Input is too long for requested model.",
    ),
    (
        "Amazon Bedrock",
        r"too many input tokens",
        "An error occurred (ValidationException) when calling the Converse operation: Too many input tokens. "
        "Max input tokens: 8192, request input token count: 9021",
    ),
    (
        "OpenAI",
        r"exceeds the context window",
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
    ),
    (
        "OpenAI, vLLM, OpenRouter",
        r"maximum context length is \d+ tokens",
        "This model's maximum context length is 32768 tokens. However, you requested 56262 tokens (48262 in the "
        "messages, 8000 in the completion). Please reduce the length of the messages or completion.",
    ),
    (
        "Azure OpenAI",
        r"input tokens exceed the configured limit",
        "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 301234 tokens. "
        "Please reduce the length of the messages.",
    ),
    (
        "Google Gemini / Vertex",
        r"input token count.*exceeds the maximum",
        "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).",
    ),
    (
        "xAI",
        r"maximum prompt length is \d+",
        "This model's maximum prompt length is 131072 but the request contains 537812 tokens.",
    ),
    (
        "Groq",
        r"reduce the length of the messages",
        "Please reduce the length of the messages or completion.",
    ),
    (
        "Mistral",
        r"too large for model with \d+ maximum context length",
        "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
    ),
    (
        "Perplexity",
        r"total length of all messages is too long",
        "The total length of all messages is too long for this model. Please shorten your conversation.",
    ),
    (
        "GitHub Copilot",
        r"exceeds the limit of \d+",
        "prompt token count of 140000 exceeds the limit of 128000",
    ),
    (
        "llama.cpp server",
        r"exceeds the available context size",
        "the request exceeds the available context size, try increasing it",
    ),
    (
        "LM Studio",
        r"greater than the context length",
        "Trying to keep the first 5000 tokens when context the overflows. However, the model is loaded with context "
        "length of 4096, so tokens to keep from the initial prompt is greater than the context length",
    ),
    (
        "SGLang",
        r"is longer than the model's context length",
        "The input (40000 tokens) is longer than the model's context length (32768 tokens).",
    ),
    (
        "Cerebras",
        r"current length is \d+ while limit is \d+",
        "Please reduce the length of the messages or completion. Current length is 70000 while limit is 65536",
    ),
    ("MiniMax", r"context window exceeds limit", "invalid params, context window exceeds limit (2013)"),
    (
        "Kimi",
        r"exceeded model token limit",
        "Invalid request: Your request exceeded model token limit: 262144 (requested: 300000)",
    ),
    (
        "HF TGI",
        r"inputs.? tokens \+ .?max_new_tokens.? must be",
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens "
        "and 512 `max_new_tokens`",
    ),
    ("OpenAI code, generic", r"context[_ ]length[_ ]exceeded", "context_length_exceeded"),
    ("generic", r"context[_ ]length[_ ]exceeded", "Error: context length exceeded for model qwen2.5"),
    ("generic", r"too many tokens", "Request failed: too many tokens in prompt"),
    ("generic", r"token limit exceeded", "Token limit exceeded for this request"),
    (
        "Cerebras, Mistral (no body)",
        r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)",
        "413 status code (no body)",
    ),
    ("Cerebras, Mistral (no body)", r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)", "400 (no body)"),
]

NEGATIVES: list[str] = [
    "429 Too Many Requests",
    "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, "
    "Requested 3000. Please try again in 4.2s.",
    "rate_limit_error: Number of request tokens has exceeded your per-minute rate limit",
    "Invalid 'input[2].output': string too long. Expected a string with maximum length 10485760, but got a string "
    "with length 12000000 instead. (code: string_above_max_length)",
    "string_above_max_length",
    "overloaded_error: Overloaded",
    "500 status code (no body)",
    "Incorrect API key provided",
    "The model `gpt-5` does not exist or you do not have access to it.",
    "max_tokens: 300000 > 128000, which is the maximum allowed number of output tokens for claude-sonnet-4-5",
]

# Hardening round 2: the wordings of common inference servers and hosted APIs (samples from their
# issue trackers and docs; docs/providers.md lists the sources).
CASES += [
    (
        "vLLM",
        r"is too long to fit into the model",
        "ValueError: The prompt (total length 25938) is too long to fit into the model (context length 4096). "
        "Make sure that `max_model_len` is no smaller than the number of text tokens plus multimodal tokens.",
    ),
    (
        "vLLM",
        r"longer than the maximum model length",
        "The decoder prompt (length 10127) is longer than the maximum model length of 8192. Make sure that "
        "`max_model_len` is no smaller than the number of text tokens plus multimodal tokens. (HTTP 400)",
    ),
    (
        "vLLM",
        r"input prompt \(\d+ tokens\) is too long and exceeds limit of \d+",
        "Input prompt (9000 tokens) is too long and exceeds limit of 8192 (HTTP 400)",
    ),
    (
        "SGLang, Fireworks",
        r"exceeds the model's maximum context length",
        "Requested token count exceeds the model's maximum context length of 202752 tokens. You requested a "
        "total of 202941 tokens: 170941 tokens from the input messages and 32000 tokens for the completion.",
    ),
    (
        "SGLang",
        r"exceeds the maximum allowed length",
        "Input length (160062 tokens) exceeds the maximum allowed length (59862 tokens).",
    ),
    (
        "HF TGI, Together",
        r"inputs.? must have less than \d+ tokens",
        "Input validation error: `inputs` must have less than 2048 tokens. Given: 2222 (HTTP 422)",
    ),
    (
        "Ollama, LM Studio",
        r"input (?:length )?(?:\d+ )?exceeds (?:the )?context length",
        "the input length exceeds the context length (HTTP 400)",
    ),
    (
        "LM Studio",
        r"when context the overflows",
        "Trying to keep the first 15857 tokens when context the overflows. However, the model is loaded with "
        "context length of only 8192 tokens, which is not enough. Try to load the model with a larger context "
        "length, or provide a shorter input",
    ),
    (
        "LM Studio, llama.cpp",
        r"n_keep \(?\d+\)? >= n_ctx",
        "Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)",
    ),
    (
        "llama.cpp server",
        r"exceed_context_size_error",
        "the request exceeds the available context size, try increasing it (code: exceed_context_size_error, "
        "HTTP 400)",
    ),
]
# More realistic texts of patterns already listed (each must be recognised too).
MORE_OVERFLOWS = [
    # vLLM (OpenAI-compatible server)
    "This model's maximum context length is 16384 tokens. However, you requested 122946 tokens (112946 in the "
    "messages, 10000 in the completion). Please reduce the length of the messages or completion. (HTTP 400)",
    # SGLang
    "The input (61709 tokens) is longer than the model's context length (40960 tokens). (HTTP 400)",
    # HF TGI / Together
    "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 32768. Given: 30000 `inputs` tokens "
    "and 4096 `max_new_tokens`",
    # Ollama (an older LM Studio wording too)
    "Error: Input length 6491 exceeds context length 1500",
    # LM Studio
    "The number of tokens to keep from the initial prompt is greater than the context length. Try to load the "
    "model with a larger context length, or provide a shorter input",
    # llama.cpp server
    "the request exceeds the available context size, try increasing it",
    # Groq
    "Please reduce the length of the messages or completion. (code: context_length_exceeded, HTTP 400)",
    # Mistral
    "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
    # Amazon Bedrock
    "ValidationException: Input is too long for requested model.",
    # Vertex AI / Gemini (native and OpenAI compatibility)
    "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575). (HTTP 400)",
    # DeepSeek
    "This model's maximum context length is 131072 tokens. However, you requested 140000 tokens (131808 in the "
    "messages, 8192 in the completion). Please reduce the length of the messages or completion.",
    # Fireworks
    "The prompt is too long: 140000, model maximum context length: 131072",
    # OpenRouter
    "This endpoint's maximum context length is 200000 tokens. However, you requested about 263607 tokens "
    "(255607 of text input, 8000 in the output). Please reduce the length of either one, or use the "
    '"middle-out" transform to compress your prompt automatically.',
]
NEGATIVES += [
    # Groq's per-minute limit says "too large" and "tokens" but is a rate limit
    "Request too large for model `llama3-70b-8192` in organization `org_01` service tier `on_demand` on tokens "
    "per minute (TPM): Limit 6000, Requested 7500, please reduce your message size and try again. "
    "(code: rate_limit_exceeded, HTTP 413)",
    "Rate limit reached for gpt-4o in organization org-1 on tokens per min (TPM): Limit 30000, Used 29000, "
    "Requested 2000. Please try again in 2s. (HTTP 429)",
    "This request would exceed your organization's rate limit of 20,000,000 prompt bytes per hour",
    "Resource has been exhausted (e.g. check quota). (code: RESOURCE_EXHAUSTED, HTTP 429)",
    "Requests rate limit exceeded (HTTP 429)",
    "ThrottlingException: Too many requests, please wait before trying again.",
]


@pytest.mark.parametrize("text", MORE_OVERFLOWS)
def test_more_server_overflow_wordings_are_overflow(text: str) -> None:
    assert is_overflow_text(text)
    assert error_message(text).is_context_overflow()


def test_vllm_input_prompt_too_long_wording_is_context_overflow() -> None:
    # vLLM's OpenAI server (serving engine's prompt-length check) words it this way
    text = "Input prompt (9000 tokens) is too long and exceeds limit of 8192"
    assert is_overflow_text(text)
    assert error_message(text + " (HTTP 400)").is_context_overflow()
    assert not is_overflow_text("Input prompt is fine and within the limit of 8192")


def error_message(detail: str) -> Messages:
    return Messages.Assistant(
        model=ModelId.Name("m"), content=TextContent(""), stop_reason=StopReason.ERROR, error_detail=detail
    )


def test_every_wire_notes_pattern_is_covered() -> None:
    listed = {p for _, p in OVERFLOW_PATTERNS}
    tested = {p for _, p, _ in CASES}
    assert listed == tested


@pytest.mark.parametrize(("provider", "pattern", "text"), CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_provider_overflow_error_is_overflow(provider: str, pattern: str, text: str) -> None:
    assert is_overflow_text(text), provider
    assert is_overflow_text(text.upper()), "matching is case-insensitive"
    assert error_message(text).is_context_overflow()
    assert error_message(text).is_context_overflow(context_window=1_000_000)


@pytest.mark.parametrize("text", NEGATIVES)
def test_not_overflow(text: str) -> None:
    assert not is_overflow_text(text)
    assert not error_message(text).is_context_overflow(context_window=8192)


def test_overflow_text_needs_error_stop_reason() -> None:
    text = "prompt is too long: 213462 tokens > 200000 maximum"
    for stop in (StopReason.STOP, StopReason.LENGTH, StopReason.TOOL_USE):
        msg = Messages.Assistant(
            model=ModelId.Name("m"), content=TextContent(text), stop_reason=stop, error_detail=text
        )
        assert not msg.is_context_overflow()


def test_error_without_detail_is_not_overflow() -> None:
    assert not Messages.Assistant(
        model=ModelId.Name("m"), content=TextContent(""), stop_reason=StopReason.ERROR
    ).is_context_overflow()


def _answer(input_tokens: float, cache_read: float, stop: StopReason = StopReason.STOP) -> Messages:
    return Messages.Assistant(
        model=ModelId.Name("m"),
        content=ModelOutput.Text("ok"),
        usage=UsageReport.of(input=input_tokens, output=10, cache_read=cache_read),
        stop_reason=stop,
    )


def test_silent_overflow_via_usage() -> None:
    assert _answer(7000, 1500).is_context_overflow(context_window=8192)  # 8500 > 8192
    assert not _answer(7000, 1192).is_context_overflow(context_window=8192)  # exactly the window
    assert not _answer(7000, 1500).is_context_overflow()  # no window given
    assert not _answer(9000, 0, StopReason.LENGTH).is_context_overflow(context_window=8192)  # only for Stop
