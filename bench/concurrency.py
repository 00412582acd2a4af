"""Many concurrent agent sessions in one process against a loopback server (real sockets).

Issue 15, goal 2: 10,000 concurrent sessions in one process, each streaming a 200-chunk answer
with one tool call, all correct; memory per idle session at most 20 KB; chunks per second at
least 80 % of the raw httpx2 SSE floor for the same streams.

The server is a separate process (``--serve``): a raw asyncio HTTP/1.1 server (keep-alive,
chunked transfer encoding) answering ``POST /v1/chat/completions`` from prebuilt SSE bytes:

- a request without a ``tool`` message: a streamed tool call ``double({"n": K})`` in 4 events
  (id + name, two argument fragments, finish) + ``[DONE]``, where ``K`` is the session number
  read from the prompt ``"session K"``;
- a request with a ``tool`` message: 200 text chunks (the last one carries the tool's result
  read back from the request), a finish chunk with usage, ``[DONE]``.

Each text answer is written as 10 HTTP chunks of 20 SSE events (a fast server flushing often).

In the bench process, for N in ``--sessions`` (default 100, 1,000, 10,000), interleaved
``--repeat`` times:

- **foundation_ai**: N ``AgentSession`` objects sharing one ``openai_chat`` backend (its own
  HTTP client: the default), an ``InMemorySessionStore`` and one async tool; all N run
  ``arun_turn("session K")`` at once under ``asyncio.gather``; every turn is checked (the tool
  ran once with K, the answer is the expected 200-chunk text ending in the tool's result);
- **floor**: the same N conversations as raw ``httpx2.AsyncClient`` + its ``EventSource`` (same
  requests and chunks, same pool limits: the backends' layout of httpx clients with a plain
  ``asyncio.Semaphore`` as the limit on requests in flight, ``json.loads`` per event, the text joined, the tool
  call's arguments parsed, the second request sent with the tool result) -- no agent loop.

chunks/s = SSE events read (both requests of every session) / wall seconds. Memory per idle
session: after the turns, with the N sessions kept, ``gc.collect()`` and the growth of the
traced heap (``tracemalloc``, in a separate run per N) and of RSS, divided by N; reported for
sessions sharing one backend and for one backend per session (``AgentSession.builder(
"openai:...")``-style, each session owning its model object). ``--idle N`` prints only the
idle-session figures of N sessions, judged on the RSS growth of the live process (pool open, no
``tracemalloc``; goal <= 20 KB per session), the traced heap beside it (``bench/memory.py`` runs
it at 10,000 sessions every time).

Run: ``.venv/bin/python bench/concurrency.py [--sessions 100,1000,10000 --repeat 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

MODEL = "bench-model"
TEXT_CHUNKS = 200
GROUP = 20  # SSE events per HTTP chunk (one write)
WORDS = [f"w{i} " for i in range(TEXT_CHUNKS - 1)]
PREFIX = "".join(WORDS)


def expected_text(k: int) -> str:
    """The answer of session ``k``: 199 fixed words, then the tool's result."""
    return PREFIX + tool_result(k)


def tool_result(k: int) -> str:
    return f"result-{2 * k}"


# --------------------------------------------------------------------------------------------
# the server (a separate process)


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    obj: dict[str, Any] = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        obj["usage"] = usage
    return _sse(obj)


def _http_chunks(events: list[bytes]) -> list[bytes]:
    """Groups of ``GROUP`` events, each framed as one HTTP/1.1 chunk."""
    out = []
    for i in range(0, len(events), GROUP):
        data = b"".join(events[i : i + GROUP])
        out.append(b"%x\r\n%s\r\n" % (len(data), data))
    return out


HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
    b"cache-control: no-cache\r\n\r\n"
)
DONE = b"data: [DONE]\n\n"
USAGE = {"prompt_tokens": 50, "completion_tokens": TEXT_CHUNKS, "total_tokens": 50 + TEXT_CHUNKS}
TEXT_EVENTS = [_chunk({"role": "assistant", "content": WORDS[0]})] + [
    _chunk({"content": w}) for w in WORDS[1:]
]
SESSION_RE = re.compile(rb"session (\d+)")
RESULT_RE = re.compile(rb"result-(\d+)")


def tool_call_events(k: int) -> list[bytes]:
    args = json.dumps({"n": k})
    cut = len(args) // 2
    call = {
        "index": 0,
        "id": f"call_{k}",
        "type": "function",
        "function": {"name": "double", "arguments": ""},
    }
    return [
        _chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[:cut]}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[cut:]}}]}),
        _chunk({}, "tool_calls", {"prompt_tokens": 40, "completion_tokens": 10, "total_tokens": 50}),
        DONE,
    ]


