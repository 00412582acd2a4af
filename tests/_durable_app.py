"""A loopback OpenAI-compatible model server with a fixed per-token delay, and the agent that
durable-turn worker processes run against it (``--agent tests._durable_app:agent``).

The server is deterministic and stateless: for the last user message ``P`` of a request it
answers, by the number of tool results after ``P``: 0 -> a call ``record_fact(note=P)``,
1 -> a call ``slow_lookup(key=P)``, 2 -> the text ``"done: P"`` streamed word by word (each
chunk after ``FA_TOKEN_DELAY`` seconds). Only 127.0.0.1 is bound.

Environment read by :func:`agent` (in the worker): ``FA_MODEL_URL`` (the server),
``FA_EFFECTS_DB`` (SQLite file of the ``effects`` table ``record_fact`` writes one row to per
run), ``FA_SLOW`` (seconds ``slow_lookup`` sleeps), ``FA_GATE`` (a file ``slow_lookup`` waits
for), ``FA_PROBE`` / ``FA_FACT_SLOW`` (instrumentation: the tools note their start in a
``probe`` table; ``record_fact`` sleeps before its write).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from foundation_ai.agentic import AgentSession
from foundation_ai.agentic.tools import tool
from foundation_ai.durable import current_call_id, side_effects


def script(body: dict[str, Any]) -> dict[str, Any]:
    """What the fake model answers to a request body: ``{"call": (name, args)}`` or ``{"text": str}``."""
    msgs = body["messages"]
    last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    prompt = msgs[last_user]["content"]
    if isinstance(prompt, list):
        prompt = "".join(p.get("text", "") for p in prompt)
    results = sum(1 for m in msgs[last_user + 1 :] if m["role"] == "tool")
    if results == 0:
        return {"call": ("record_fact", {"note": prompt})}
    if results == 1:
        return {"call": ("slow_lookup", {"key": prompt})}
    return {"text": f"done: {prompt}"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # one small write per chunk: no 40 ms delayed-ACK stalls
    server: FakeModelServer

    def log_message(self, *a: Any) -> None:
        pass

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n))
        with self.server.lock:
            self.server.requests += 1
            k = self.server.requests
            self.server.bodies.append(body)
        plan = script(body)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        cid, model = f"chatcmpl-{k}", body.get("model", "fake")

        def chunk(
            delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None
        ) -> None:
            obj: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            if usage is not None:
                obj["usage"] = usage
            data = f"data: {json.dumps(obj)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        delay = self.server.token_delay
        if "call" in plan:
            name, args = plan["call"]
            time.sleep(delay)
            chunk(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": f"call_{k}",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                    ],
                }
            )
            chunk({}, "tool_calls", {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
        else:
            words = plan["text"].split(" ")
            for i, w in enumerate(words):
                time.sleep(delay)
                chunk(
                    {"role": "assistant", "content": (" " if i else "") + w}
                    if i == 0
                    else {"content": " " + w}
                )
            chunk(
                {},
                "stop",
                {"prompt_tokens": 10, "completion_tokens": len(words), "total_tokens": 10 + len(words)},
            )
        done = b"data: [DONE]\n\n"
        self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
        self.wfile.flush()


class FakeModelServer(ThreadingHTTPServer):
    """``with FakeModelServer(token_delay=0.002) as srv: srv.base_url`` (a daemon thread)."""

    daemon_threads = True

    def __init__(self, token_delay: float = 0.002) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.token_delay = token_delay
        self.requests = 0
        self.bodies: list[dict[str, Any]] = []  # every request body, in arrival order
        self.lock = threading.Lock()
        self.base_url = f"http://127.0.0.1:{self.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    def __enter__(self) -> FakeModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


def effects_table(path: str) -> sqlite3.Connection:
    """The side-effect table (one row per run of ``record_fact``; no unique key, so a repeated
    run shows as a second row)."""
    c = sqlite3.connect(path, timeout=30, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("CREATE TABLE IF NOT EXISTS effects (call_id TEXT, note TEXT, pid INTEGER)")
    return c


def wait_probe(path: str, key: str, timeout: float = 60) -> int:
    """The pid a worker wrote to the ``probe`` table of the effects file under ``key`` (a tool
    of the test app writes it when it starts), waiting up to ``timeout`` seconds.

    Raises:
        TimeoutError: no probe row for ``key`` in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        c = effects_table(path)
        c.execute("CREATE TABLE IF NOT EXISTS probe (pid INTEGER, key TEXT)")
        row = c.execute("SELECT pid FROM probe WHERE key = ?", (key,)).fetchone()
        c.close()
        if row:
            return int(row[0])
        time.sleep(0.02)
    raise TimeoutError(key)


