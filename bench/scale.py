"""Durable turns: throughput with 1, 2 and 4 worker processes, the overhead per step of the
durable path against a plain in-process turn, on SQLite (embedded) and on PostgreSQL (pgserver).

Every turn is the same 5-step turn against a loopback OpenAI-compatible fake model server with
a fixed per-token delay (``tests/_durable_app.py``): 3 model calls and 2 tool calls, one of
them a side effect writing a row. Throughput = turns / wall time from the first enqueue to the
last result, with ``--turns`` turns spread over ``--sessions`` sessions (a session's turns run
one at a time). Scaling efficiency of N workers = (turns/s with N) / (N x turns/s with 1).
Overhead per step = (mean latency of one durable turn, run alone on one worker - mean latency
of the same turn run in-process with a SQLite store) / 5 steps.

The issue asks for these figures but states no numeric goal, so nothing is judged met or not;
on a 2-core machine shared with other jobs, more than 2 workers cannot scale (load average
printed). Run: ``.venv/bin/python bench/scale.py [--turns 60 --sessions 20 --workers 1,2,4
--db sqlite,postgres]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests._durable_app import FakeModelServer, agent, effects_table  # noqa: E402
from tests._durable_pool import WorkerPool, start_postgres  # noqa: E402

from foundation_ai.durable import DurableClient, DurableConfig  # noqa: E402

STEPS = 5


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def databases(kind: str, tmp: Path, pg: object | None, tag: str) -> tuple[str, str | None]:
    if kind == "sqlite":
        return f"sqlite:///{tmp / tag / 'durable.sqlite3'}", None
    assert pg is not None
    pg.psql(f"CREATE DATABASE {tag};")  # type: ignore[attr-defined]
    uri = pg.get_uri().replace("/postgres?", f"/{tag}?")  # type: ignore[attr-defined]
    return uri, f"sqlite:///{tmp / tag / 'sessions.sqlite3'}"


def throughput(
    kind: str, workers: int, args: argparse.Namespace, tmp: Path, pg: object | None, env: dict[str, str]
) -> float:
    tag = f"{kind}_w{workers}_{int(time.time() * 1000) % 10**8}"
    (tmp / tag).mkdir()
    db, session_db = databases(kind, tmp, pg, tag)
    pool = WorkerPool(tmp / tag, db, session_db, env, concurrency=args.concurrency)
    try:
        pool.start(workers)
        with DurableClient(DurableConfig(db, session_db=session_db)) as client:
            t0 = time.perf_counter()
            handles = [client.enqueue_turn(f"s{i % args.sessions}", f"t{i}") for i in range(args.turns)]
            for h in handles:
                assert h.result(timeout=900).ok
            return args.turns / (time.perf_counter() - t0)
    finally:
        pool.stop()


def durable_latency(
    kind: str,
    args: argparse.Namespace,
    tmp: Path,
    pg: object | None,
    env: dict[str, str],
    steering: bool = True,
) -> float:
    tag = f"{kind}_lat_{int(time.time() * 1000) % 10**8}"
    (tmp / tag).mkdir()
    db, session_db = databases(kind, tmp, pg, tag)
    extra = () if steering else ("--no-steering",)
    pool = WorkerPool(tmp / tag, db, session_db, env, concurrency=1, extra=extra)
    try:
        pool.start(1)
        with DurableClient(DurableConfig(db, session_db=session_db)) as client:
            client.enqueue_turn("warm", "warm").result(timeout=120)
            times = []
            for i in range(args.latency_turns):
                t0 = time.perf_counter()
                assert client.enqueue_turn("lat", f"l{i}").result(timeout=120, poll=0.005).ok
                times.append(time.perf_counter() - t0)
            return statistics.mean(times)
    finally:
        pool.stop()


def plain_latency(args: argparse.Namespace, tmp: Path) -> float:
    from foundation_ai.agentic.stores.sqlite import SqliteSessionStore

    store = SqliteSessionStore(tmp / "plain.sqlite3")
    session = agent().with_store(store).build("plain")

    async def run() -> list[float]:
        await session.arun_turn("warm")
        out = []
        for i in range(args.latency_turns):
            t0 = time.perf_counter()
            turn = await session.arun_turn(f"p{i}")
            assert turn.ok
            out.append(time.perf_counter() - t0)
        return out

    times = asyncio.run(run())
    store.close()
    return statistics.mean(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=60)
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--db", default="sqlite,postgres")
    ap.add_argument("--concurrency", type=int, default=4, help="turns at once per worker")
    ap.add_argument("--token-delay", type=float, default=0.002, help="seconds per streamed token")
    ap.add_argument("--latency-turns", type=int, default=10)
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    kinds = args.db.split(",")
    print(f"cores {os.cpu_count()}; {load()}")
    with tempfile.TemporaryDirectory() as d, FakeModelServer(token_delay=args.token_delay) as model:
        tmp = Path(d)
        env = {"FA_MODEL_URL": model.base_url, "FA_EFFECTS_DB": str(tmp / "effects.sqlite3"), "FA_SLOW": "0"}
        os.environ.update(env)
        effects_table(env["FA_EFFECTS_DB"]).close()
        pg = start_postgres(tmp / "pg") if "postgres" in kinds else None
        try:
            plain = plain_latency(args, tmp)
            print(f"plain in-process turn ({STEPS} steps, SQLite store): {plain * 1000:.1f} ms/turn")
            for kind in kinds:
                for steering in (True, False):
                    lat = durable_latency(kind, args, tmp, pg, env, steering)
                    print(
                        f"{kind:8s} durable turn alone on 1 worker, steering {'on ' if steering else 'off'}: "
                        f"{lat * 1000:.1f} ms/turn (enqueue -> result); overhead "
                        f"{(lat - plain) / STEPS * 1000:.1f} ms/step  [{load()}]"
                    )
                base = None
                for n in counts:
                    tps = throughput(kind, n, args, tmp, pg, env)
                    base = base or (tps if n == counts[0] else None)
                    eff = "" if base is None else f"  efficiency {tps / (n / counts[0] * base):.2f}"
                    print(
                        f"{kind:8s} {n} worker(s) x {args.concurrency}: {tps:6.2f} turns/s{eff}  [{load()}]"
                    )
        finally:
            if pg is not None:
                pg.cleanup()  # type: ignore[attr-defined]
    print("goal: the issue states none for these figures (reported, not judged)")


if __name__ == "__main__":
    main()
