"""Images in one call: ``agent.ask(["What is this?", Image.from_path("cat.png")])`` sends the text
and the image as one user message with two parts: Anthropic (a text and an image block), OpenAI
Chat Completions (a ``text`` and an ``image_url`` part), OpenAI Responses (an ``input_text`` and
an ``input_image`` part)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from foundation_ai import AgentSession, Image
from foundation_ai.backends import anthropic, openai_chat, openai_responses
from foundation_ai.types import MimeType

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
CHAT_SSE = (
    'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    '"delta":{"role":"assistant","content":"a dot"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)
RESPONSES_SSE = (
    'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"msg_1",'
    '"output_index":0,"content_index":0,"delta":"a dot"}\n\n'
    'event: response.completed\ndata: {"type":"response.completed","response":{"id":"r","status":'
    '"completed","model":"gpt-4.1","output":[{"type":"message","id":"msg_1","role":"assistant",'
    '"content":[{"type":"output_text","text":"a dot"}]}],"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
)
ANTHROPIC_SSE = (
    'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":'
    '"assistant","model":"claude-x","content":[],"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":'
    '{"type":"text","text":""}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
    '{"type":"text_delta","text":"a dot"}}\n\n'
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    '"usage":{"output_tokens":1}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def _client(sse: str, bodies: list[dict[str, Any]]) -> httpx2.Client:
    def handler(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        return httpx2.Response(200, content=sse.encode(), headers={"content-type": "text/event-stream"})

    return httpx2.Client(transport=httpx2.MockTransport(handler))


def test_an_image_file_is_read_with_its_format_told_by_its_bytes(tmp_path: Path) -> None:
    (tmp_path / "dot.img").write_bytes(PNG)  # the name says nothing: the bytes do
    img = Image.from_path(tmp_path / "dot.img")
    assert img.mime_type is MimeType.Png and base64.b64decode(img.b64) == PNG
    (tmp_path / "notes.png").write_text("not an image")
    with pytest.raises(ValueError, match=r"notes\.png: not a PNG, JPEG, GIF or WebP"):
        Image.from_path(tmp_path / "notes.png")
    with pytest.raises(ValueError, match="unsupported image type"):
        Image.from_bytes(PNG, "image/tiff")


def test_ask_sends_a_question_and_an_image_as_one_anthropic_message_with_two_blocks(tmp_path: Path) -> None:
    (tmp_path / "cat.png").write_bytes(PNG)
    bodies: list[dict[str, Any]] = []
    model = anthropic("claude-x", api_key="sk-ant-test", http_client=_client(ANTHROPIC_SSE, bodies))
    agent = AgentSession.builder(model).build()
    assert agent.ask(["What is this?", Image.from_path(tmp_path / "cat.png")]) == "a dot"
    (user,) = bodies[0]["messages"]
    assert user["role"] == "user"
    assert [b["type"] for b in user["content"]] == ["text", "image"]
    assert user["content"][1]["source"]["media_type"] == "image/png"


def test_ask_sends_a_question_and_an_image_as_one_openai_chat_message_with_two_parts() -> None:
    bodies: list[dict[str, Any]] = []
    model = openai_chat("gpt-4o-mini", api_key="sk-test", http_client=_client(CHAT_SSE, bodies))
    agent = AgentSession.builder(model).build()
    assert agent.ask(["What is this?", Image.from_bytes(PNG)]) == "a dot"
    (user,) = bodies[0]["messages"]
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert user == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": url}},
        ],
    }
    # the next turn sends the first one as it was (the cached prefix included) and the new text alone
    assert agent.ask("And now?") == "a dot"
    assert bodies[1]["messages"][0] == user
    assert bodies[1]["messages"][1:] == [
        {"role": "assistant", "content": "a dot"},
        {"role": "user", "content": "And now?"},
    ]


def test_an_image_before_its_question_and_two_texts_on_openai_chat() -> None:
    """The parts keep the caller's order; two texts without an image stay two messages."""
    bodies: list[dict[str, Any]] = []
    model = openai_chat("gpt-4o-mini", api_key="sk-test", http_client=_client(CHAT_SSE, bodies))
    agent = AgentSession.builder(model).build()
    agent.ask([Image.from_bytes(PNG), "What is this?", "Be brief."])
    (user,) = bodies[0]["messages"]
    assert [p["type"] for p in user["content"]] == ["image_url", "text", "text"]
    assert [p.get("text") for p in user["content"]] == [None, "What is this?", "Be brief."]
    agent.ask(["One.", "Two."])
    assert bodies[1]["messages"][-2:] == [
        {"role": "user", "content": "One."},
        {"role": "user", "content": "Two."},
    ]


def test_ask_sends_a_question_and_an_image_as_one_openai_responses_message() -> None:
    bodies: list[dict[str, Any]] = []
    model = openai_responses("gpt-4.1", api_key="sk-test", http_client=_client(RESPONSES_SSE, bodies))
    agent = AgentSession.builder(model).build()
    assert agent.ask(["What is this?", Image.from_bytes(PNG)]) == "a dot"
    (user,) = bodies[0]["input"]
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert user == {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": url, "detail": "auto"},
        ],
    }
    assert agent.ask("And now?") == "a dot"
    assert bodies[1]["input"][0] == user
    assert [i["role"] for i in bodies[1]["input"]] == ["user", "assistant", "user"]