_FIXED = (len(TEXT_EVENTS) - 1) // GROUP * GROUP
TEXT_HEAD = _http_chunks(TEXT_EVENTS[:_FIXED])  # the full groups, prebuilt


def text_answer(result: bytes) -> list[bytes]:
    """The second answer: the prebuilt groups, then the last group with the tool's result."""
    last = [*TEXT_EVENTS[_FIXED:], _chunk({"content": result.decode()}), _chunk({}, "stop", USAGE), DONE]
    return [*TEXT_HEAD, *_http_chunks(last)]


TOOL_EVENTS = 5  # SSE events of the first answer, [DONE] included
TEXT_SSE = TEXT_CHUNKS + 2  # 200 text chunks, the finish chunk, [DONE]
EVENTS_PER_SESSION = TOOL_EVENTS + TEXT_SSE


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            length = 0
            close = False
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"connection" and value.strip().lower() == b"close":
                    close = True
            body = await reader.readexactly(length)
            if b'"role":"tool"' in body:
                m = RESULT_RE.search(body)
                parts = text_answer(m.group(0) if m else b"result-missing")
            else:
                m = SESSION_RE.search(body)
                parts = _http_chunks(tool_call_events(int(m.group(1)) if m else -1))
            writer.write(HEAD)
            for p in parts:
                writer.write(p)
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            if close:
                return
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        writer.close()


async def _serve() -> None:
    server = await asyncio.start_server(_handle, "127.0.0.1", 0, backlog=16384, limit=1 << 20)
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    async with server:
        await server.serve_forever()


def start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True, cwd=str(ROOT)
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    return proc, f"http://127.0.0.1:{port}/v1"


# --------------------------------------------------------------------------------------------
# the contenders


def raise_fd_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def make_tool() -> Any:
    from foundation_ai import tool

    @tool
    async def double(n: int) -> str:
        """Double n."""
        return tool_result(n)

    return double


def build_sessions(n: int, base: str, *, shared: bool) -> tuple[list[Any], Any]:
    from foundation_ai import AgentSession
    from foundation_ai.agentic.stores.memory import InMemorySessionStore
    from foundation_ai.backends import openai_chat

    store = InMemorySessionStore()
    tool = make_tool()
    backend = openai_chat(MODEL, base_url=base, api_key="sk-bench") if shared else None
    sessions = []
    for _ in range(n):
        b = backend if backend is not None else openai_chat(MODEL, base_url=base, api_key="sk-bench")
        sessions.append(AgentSession.builder(b).with_tools(tool).with_store(store).build())
    return sessions, store


def check_turn(turn: Any, k: int) -> None:
    calls = turn.tool_calls()
    results = turn.tool_results()
    text = turn.text()
    if not turn.ok or len(calls) != 1 or calls[0].arguments != {"n": k} or len(results) != 1:
        raise AssertionError(f"session {k}: wrong turn {turn!r} calls={calls!r}")
    if text != expected_text(k):
        raise AssertionError(f"session {k}: wrong text ...{text[-40:]!r}")


