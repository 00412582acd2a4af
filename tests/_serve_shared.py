"""For the several-processes serve tests: a loopback OpenAI-compatible model server that records
every request, and ``wait_gate``, a tool that blocks until the test opens its gate (a file), so
a turn stays running exactly as long as the test needs, with no timing.

The model's script, per request: the turn's task is the last user message starting with
``task:``; with no tool result after it the model calls ``wait_gate(key=<task>)``, after one it
answers ``done <task>`` (streamed in a few chunks; for a task containing ``hold``, the chunks
after the first wait for the file ``<gate>.text``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from foundation_ai.agentic.tools import tool


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def task_of(body: dict[str, Any]) -> tuple[str, bool]:
    """``(task, answered)``: the request's task and whether a tool result follows it."""
    msgs = body["messages"]
    at = max(i for i, m in enumerate(msgs) if m["role"] == "user" and _text(m["content"]).startswith("task:"))
    return _text(msgs[at]["content"]), any(m["role"] == "tool" for m in msgs[at + 1 :])


def gate_name(key: str) -> str:
    """The gate file's name for a task."""
    return re.sub(r"[^A-Za-z0-9]+", "_", key)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: GatedModelServer

    def log_message(self, *a: Any) -> None:
        pass

    def do_POST(self) -> None:
        try:
            self._answer()
        except (BrokenPipeError, ConnectionResetError):  # the client stopped the stream (an abort)
            pass

    def _answer(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        with self.server.lock:
            self.server.bodies.append(body)
            k = len(self.server.bodies)
        task, answered = task_of(body)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def send(obj: Any) -> None:
            data = ("data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": f"chatcmpl-{k}",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": "fake",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        if not answered:
            calls = [
                {"index": j, "id": f"call_{k}_{j}", "type": "function", "function": call}
                for j, call in enumerate(self.server.calls_for(task))
            ]
            send(chunk({"role": "assistant", "tool_calls": calls}))
            send(chunk({}, "tool_calls"))
        else:
            held = self.server.gates / (gate_name(task) + ".text")
            for i, w in enumerate(self.server.answer_for(task, body).split(" ")):
                send(chunk({"role": "assistant", "content": w} if i == 0 else {"content": " " + w}))
                while "hold" in task and not held.exists():  # the rest waits for the test
                    time.sleep(0.02)
            send(chunk({}, "stop"))
        send({**chunk({}), "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3}})
        send("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class GatedModelServer(ThreadingHTTPServer):
    """``with GatedModelServer() as srv``: ``srv.base_url``; ``srv.bodies`` every request body."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[dict[str, Any]] = []
        self.gates = Path(".")  # where the ".text" files of held answers appear (set by the test)
        self.lock = threading.Lock()
        self.base_url = f"http://127.0.0.1:{self.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    def calls_for(self, task: str) -> list[dict[str, str]]:
        """The calls (``{"name", "arguments"}``) the model makes first for ``task``."""
        return [{"name": "wait_gate", "arguments": json.dumps({"key": task})}]

    def answer_for(self, task: str, body: dict[str, Any]) -> str:
        """The model's answer once the calls have results (``body``: the request)."""
        return f"done {task}"

    def requests_for(self, task: str) -> list[dict[str, Any]]:
        """The request bodies of one task, in order."""
        with self.lock:
            return [b for b in self.bodies if task_of(b)[0] == task]

    def __enter__(self) -> GatedModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


@tool
async def wait_gate(key: str) -> str:
    """Wait until the test opens the gate of ``key`` (writes ``<gate>.pid``: who waits).

    Args:
        key: the task.
    """
    gate = Path(os.environ["FA_GATES"]) / gate_name(key)
    gate.with_suffix(".pid").write_text(str(os.getpid()))  # which process runs the turn
    while not gate.exists():
        await asyncio.sleep(0.02)
    return f"gate {key} opened"
