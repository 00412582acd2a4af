"""Seeing what is sent (docs/models.md, "Seeing what is sent"): the HTTP backends log each
request (URL, headers, body) and the answer's status and time on the ``foundation_ai.http``
logger, with every configured secret masked; ``foundation-ai -v`` shows it on stderr."""

from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path

import httpx2
import pytest

from foundation_ai.backends import openai_chat
from foundation_ai.types import Messages, ModelInteraction
from tests._cli_helpers import CLI, cli_env, text_stream
from tests._fixture_server import FixtureServer

KEY = "sk-proj-Secret0123456789abcdef"
SSE = (
    'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    '"delta":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)


def test_requests_and_answers_are_logged_with_every_secret_masked(caplog: pytest.LogCaptureFixture) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=SSE.encode(), headers={"content-type": "text/event-stream"})

    model = openai_chat(
        "gpt-4o-mini",
        api_key=KEY,
        headers={"X-Api-Key": KEY, "X-Trace": "t-1"},
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    caplog.set_level(logging.DEBUG, logger="foundation_ai.http")
    # the model echoes nothing, but the prompt carries the key: the body is masked too
    out = model.generate(ModelInteraction(messages=[Messages.user(f"my key is {KEY}")]))
    assert out[0].text() == "ok"
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "foundation_ai.http")
    assert "POST https://api.openai.com/v1/chat/completions (attempt 1)" in text
    assert '"model":"gpt-4o-mini"' in text and "my key is ***" in text
    assert "'X-Trace': 't-1'" in text and "'X-Api-Key': '***'" in text
    assert "-> HTTP 200 after" in text
    assert KEY not in text and KEY[:12] not in text


def test_nothing_is_formatted_when_the_logger_is_off(caplog: pytest.LogCaptureFixture) -> None:
    model = openai_chat(
        "gpt-4o-mini",
        api_key=KEY,
        http_client=httpx2.Client(
            transport=httpx2.MockTransport(
                lambda r: httpx2.Response(
                    200, content=SSE.encode(), headers={"content-type": "text/event-stream"}
                )
            )
        ),
    )
    caplog.set_level(logging.INFO, logger="foundation_ai.http")
    model.generate(ModelInteraction(messages=[Messages.user("Hi")]))
    assert [r for r in caplog.records if r.name == "foundation_ai.http"] == []


def test_the_cli_verbose_flag_shows_the_request_on_stderr_with_the_key_masked(tmp_path: Path) -> None:
    with FixtureServer() as srv:
        srv.queue(text_stream("Hello there"))
        for argv in (["-v", "-m", "openai:llama"], ["run", "-v", "-m", "openai:llama"]):
            proc = subprocess.run(
                [*CLI, *argv, "--base-url", srv.base_url + "/v1", "--key", KEY, "-q", "Hi"],
                capture_output=True,
                text=True,
                env=cli_env(tmp_path),
                timeout=120,
            )
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout.strip() == "Hello there"
            assert "foundation_ai.http: POST http://127.0.0.1:" in proc.stderr
            assert "-> HTTP 200 after" in proc.stderr and KEY not in proc.stderr
        sent = srv.requests[-1].json()
        assert "temperature" not in sent and "max_tokens" not in sent  # only what the user set
        assert json.dumps(sent)  # a real body reached the server
