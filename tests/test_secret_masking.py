"""A known secret never shows, in any derived form: cut short, upper- or lower-cased,
URL-encoded, base64 (alone or inside a longer base64 text), or as a base-URL password holding
``/``; in reprs, error texts, and the CLI's stderr and ``--json`` output (backends/_http/,
``redact``)."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from foundation_ai.backends._http import HttpOptions, mask_url, redact, url_secrets
from tests._fixture_server import Canned, FixtureServer

KEY = "sk-proj-Abc123XyZ789_secretKEYvalue0042"
SLASHY = "ak/9+Zz=Q_secret-value/xyz+TAIL"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _decoded(text: str) -> str:
    """The text of every base64 run in ``text``, decoded at each of the four alignments."""
    out = []
    for run in re.findall(r"[A-Za-z0-9+/_-]{16,}", text):
        for start in range(4):
            chunk = run[start:]
            chunk = chunk[: len(chunk) // 4 * 4]
            try:
                out.append(base64.b64decode(chunk.replace("-", "+").replace("_", "/")).decode("latin-1"))
            except ValueError:
                pass
    return "\n".join(out)


def leaks(text: str, secret: str, window: int = 12) -> list[str]:
    """Every ``window``-character piece of ``secret`` or of its URL-encoded forms found in
    ``text`` or in the decoded base64 runs of ``text`` (case-insensitively)."""
    low = (text + "\n" + _decoded(text)).lower()
    found = []
    for form in (secret, quote(secret, safe=""), quote_plus(secret)):
        for i in range(len(form) - window + 1):
            piece = form[i : i + window]
            if piece.lower() in low:
                found.append(piece)
    return found


FORMS = {
    "whole": f"Incorrect API key provided: {KEY}.",
    "upper": f"bad key {KEY.upper()}",
    "lower": f"bad key {KEY.lower()}",
    "prefix": f"key {KEY[:20]}... is invalid",
    "suffix": f"key ...{KEY[-15:]} is invalid",
    "quoted": f"url=https://h/?key={quote(KEY, safe='')}&x=1",
    "base64": f"token {b64(KEY)}",
    "bearer-in-base64": f"header {b64('Bearer ' + KEY)}",
    "basic-auth": f"Authorization: Basic {b64('user:' + KEY)}",
    "truncated-upper": f"{KEY[:16].upper()}",
}


@pytest.mark.parametrize("name", sorted(FORMS))
def test_every_derived_form_of_a_key_is_masked(name: str) -> None:
    text = FORMS[name]
    assert leaks(text, KEY), "the example must carry the secret"
    masked = redact(text, KEY)
    assert leaks(masked, KEY) == [], masked
    assert "***" in masked


@pytest.mark.parametrize(
    "text",
    [
        f"x {SLASHY} y",
        f"q={quote(SLASHY, safe='')}",
        f"q={quote_plus(SLASHY)}",
        f"q={quote(SLASHY)}",
        f"{b64(SLASHY)}",
        f"{SLASHY.upper()}",
    ],
)
def test_a_key_with_slash_and_plus_is_masked_when_url_encoded_or_base64(text: str) -> None:
    assert leaks(redact(text, SLASHY), SLASHY) == []


def test_text_without_the_secret_is_unchanged() -> None:
    text = "This model's maximum context length is 8192 tokens (code: context_length_exceeded)"
    assert redact(text, KEY) == text
    assert redact("sk-proj-other", KEY) == "sk-proj-other"  # a short shared prefix is not the key


def test_short_secrets_are_masked_exactly() -> None:
    assert redact("token abc12 here", "abc12") == "token *** here"
    assert redact("token ABC12 here", "abc12") == "token ABC12 here"


def test_base_url_password_with_slash_is_masked_in_reprs_and_errors() -> None:
    from foundation_ai.backends._openai_chat import openai_chat

    url = "http://user:pa/ss-SECRET-value@127.0.0.1:9/v1"
    assert mask_url(url) == "http://***@127.0.0.1:9/v1"
    assert "pa/ss-SECRET-value" in url_secrets(url)
    m = openai_chat("x", base_url=url, api_key=KEY, headers={"api-key": SLASHY})
    shown = repr(m)
    assert "SECRET" not in shown and leaks(shown, KEY) == [] and leaks(shown, SLASHY) == []
    opts = HttpOptions(api_key=KEY, base_url=url)
    assert "SECRET" not in opts.redact(f"cannot connect to {url}") and "SECRET" not in repr(opts)


def test_provider_error_echoing_derived_forms_is_masked_in_the_error_message() -> None:
    from foundation_ai.backends._openai_chat import openai_chat
    from foundation_ai.types import Messages, ModelInteraction

    body = (
        '{"error":{"message":"key '
        + KEY.upper()
        + " / "
        + KEY[:18]
        + " / "
        + b64("Bearer " + KEY)
        + '","code":"invalid_api_key"}}'
    )
    with FixtureServer() as srv:
        srv.queue(Canned(status=401, body=body.encode(), content_type="application/json"))
        m = openai_chat("x", base_url=srv.base_url, api_key=KEY, max_retries=0)
        last = m.generate(ModelInteraction(messages=[Messages.user("hi")]))[-1]
    detail = last.error_detail or ""
    assert "invalid_api_key" in detail and "***" in detail
    assert leaks(detail, KEY) == []


@pytest.fixture
def echo_server() -> Iterator[FixtureServer]:
    with FixtureServer() as s:
        yield s


def test_cli_stderr_and_json_never_show_a_derived_form(echo_server: FixtureServer, tmp_path: Path) -> None:
    body = (
        '{"error":{"message":"Incorrect API key provided: '
        + KEY.lower()
        + " ("
        + quote(KEY, safe="")
        + ", "
        + KEY[-14:]
        + ')","code":"invalid_api_key"}}'
    )
    echo_server.queue(Canned(status=401, body=body.encode(), content_type="application/json"))
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update({"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": echo_server.base_url, "NO_PROXY": "127.0.0.1"})
    for extra in ([], ["--json"]):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "foundation_ai",
                "run",
                "hi",
                "--model",
                "openai:x",
                "--db",
                str(tmp_path / "s.db"),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        both = r.stdout + r.stderr
        assert "invalid_api_key" in both, both
        assert leaks(both, KEY) == [], both
    assert echo_server.requests[-1].headers["authorization"] == f"Bearer {KEY}"  # paired host: key sent
