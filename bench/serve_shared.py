"""``foundation-ai serve`` from several processes (``--db postgresql://``) against one process
with in-process turns, measured in the same run.

Every turn is a streamed ``POST /v1/chat/completions`` of a new session, a 5-step turn (3 model
calls, 2 tool calls) against a loopback OpenAI-compatible fake model with a fixed per-token delay
(``tests/_durable_app.py``). Servers are real ``foundation-ai serve`` subprocesses on loopback;
PostgreSQL is a real pgserver in a temp folder. Rows:

- ``plain x1``: one process, SQLite store, turns as asyncio tasks of the server;
- ``shared xN``: N processes with ``--db`` (durable turns on a DBOS queue, events through the
  shared log); clients spread over the N processes round-robin.

Per row: one turn alone (mean over ``--latency-turns``): time to the first text chunk and to
``[DONE]``; then ``--turns`` turns from ``--clients`` concurrent clients: turns/s.

The issue states no numeric goal for these figures, so nothing is judged met or not; on a 2-core
machine shared with other jobs, two processes plus PostgreSQL compete for the same cores (load
average printed). Run: ``.venv/bin/python bench/serve_shared.py [--turns 40 --clients 8]``.
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests._durable_app import FakeModelServer  # noqa: E402
from tests._durable_pool import start_postgres  # noqa: E402

AGENTS = """
[agents.bench]
model = "openai:fake"
tools = ["tests._durable_app:record_fact", "tests._durable_app:slow_lookup"]
"""


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def start(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    p = subprocess.Popen(
        [sys.executable, "-m", "foundation_ai", "serve", "--no-auth", "--port", "0", "--max-turns-per-key", "1000", *args],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in p.stdout], daemon=True).start()  # type: ignore[union-attr]
    first = lines.get(timeout=120)
    return p, first.split(" on ", 1)[1].split(" ", 1)[0]


def one_turn(url: str, prompt: str) -> tuple[float, float]:
    """(seconds to the first text chunk, seconds to [DONE]) of one streamed chat turn."""
    body = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": prompt}]}
    t0 = time.perf_counter()
    first = 0.0
    with httpx2.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=120) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if not first and '"content":"' in line and '"content":""' not in line:
                first = time.perf_counter() - t0
            if line == "data: [DONE]":
                break
    return first, time.perf_counter() - t0


def measure(name: str, urls: list[str], args: argparse.Namespace) -> None:
    one_turn(urls[0], "warm")
    lat = [one_turn(urls[i % len(urls)], f"alone {i}") for i in range(args.latency_turns)]
    ttft = statistics.mean(x[0] for x in lat) * 1000
    total = statistics.mean(x[1] for x in lat) * 1000
    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.clients) as pool:
        list(pool.map(lambda i: one_turn(urls[i % len(urls)], f"load {i}"), range(args.turns)))
    tps = args.turns / (time.perf_counter() - t0)
    print(
        f"{name:10s} one turn alone: first text {ttft:7.1f} ms, done {total:7.1f} ms;"
        f" {args.clients} clients: {tps:6.2f} turns/s  [{load()}]",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--latency-turns", type=int, default=8)
    ap.add_argument("--processes", default="1,2", help="shared rows to run")
    ap.add_argument("--token-delay", type=float, default=0.002)
    args = ap.parse_args()
    print(f"cores {os.cpu_count()}; {load()}")
    with tempfile.TemporaryDirectory() as d, FakeModelServer(token_delay=args.token_delay) as model:
        tmp = Path(d)
        (tmp / "agents.toml").write_text(AGENTS)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
            "OPENAI_BASE_URL": model.base_url.removesuffix("/v1"),
            "FA_MODEL_URL": model.base_url,
            "FA_EFFECTS_DB": str(tmp / "effects.sqlite3"),
            "XDG_DATA_HOME": str(tmp / "xdg"),
            "NO_PROXY": "127.0.0.1,localhost",
        }
        env.pop("OPENAI_API_KEY", None)
        agents = ["--agents", str(tmp / "agents.toml")]
        p, url = start([*agents, "--data-dir", str(tmp / "plain")], env)
        try:
            measure("plain x1", [url], args)
        finally:
            p.terminate()
            p.wait(60)
        pg = start_postgres(tmp / "pg")
        try:
            for n in (int(x) for x in args.processes.split(",")):
                db = f"bench_{n}"
                pg.psql(f"CREATE DATABASE {db};")
                uri = pg.get_uri().replace("/postgres?", f"/{db}?")
                procs = [
                    start(
                        [
                            *agents,
                            "--db",
                            uri,
                            "--executor-id",
                            f"bench-{n}-{i}",
                            "--data-dir",
                            str(tmp / "s"),
                        ],
                        env,
                    )
                    for i in range(n)
                ]
                try:
                    measure(f"shared x{n}", [u for _, u in procs], args)
                finally:
                    for q, _ in procs:
                        q.terminate()
                    for q, _ in procs:
                        q.wait(60)
        finally:
            pg.cleanup()


if __name__ == "__main__":
    main()
