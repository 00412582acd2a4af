"""No "Task was destroyed but it is pending!" at exit (issue 10, item 13): a session on a
sync-only ``httpx2.Client`` leaves async generators that close in a worker thread; the blocking
calls wait for that clean-up (bounded) and closing the session or the interpreter finishes it,
even when a response takes long to close (a slow transport makes the race certain)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests._fixture_server import Canned, FixtureServer, sse

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve().parent / "_slow_close_client.py"


def chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


CALL = [
    chunk(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a":1,"b":2}'},
                }
            ],
        }
    ),
    chunk({}, "tool_calls"),
    "[DONE]",
]
ANSWER = [chunk({"role": "assistant", "content": "3"}), chunk({}, "stop"), "[DONE]"]


def test_a_sync_only_http_client_leaves_no_pending_task_at_exit() -> None:
    with FixtureServer() as srv:
        srv.queue(*(Canned(chunks=sse(c)) for c in (CALL, ANSWER, CALL, ANSWER)))
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), srv.base_url],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["3", "3"]
    assert "Task was destroyed" not in proc.stderr
    assert "Traceback" not in proc.stderr
