"""``foundation-ai serve``'s memory over many one-shot requests: sessions and finished turns
must leave process memory (they are in the store), so the server's RSS stays flat.

The server (``create_app`` under uvicorn, guarded protocol, no auth, one agent on a
``ScriptedModel`` answering a short text, SQLite store and index in a temp dir) runs in a
child process; this script sends ``--requests`` one-shot ``POST /v1/chat/completions`` (each
a new session) over one kept-alive connection and samples the server's RSS (``/proc/PID/status``
``VmRSS``) every ``--every`` requests.

Figures: RSS at each sample; the growth per request between the sample after ``--warmup``
requests and the last one (the warm-up fills caches: SQLite pages, allocator arenas, the
index). The issue's old figure for comparison: 3,000 requests grew a process from 59 to 155 MB,
32.9 KB per session.

Goal (set before measuring): growth after the warm-up <= 0.5 KB per request (flat: at most
5 MB over 10,000 requests), and every request answered 200.

With ``--db``, the server is one of the processes of ``serve --db``: ``ServeConfig(shared=
SharedServe(url))`` on a real PostgreSQL (``pgserver``, started in a temp dir), turns run as
durable served turns (DBOS) in the server process, session records, owners and event logs in
the database; the same goal.

Run: ``.venv/bin/python bench/serve_memory.py [--db] [--requests 10000] [--every 1000] [--warmup 2000]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
from typing import Any


def _serve(data_dir: str, port_q: Any, idle: int, requests: int, db: str | None = None) -> None:
    from foundation_ai.agentic import ScriptedModel, say
    from foundation_ai.serve import Agent, Limits, ServeConfig, ServerThread, create_app
    from foundation_ai.serve.shared import SharedServe

    def reply(_: Any) -> Any:
        return say("Hello there, friend.")

    # one step per generation; the list of references is allocated once, before the samples
    model = ScriptedModel([reply] * (requests + 100), chunk_mode="delta")
    config = ServeConfig(
        agents=[Agent("bot", model=model)],
        no_auth=True,
        data_dir=data_dir,
        limits=Limits(max_turns_per_key=64, idle_sessions_per_key=idle),
        shared=SharedServe(db, poll=0.01) if db else None,
    )
    srv = ServerThread(create_app(config)).start()
    port_q.put(srv.port)
    while srv.wait(1.0):
        pass


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--every", type=int, default=1_000)
    ap.add_argument("--warmup", type=int, default=2_000)
    ap.add_argument("--idle", type=int, default=8, help="Limits.idle_sessions_per_key of the server")
    ap.add_argument("--clients", type=int, default=1, help="requests sent at once (one connection each)")
    ap.add_argument("--db", action="store_true", help="a serve --db process on a real PostgreSQL (pgserver)")
    args = ap.parse_args()
    pg: Any = None
    url = None
    if args.db:
        import pgserver

        pg_dir = tempfile.mkdtemp(prefix="fai-bench-pg-")
        pg = pgserver.get_server(pg_dir, cleanup_mode="delete")
        url = pg.get_uri()

    import httpx2

    with tempfile.TemporaryDirectory() as data:
        ctx = multiprocessing.get_context("spawn")
        q = ctx.Queue()
        proc = ctx.Process(target=_serve, args=(data, q, args.idle, args.requests, url), daemon=True)
        proc.start()
        port = q.get(timeout=120)
        assert proc.pid is not None
        body = {"model": "bot", "messages": [{"role": "user", "content": "hi"}]}
        samples: list[tuple[int, int]] = [(0, _rss_kb(proc.pid))]
        failures = 0
        started = time.monotonic()
        print(f"load average at start: {os.getloadavg()}")
        import threading

        lock = threading.Lock()
        sent = [0]

        def client() -> None:
            nonlocal failures
            with httpx2.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as c:
                while True:
                    with lock:
                        if sent[0] >= args.requests:
                            return
                        sent[0] += 1
                    r = c.post("/v1/chat/completions", json=body)
                    with lock:
                        failures += r.status_code != 200
                        done[0] += 1
                        i = done[0]
                    if i % args.every == 0:
                        samples.append((i, _rss_kb(proc.pid)))
                        print(f"  after {i:>6} requests: RSS {samples[-1][1] / 1024:7.1f} MB", flush=True)

        done = [0]
        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
        proc.terminate()
        proc.join(10)
    if pg is not None:
        pg.cleanup()

    base = next((kb for n, kb in samples if n >= args.warmup), samples[0][1])
    base_n = next((n for n, _ in samples if n >= args.warmup), 0)
    last_n, last = samples[-1]
    per = (last - base) / max(1, last_n - base_n)
    print(
        f"requests: {args.requests} in {elapsed:.1f} s ({args.requests / elapsed:.0f}/s), failures: {failures}"
    )
    print(f"RSS: start {samples[0][1] / 1024:.1f} MB, after warm-up ({base_n}) {base / 1024:.1f} MB,")
    print(f"     end ({last_n}) {last / 1024:.1f} MB: {per * 1024:.0f} bytes per request after the warm-up")
    print("     (the issue's old figure: 32.9 KB per request, 59 -> 155 MB over 3,000)")
    print(f"server: {'serve --db (PostgreSQL, durable served turns)' if args.db else 'default (SQLite)'}")
    print(f"load average at end: {os.getloadavg()}")
    good = per <= 0.5 and failures == 0
    print(f"  {'met' if good else 'NOT met'}: growth <= 0.5 KB per request after the warm-up, all 200")


if __name__ == "__main__":
    main()