async def run_sessions(sessions: list[Any]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) for one turn of every session at once;
    every turn checked."""
    t0, c0 = time.perf_counter(), time.process_time()
    turns = await asyncio.gather(*(s.arun_turn(f"session {k}") for k, s in enumerate(sessions)))
    times = time.perf_counter() - t0, time.process_time() - c0
    for k, turn in enumerate(turns):
        check_turn(turn, k)
    return times


async def _floor_sse(pool: Any, url: str, body: dict[str, Any], on_data: Any) -> None:
    """POST ``body`` through a shard of ``pool`` (once a slot of its ``asyncio.Semaphore``
    ``pool.limit`` is held) and call ``on_data(text)`` per SSE event."""
    import httpx2

    await pool.limit.acquire()
    shard = pool.take()
    try:
        headers = {"Authorization": "Bearer sk-bench"}
        async with pool.client(shard).stream("POST", url, json=body, headers=headers) as resp:
            async for sse in httpx2.EventSource(resp):  # to the end of the body: the connection is reused
                if sse.data != "[DONE]":
                    on_data(sse.data)
    finally:
        pool.release(shard)
        pool.limit.release()


async def floor_one(pool: Any, url: str, k: int) -> str:
    """One session's two requests, raw: the tool call assembled from its fragments, the tool
    run, the second request with its result, the text joined."""
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"session {k}"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "double",
                    "description": "Double n.",
                    "parameters": {
                        "type": "object",
                        "properties": {"n": {"type": "integer"}},
                        "required": ["n"],
                    },
                },
            }
        ],
    }
    call: dict[str, str] = {"id": "", "name": ""}
    args: list[str] = []
    text: list[str] = []

    def on_call(data: str) -> None:
        for tc in json.loads(data)["choices"][0]["delta"].get("tool_calls") or ():
            call["id"] = tc.get("id") or call["id"]
            fn = tc.get("function") or {}
            call["name"] = fn.get("name") or call["name"]
            args.append(fn.get("arguments") or "")

    def on_text(data: str) -> None:
        choices = json.loads(data)["choices"]
        if choices:
            c = choices[0]["delta"].get("content")
            if c:
                text.append(c)

    await _floor_sse(pool, url, body, on_call)
    arguments = "".join(args)
    result = tool_result(json.loads(arguments)["n"])  # the tool
    body["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call["id"], "content": result},
    ]
    await _floor_sse(pool, url, body, on_text)
    return "".join(text)


class FloorPool:
    """The floor's connections: the backends' layout of httpx clients (``_AsyncPool`` without
    its gate: shards of ``SHARD_CONNECTIONS``) and a plain ``asyncio.Semaphore`` of
    ``max_connections`` as the limit on requests in flight (``None``: no limit)."""

    def __init__(self, max_connections: int | None) -> None:
        from foundation_ai.backends._http.pool import _AsyncPool

        self._pool = _AsyncPool(600.0, None)
        self.limit: Any = asyncio.Semaphore(max_connections) if max_connections else _NoLimit()

    def take(self) -> int:
        return self._pool.take()

    def client(self, shard: int) -> Any:
        return self._pool.client(shard)

    def release(self, shard: int) -> None:
        self._pool.release(shard)

    async def aclose(self) -> None:
        await self._pool.aclose()


class _NoLimit:
    async def acquire(self) -> None:
        return None

    def release(self) -> None:
        return None


async def run_floor(n: int, base: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``n`` raw conversations at once, through a pool laid out
    as a backend's own (same connection limit, same shards); every answer checked."""
    from foundation_ai.backends._http import MAX_CONNECTIONS

    pool = FloorPool(MAX_CONNECTIONS)
    url = base + "/chat/completions"
    t0, c0 = time.perf_counter(), time.process_time()
    texts = await asyncio.gather(*(floor_one(pool, url, k) for k in range(n)))
    times = time.perf_counter() - t0, time.process_time() - c0
    await pool.aclose()
    for k, t in enumerate(texts):
        if t != expected_text(k):
            raise AssertionError(f"floor session {k}: wrong text ...{t[-40:]!r}")
    return times


class GcMeter:
    """CPU seconds spent in full (generation-2) and younger garbage collections while active
    (``gc.callbacks``; thread CPU time, so other processes on the machine do not count)."""

    def __init__(self) -> None:
        self.full = self.young = 0.0
        self.full_count = 0
        self._t0 = 0.0

    def _cb(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = time.thread_time()
            return
        spent = time.thread_time() - self._t0
        if info["generation"] == 2:
            self.full += spent
            self.full_count += 1
        else:
            self.young += spent

    def __enter__(self) -> GcMeter:
        gc.callbacks.append(self._cb)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._cb)


def rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


def idle_memory(n: int, base: str, *, shared: bool) -> tuple[float, float, float]:
    """Per idle session after one turn each, ``n`` sessions kept: (traced KB with the backends'
    kept-alive connections, traced KB once the backends closed their pools (``aclose``), RSS
    KB growth of the process)."""
    gc.collect()
    rss0 = rss_kb()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    sessions, store = build_sessions(n, base, shared=shared)
    with_pool = [0]

    async def turns_then_close(sessions: list[Any]) -> None:
        await run_sessions(sessions)
        gc.collect()
        with_pool[0] = tracemalloc.get_traced_memory()[0]
        for b in {id(s.model): s.model for s in sessions}.values():
            await b.aclose()

    asyncio.run(turns_then_close(sessions))
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    rss1 = rss_kb()
    del sessions, store
    gc.collect()
    return (with_pool[0] - before) / 1024 / n, (after - before) / 1024 / n, (rss1 - rss0) / n


def live_idle_rss(n: int, base: str) -> float:
    """RSS growth (KB) per idle session of a live process: ``n`` sessions sharing one backend,
    one turn each, kept, the backend's pool still open (no ``tracemalloc``: its own records
    would swell RSS)."""
    gc.collect()
    rss0 = rss_kb()
    sessions, store = build_sessions(n, base, shared=True)
    asyncio.run(run_sessions(sessions))
    gc.collect()
    grown = (rss_kb() - rss0) / n
    del sessions, store
    gc.collect()
    return grown


IDLE_GOAL_KB = 20.0


