"""Images in one call: ``agent.ask(["What is this?", Image.from_path("cat.png")])`` sends the text
and the image as one user turn (Anthropic: one message with two blocks; OpenAI Chat: the text
and the image part back to back)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from foundation_ai import AgentSession, Image
from foundation_ai.backends import anthropic, openai_chat
from foundation_ai.types import MimeType

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
CHAT_SSE = (
    'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    '"delta":{"role":"assistant","content":"a dot"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
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


def test_ask_sends_a_question_and_an_image_back_to_back_on_openai_chat(tmp_path: Path) -> None:
    bodies: list[dict[str, Any]] = []
    model = openai_chat("gpt-4o-mini", api_key="sk-test", http_client=_client(CHAT_SSE, bodies))
    agent = AgentSession.builder(model).build()
    assert agent.ask(["What is this?", Image.from_bytes(PNG)]) == "a dot"
    text, image = bodies[0]["messages"]
    assert text == {"role": "user", "content": "What is this?"}
    assert image["role"] == "user" and image["content"][0]["image_url"]["url"].startswith(
        "data:image/png;base64,"
    )
