"""The SSE streams of ``foundation-ai serve`` (Chat Completions and Responses) on a real uvicorn
server: every message is a complete SSE event in order (also when events pile up and are written
together), non-ASCII text arrives intact, and a failing turn ends the stream with an error the
official ``openai`` SDK raises."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from foundation_ai.agentic import ScriptedModel, fail, pause, say
from foundation_ai.serve import Agent
from foundation_ai.types import ModelInteraction
from tests._serve_helpers import serving

UNICODE = 'héllo — 世界 🙂 "quoted" \\ back\nslash'
PIECES = [f"p{i} " for i in range(60)]


def reply(inter: ModelInteraction) -> Any:
    text = inter.messages[-1].text() or ""
    if "boom" in text:
        return [say("partial answer"), fail("the provider broke")]
    if "unicode" in text:
        return say(UNICODE)
    if "many" in text:
        return [pause(0.3), *(say(p) for p in PIECES)]
    return say("ok")


def agent() -> Agent:
    return Agent("bot", model=ScriptedModel([reply] * 100, chunk_mode="delta"))


def sse_messages(raw: str) -> list[dict[str, str]]:
    """Split an SSE body into messages ({field: value}); every message must end with a blank line."""
    assert raw.endswith("\n\n"), "the stream ends on a message boundary"
    out = []
    for block in raw.split("\n\n")[:-1]:
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        out.append(fields)
    return out


def test_chat_stream_of_a_failing_turn_ends_with_an_error_the_sdk_raises(tmp_path: Path) -> None:
    with serving(tmp_path, agents=[agent()], no_auth=True) as (srv, _):
        c = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)
        got: list[str] = []
        with pytest.raises(openai.APIError, match="the turn failed"):
            for chunk in c.chat.completions.create(
                model="bot", messages=[{"role": "user", "content": "boom"}], stream=True
            ):
                got += [ch.delta.content for ch in chunk.choices if ch.delta.content]
        assert "".join(got) == "partial answer"


def test_responses_stream_of_a_failing_turn_ends_with_response_failed(tmp_path: Path) -> None:
    with serving(tmp_path, agents=[agent()], no_auth=True) as (srv, _):
        c = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)
        kinds = [ev.type for ev in c.responses.create(model="bot", input="boom", stream=True)]
        assert kinds[-1] == "response.failed"
        assert "response.output_text.delta" in kinds


def test_non_ascii_text_arrives_intact_in_both_formats(tmp_path: Path) -> None:
    with serving(tmp_path, agents=[agent()], no_auth=True) as (srv, _):
        c = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)
        chat = c.chat.completions.create(
            model="bot", messages=[{"role": "user", "content": "unicode"}], stream=True
        )
        assert "".join(ch.delta.content or "" for chunk in chat for ch in chunk.choices) == UNICODE
        deltas = [
            ev.delta
            for ev in c.responses.create(model="bot", input="unicode", stream=True)
            if ev.type == "response.output_text.delta"
        ]
        assert "".join(deltas) == UNICODE


@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_a_stream_read_late_is_every_event_in_order_as_complete_sse_messages(
    tmp_path: Path, fmt: str
) -> None:
    with serving(tmp_path, agents=[agent()], no_auth=True) as (srv, _):
        if fmt == "chat":
            url = srv.url + "/v1/chat/completions"
            body: dict[str, Any] = {"model": "bot", "messages": [{"role": "user", "content": "many"}]}
        else:
            url = srv.url + "/v1/responses"
            body = {"model": "bot", "input": "many"}
        with httpx2.stream("POST", url, json={**body, "stream": True}, timeout=30) as r:
            assert r.status_code == 200
            time.sleep(1.0)  # the turn runs on; its 60 pieces pile up before we read
            raw = r.read().decode()
    messages = sse_messages(raw)
    if fmt == "chat":
        assert messages[-1] == {"data": "[DONE]"}
        chunks = [json.loads(m["data"]) for m in messages[:-1]]
        assert all(ch["object"] == "chat.completion.chunk" for ch in chunks)
        text = "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks if ch["choices"])
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    else:
        events = [json.loads(m["data"]) for m in messages]
        assert [e["type"] for e in events] == [m["event"] for m in messages]
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
        assert events[-1]["type"] == "response.completed"
        output = events[-1]["response"]["output"]
        assert "".join(item["content"][0]["text"] for item in output) == "".join(PIECES)
    assert text == "".join(PIECES)