@side_effects
@tool
async def record_fact(note: str) -> str:
    """Store a note (a side effect: one row in the effects table).

    Args:
        note: the note.
    """
    c = effects_table(os.environ["FA_EFFECTS_DB"])
    try:
        if os.environ.get("FA_FACT_SLOW"):  # test instrumentation: a slow side effect
            c.execute("CREATE TABLE IF NOT EXISTS probe (pid INTEGER, key TEXT)")
            c.execute("INSERT INTO probe VALUES (?, ?)", (os.getpid(), "fact:" + note))
            await asyncio.sleep(float(os.environ["FA_FACT_SLOW"]))
        c.execute("INSERT INTO effects VALUES (?, ?, ?)", (current_call_id(), note, os.getpid()))
    finally:
        c.close()
    return f"stored {note}"


@tool
async def slow_lookup(key: str) -> str:
    """Look a key up (slowly; no side effect).

    Args:
        key: the key.
    """
    if os.environ.get("FA_PROBE"):  # test instrumentation: "a worker is inside the slow tool"
        c = effects_table(os.environ["FA_EFFECTS_DB"])
        try:
            c.execute("CREATE TABLE IF NOT EXISTS probe (pid INTEGER, key TEXT)")
            c.execute("INSERT INTO probe VALUES (?, ?)", (os.getpid(), key))
            c.execute("CREATE TABLE IF NOT EXISTS slow_started (pid INTEGER, key TEXT, at REAL)")
            c.execute("INSERT INTO slow_started VALUES (?, ?, ?)", (os.getpid(), key, time.time()))
        finally:
            c.close()
    await asyncio.sleep(float(os.environ.get("FA_SLOW", "0")))
    gate = os.environ.get("FA_GATE")  # test instrumentation: wait until the test opens the gate
    while gate and not os.path.exists(gate):
        await asyncio.sleep(0.02)
    return f"value of {key}"


def agent() -> Any:
    """The agent factory of the test workers."""
    from foundation_ai.backends import openai_chat

    m = openai_chat("fake", base_url=os.environ["FA_MODEL_URL"], api_key="sk-test", max_retries=0)
    return AgentSession.builder(m).with_tools(record_fact, slow_lookup)


def local_agent() -> Any:
    """An agent factory on the bundled in-process model (SmolLM2-135M on xllamacpp), answers
    of at most 16 tokens."""
    return AgentSession.builder(_local_model()).with_params(max_tokens=16)


_LOCAL: list[Any] = []


def _local_model() -> Any:
    """The bundled model, loaded once per worker process."""
    if not _LOCAL:
        from foundation_ai.backends import llamacpp

        _LOCAL.append(llamacpp())
    return _LOCAL[0]


def _extra_tool(version: str) -> Any:
    @tool(name=f"extra_{version}")
    async def extra() -> str:
        """A tool only this version of the agent has."""
        return version

    return extra


def versioned_agent() -> Any:
    """An agent factory whose system prompt and tool list follow the file ``FA_AGENT_VERSION``
    (read at every call: a worker builds the agent per turn), e.g. ``v1`` -> system prompt
    ``"agent v1"`` and an extra tool ``extra_v1``; a params temperature of 0.1 (v1) or 0.9."""
    from foundation_ai.backends import openai_chat
    from foundation_ai.types import ModelParams

    with open(os.environ["FA_AGENT_VERSION"]) as f:
        version = f.read().strip()
    m = openai_chat("fake", base_url=os.environ["FA_MODEL_URL"], api_key="sk-test", max_retries=0)
    return (
        AgentSession.builder(m)
        .with_tools(record_fact, slow_lookup, _extra_tool(version))
        .with_system_prompt(f"agent {version}")
        .with_params(ModelParams(temperature=0.1 if version == "v1" else 0.9))
    )


def mcp_agent() -> Any:
    """An agent factory with the tools of ``agent`` and those the MCP server at ``FA_MCP_URL``
    lists now (streamable HTTP; listed at every call: a worker builds the agent per turn)."""
    from foundation_ai.agentic.toolsets.mcp import MCPServerTools

    global _MCP
    if _MCP is None:
        _MCP = MCPServerTools.http(os.environ["FA_MCP_URL"], name="inventory")
    return agent().with_tools(_MCP.list_tools())


_MCP: Any = None
