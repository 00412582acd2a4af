"""``foundation-ai serve`` under many concurrent streaming clients.

Three processes on loopback: a fake OpenAI-compatible model server that streams ``--tokens``
chunks with a fixed ``--delay`` between them; ``foundation-ai serve`` (no auth, one agent whose
model is ``openai_chat`` pointed at the fake server, SQLite session store in a temp dir); and
this process, running ``--clients`` concurrent streaming Chat Completions clients (httpx).

Phase 1 runs the clients against the fake model server directly, phase 2 against the server.
For every chunk, its lag is (arrival time since the request started) - (index x delay), i.e.
how late it is against the model's own schedule. Added latency per chunk = the served lag
minus the direct lag, at p50 and p99. Memory per open stream = (peak server RSS while the streams
run - server RSS after warm-up) / clients.

Goals: every stream completes with all its tokens; added p50 <= 10 ms and p99 <= 250 ms per
chunk; memory per open stream <= 256 KiB.

Run: ``.venv/bin/python bench/serve.py [--clients 1000] [--tokens 20] [--delay 0.05]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _raise_fd_limit() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# -- the fake model server ---------------------------------------------------------------------


def fake_model_app(tokens: int, delay: float) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def chat(request: Request) -> StreamingResponse:
        await request.body()

        async def gen() -> Any:
            base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": "fake"}
            yield (
                "data: "
                + json.dumps(
                    {
                        **base,
                        "choices": [
                            {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
                        ],
                    }
                )
                + "\n\n"
            )
            for i in range(tokens):
                if i:
                    await asyncio.sleep(delay)
                yield (
                    "data: "
                    + json.dumps(
                        {
                            **base,
                            "choices": [{"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}],
                        }
                    )
                    + "\n\n"
                )
            yield (
                "data: "
                + json.dumps(
                    {
                        **base,
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                        "usage": {
                            "prompt_tokens": 5,
                            "completion_tokens": tokens,
                            "total_tokens": 5 + tokens,
                        },
                    }
                )
                + "\n\n"
            )
            yield "data: [DONE]\n\n"

        return StreamingResponse(gen(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def run_child(role: str, args: argparse.Namespace) -> None:
    _raise_fd_limit()
    import uvicorn

    if role == "fake":
        app = fake_model_app(args.tokens, args.delay)
    else:
        import httpx

        from foundation_ai.agentic import InMemorySessionStore, SqliteSessionStore
        from foundation_ai.backends._openai_chat import openai_chat
        from foundation_ai.serve import Agent, Limits, ServeConfig, create_app

        client = httpx.AsyncClient(
            timeout=120, limits=httpx.Limits(max_connections=None, max_keepalive_connections=None)
        )
        model = openai_chat(
            "fake", base_url=args.model_url, api_key="unused", http_client=client, max_retries=0
        )
        data = Path(args.data_dir)
        app = create_app(
            ServeConfig(
                agents=[Agent("bench", model=model)],
                no_auth=True,
                data_dir=data,
                store=InMemorySessionStore()
                if args.store == "memory"
                else SqliteSessionStore(data / "bench.sqlite3"),
                limits=Limits(max_turns_per_key=1_000_000),
            )
        )
    uvicorn.run(
        app, host="127.0.0.1", port=args.port, log_level="warning", backlog=4096, timeout_keep_alive=30
    )


# -- clients -------------------------------------------------------------------------------------


async def one_stream(client: Any, url: str, model: str, delay: float, lags: list[float]) -> int:
    start = time.perf_counter()
    got = 0
    body = {"model": model, "messages": [{"role": "user", "content": "go"}], "stream": True}
    async with client.stream("POST", url, json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            choices = chunk.get("choices") or []
            if choices and choices[0]["delta"].get("content"):
                lags.append(time.perf_counter() - start - got * delay)
                got += 1
    return got


async def phase(
    url: str, model: str, n: int, delay: float, on_open: Any = None
) -> tuple[list[float], list[int], float]:
    import httpx

    lags: list[float] = []
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        t0 = time.perf_counter()
        tasks = [asyncio.create_task(one_stream(client, url, model, delay, lags)) for _ in range(n)]
        probe = asyncio.create_task(on_open()) if on_open else None
        results = await asyncio.gather(*tasks, return_exceptions=True)
        wall = time.perf_counter() - t0
        if probe:
            probe.cancel()
    counts = [r if isinstance(r, int) else -1 for r in results]
    errors = [r for r in results if not isinstance(r, int)]
    if errors:
        print(f"  {len(errors)} streams failed, first: {errors[0]!r}")
    return lags, counts, wall


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def wait_port(port: int) -> None:
    import socket

    for _ in range(300):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=1000)
    p.add_argument("--tokens", type=int, default=20)
    p.add_argument("--delay", type=float, default=0.05, help="seconds between the fake model's tokens")
    p.add_argument(
        "--store", choices=["sqlite", "memory"], default="sqlite", help="the server's session store"
    )
    p.add_argument("--role", choices=["fake", "serve"], help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--model-url", help=argparse.SUPPRESS)
    p.add_argument("--data-dir", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role:
        run_child(args.role, args)
        return 0
    _raise_fd_limit()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    fport, sport = free_port(), free_port()
    common = ["--tokens", str(args.tokens), "--delay", str(args.delay), "--store", args.store]
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            fake = subprocess.Popen(
                [sys.executable, __file__, "--role", "fake", "--port", str(fport), *common], env=env
            )
            procs.append(fake)
            serve = subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--role",
                    "serve",
                    "--port",
                    str(sport),
                    "--model-url",
                    f"http://127.0.0.1:{fport}/v1",
                    "--data-dir",
                    tmp,
                    *common,
                ],
                env=env,
            )
            procs.append(serve)
            wait_port(fport)
            wait_port(sport)
            n = args.clients
            print(
                f"serve bench: {n} concurrent streaming clients, {args.tokens} tokens x {args.delay * 1000:.0f} ms, {args.store} store, loadavg {os.getloadavg()[0]:.2f} (2 cores shared)"
            )
            # warm-up (imports, first connections), then the idle baseline
            asyncio.run(phase(f"http://127.0.0.1:{sport}/v1/chat/completions", "bench", 10, args.delay))
            idle = rss_kib(serve.pid)

            direct_lags, direct_counts, direct_wall = asyncio.run(
                phase(f"http://127.0.0.1:{fport}/v1/chat/completions", "fake", n, args.delay)
            )
            peak = {"rss": 0}

            async def probe() -> None:
                # sample the server's RSS every 100 ms while the streams run (cancelled at the end)
                while True:
                    peak["rss"] = max(peak["rss"], rss_kib(serve.pid))
                    await asyncio.sleep(0.1)

            served_lags, served_counts, served_wall = asyncio.run(
                phase(f"http://127.0.0.1:{sport}/v1/chat/completions", "bench", n, args.delay, probe)
            )
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
    complete_direct = sum(1 for c in direct_counts if c == args.tokens)
    complete = sum(1 for c in served_counts if c == args.tokens)
    d50, d99 = pct(direct_lags, 0.5) * 1000, pct(direct_lags, 0.99) * 1000
    s50, s99 = pct(served_lags, 0.5) * 1000, pct(served_lags, 0.99) * 1000
    add50, add99 = s50 - d50, s99 - d99
    per_stream = (peak["rss"] - idle) / n if n else 0.0
    print(
        f"direct : {complete_direct}/{n} streams complete in {direct_wall:.2f} s; chunk lag p50 {d50:.1f} ms, p99 {d99:.1f} ms"
    )
    print(
        f"served : {complete}/{n} streams complete in {served_wall:.2f} s; chunk lag p50 {s50:.1f} ms, p99 {s99:.1f} ms"
    )
    print(f"added latency per chunk: p50 {add50:.1f} ms, p99 {add99:.1f} ms")
    print(
        f"server RSS: idle {idle / 1024:.1f} MiB, with {n} open streams {peak['rss'] / 1024:.1f} MiB -> {per_stream:.1f} KiB per open stream"
    )
    print(f"loadavg after: {os.getloadavg()[0]:.2f}")
    goals = [
        (f"all {n} streams complete", complete == n),
        ("added p50 <= 10 ms per chunk", add50 <= 10),
        ("added p99 <= 250 ms per chunk", add99 <= 250),
        ("memory <= 256 KiB per open stream", per_stream <= 256),
    ]
    for label, ok in goals:
        print(f"{'met' if ok else 'NOT met'}: {label}")
    return 0 if complete == n else 1


if __name__ == "__main__":
    sys.exit(main())
