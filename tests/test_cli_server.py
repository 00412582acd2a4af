"""``foundation-ai run`` against a real llama.cpp server on loopback (``tests/_llama_server.py``),
through each HTTP backend: ``--model openai:smollm2 --base-url``, ``responses:`` and
``anthropic:`` (llama-server speaks all three wire formats). No API key is set: with
``--base-url`` none is needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._llama_server import LlamaServerHandle

CLI = [sys.executable, "-m", "foundation_ai"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["NO_PROXY"] = "127.0.0.1,localhost"
    return env


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, env=_env())


@pytest.mark.parametrize("provider", ["openai", "responses", "anthropic"])
def test_run_against_loopback_llama_server(
    llama_server: LlamaServerHandle, tmp_path: Path, provider: str
) -> None:
    db = tmp_path / "s.sqlite3"
    r = run(
        "run", "Say hello.", "--model", f"{provider}:smollm2", "--base-url", llama_server.base_url,
        "--max-tokens", "12", "--seed", "7", "--temperature", "0", "--db", str(db), "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert events[-1]["type"] == "done"
    assert events[-1]["summary"]["outcome"] == "completed"
    text = "".join(e["text"] for e in events if e["type"] == "text")
    assert text.strip()
    # the turn was persisted: `show` prints the prompt and the answer
    listing = run("sessions", "--db", str(db)).stdout.splitlines()
    session_id = listing[1].split()[0]
    shown = run("show", session_id, "--db", str(db))
    assert "you> Say hello." in shown.stdout
    assert text.strip().split()[0] in shown.stdout


def test_plain_run_prints_the_answer(llama_server: LlamaServerHandle, tmp_path: Path) -> None:
    r = run(
        "run", "What is 2 + 2?", "--model", "openai:smollm2", "--base-url", f"{llama_server.base_url}/v1",
        "--max-tokens", "12", "--seed", "7", "--temperature", "0", "--db", str(tmp_path / "s.sqlite3"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
    assert "tokens: " in r.stderr
