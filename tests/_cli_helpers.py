"""Helpers for the CLI tests: an environment that never touches the user's directories, canned
OpenAI Chat Completions streams for the loopback fixture server, and a pseudo-terminal whose
output is drawn by a real terminal emulator (pyte)."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pyte

from tests._fixture_server import Canned, sse

CLI = [sys.executable, "-m", "foundation_ai"]
SRC = str(Path(__file__).resolve().parent.parent / "src")


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a CLI subprocess: config and data dirs under ``home`` (a tmp dir), no
    API keys, this worktree's sources first on the path."""
    drop = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "FOUNDATION_AI_HOME")  # the XDG dirs below decide
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(
        {
            "NO_PROXY": "127.0.0.1,localhost",
            "PYTHONUNBUFFERED": "1",
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_DATA_HOME": str(home / "data"),
            "HOME": str(home),
            "PYTHONPATH": os.pathsep.join([SRC, *filter(None, [os.environ.get("PYTHONPATH")])]),
        }
    )
    env.update(extra)
    return env


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def text_stream(text: str) -> Canned:
    """A Chat Completions stream answering ``text``."""
    return Canned(
        chunks=sse(
            [
                _chunk({"role": "assistant", "content": text}),
                _chunk({}, "stop"),
                {**_chunk({}), "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}},
                "[DONE]",
            ]
        )
    )


def tool_call_stream(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> Canned:
    """A Chat Completions stream calling tool ``name`` with ``arguments``."""
    call = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return Canned(
        chunks=sse(
            [
                _chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
                _chunk({}, "tool_calls"),
                "[DONE]",
            ]
        )
    )


class Terminal:
    """A pyte screen fed with everything a pexpect child wrote (``child.logfile_read``)."""

    def __init__(self, rows: int = 100, cols: int = 300) -> None:
        self.rows, self.cols = rows, cols
        self.log = io.BytesIO()

    def screen(self) -> pyte.Screen:
        screen = pyte.Screen(self.cols, self.rows)
        pyte.ByteStream(screen).feed(self.log.getvalue())
        return screen

    def text(self) -> str:
        """What the screen shows, one row per line, trailing spaces dropped."""
        return "\n".join(row.rstrip() for row in self.screen().display)