def idle_report(n: int) -> bool:
    """The idle-session memory of ``n`` sessions, judged on the RSS growth of this live process
    (goal <= 20 KB per session), the traced heap printed beside it; a server of its own.
    Returns whether the goal was met."""
    fds = raise_fd_limit()
    proc, base = start_server()
    try:
        warm, _ = build_sessions(10, base, shared=True)  # imports, first connections, caches
        asyncio.run(run_sessions(warm))
        del warm
        rss = live_idle_rss(n, base)
        ok = rss <= IDLE_GOAL_KB
        print(
            f"  N={n:,} idle sessions (one shared backend, one turn each, pool open): RSS growth "
            f"{rss:.1f} KB per session (goal <= {IDLE_GOAL_KB:.0f} KB: {'met' if ok else 'NOT met'}) "
            f"[RLIMIT_NOFILE {fds}, {load()}]"
        )
        with_pool, alone, rss_traced = idle_memory(n, base, shared=True)
        print(
            f"  N={n:,} traced heap (tracemalloc, a second set of sessions): {with_pool:.1f} KB per session with "
            f"the pool open, {alone:.1f} KB once it closed; RSS growth with tracemalloc on {rss_traced:.1f} KB"
        )
        return ok
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sessions", default="100,1000,10000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-memory", action="store_true", help="skip the memory runs")
    ap.add_argument("--idle", type=int, metavar="N", help="only the idle-session memory of N sessions")
    args = ap.parse_args()
    if args.serve:
        asyncio.run(_serve())
        return
    if args.idle:
        sys.exit(0 if idle_report(args.idle) else 1)
    fds = raise_fd_limit()
    proc, base = start_server()
    print(f"concurrency bench: server {base} (separate process), RLIMIT_NOFILE {fds}, {load()}")
    from foundation_ai.backends._http import MAX_CONNECTIONS, SHARD_CONNECTIONS

    print(
        f"connections: at most {MAX_CONNECTIONS} requests in flight per backend, "
        f"httpx clients of {SHARD_CONNECTIONS} connections each (the floor uses the same layout); "
        f"{EVENTS_PER_SESSION} SSE events per session ({TEXT_CHUNKS} text chunks + tool call)"
    )
    verdicts: list[bool] = []
    try:
        asyncio.run(run_floor(10, base))  # warm-up (imports, first connections)
        warm, _ = build_sessions(10, base, shared=True)
        asyncio.run(run_sessions(warm))
        del warm
        for n in [int(x) for x in args.sessions.split(",")]:
            ours: list[tuple[float, float]] = []
            floor: list[tuple[float, float]] = []
            events = n * EVENTS_PER_SESSION
            gc_ours, gc_floor = GcMeter(), GcMeter()
            for _ in range(args.repeat):
                gc.collect()
                with gc_floor:
                    floor.append(asyncio.run(run_floor(n, base)))
                sessions, _store = build_sessions(n, base, shared=True)
                gc.collect()
                with gc_ours:
                    ours.append(asyncio.run(run_sessions(sessions)))
                del sessions, _store
            for kind, col in (("wall", 0), ("CPU", 1)):
                o = [events / t[col] for t in ours]
                f = [events / t[col] for t in floor]
                ratio = statistics.median(o) / statistics.median(f)
                ok = ratio >= 0.8
                verdicts.append(ok)
                unit = "chunks/s" if kind == "wall" else "chunks/CPU-s"
                print(
                    f"N={n:6d}  {unit:12s} foundation_ai median {statistics.median(o):8.0f} min {min(o):8.0f} | "
                    f"floor (httpx2 + its SSE) median {statistics.median(f):8.0f} min {min(f):8.0f} | "
                    f"ratio {ratio:.2f} (goal >= 0.80: {'met' if ok else 'NOT met'})  [{load()}]"
                )
            cpu_o, cpu_f = sum(t[1] for t in ours), sum(t[1] for t in floor)
            print(
                f"N={n:6d}  garbage collection, share of CPU: foundation_ai {gc_ours.full / cpu_o:.0%} full "
                f"({gc_ours.full_count} collections) + {gc_ours.young / cpu_o:.0%} young | floor "
                f"{gc_floor.full / cpu_f:.0%} full ({gc_floor.full_count} collections) + "
                f"{gc_floor.young / cpu_f:.0%} young  (all rounds)"
            )
            print(f"N={n:6d}  all {n} x {args.repeat} turns and floor answers correct")
            if not args.no_memory:
                for shared in (True, False):
                    with_pool, alone, rss = idle_memory(n, base, shared=shared)
                    ok = alone <= 20.0
                    if shared:
                        verdicts.append(ok)
                    how = "one shared backend   " if shared else "a backend per session"
                    print(
                        f"N={n:6d}  idle session memory ({how}): traced {alone:5.1f} KB per session "
                        f"(goal <= 20 KB: {'met' if ok else 'NOT met'}); {with_pool:5.1f} KB before the pool's "
                        f"kept-alive connections were closed; RSS growth (tracemalloc on) {rss:6.1f} KB  [{load()}]"
                    )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print(f"overall: {'met' if all(verdicts) else 'NOT met'}  [{load()}]")


if __name__ == "__main__":
    main()
