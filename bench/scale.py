"""Durable turns: the overhead per step of the durable path against the DBOS floor, and
throughput with 1, 2 and 4 worker processes, on SQLite (embedded) and on PostgreSQL (pgserver).

Every turn is the same 5-step turn against a loopback OpenAI-compatible fake model server with
a fixed per-token delay (``tests/_durable_app.py``): 3 model calls and 2 tool calls, one of
them a side effect writing a row.

Overhead per step (judged). One process launches a durable worker (``run_worker``, in a
thread) on the database and runs, round after round (the order rotating each round, so load
that comes and goes hits all three alike):

- the plain turn: the same agent, in process, on the same session store (SQLite file, or the
  Postgres store on Postgres), no DBOS;
- the durable turn: the ``durable_turn`` workflow, started in this process
  (``DBOS.start_workflow_async``) and awaited;
- the floor: a DBOS workflow of 5 no-op steps (``DBOS.run_step_async``), the same number of
  steps as the turn, on the same system database, started and awaited the same way.

Our overhead per step = median over the rounds of (durable turn - plain turn of the same
round) / 5; the floor per step = median floor workflow / 5. Goal: overhead <= 1.5 x the floor
(issue 31). Both are measured without the queue: a queued turn and a queued floor workflow
would both wait for the queue's poll (``--poll``) and the caller's result polling, the same
fixed cost, printed separately (the "enqueue -> result" lines, through a worker process).

Also printed, not judged: the statements the system database gets during one durable turn and
during one floor workflow (counted on DBOS's executor threads of this process, where the
in-process worker runs them), a figure the machine's load does not move.

Throughput = turns / wall time from the first enqueue to the last result, with ``--turns``
turns spread over ``--sessions`` sessions (a session's turns run one at a time). Scaling
efficiency of N workers = (turns/s with N) / (N x turns/s with 1); not judged (the issue
states no goal; on a 2-core machine shared with other jobs more than 2 workers cannot scale).

Run: ``.venv/bin/python bench/scale.py [--rounds 30 --turns 60 --sessions 20 --workers 1,2,4
--db sqlite,postgres]`` (``--workers ''`` skips the throughput rows).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

import sqlalchemy  # noqa: E402
from dbos import DBOS  # noqa: E402
from tests._durable_app import FakeModelServer, agent, effects_table  # noqa: E402
from tests._durable_pool import WorkerPool, start_postgres  # noqa: E402

from foundation_ai.durable import DurableClient, DurableConfig, run_worker  # noqa: E402
from foundation_ai.durable.worker import TurnResult, durable_turn  # noqa: E402
from foundation_ai.types import Messages, from_json, to_json  # noqa: E402

STEPS = 5
GOAL = 1.5
"""Goal: durable overhead per step <= GOAL x the floor per step (issue 31)."""


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


async def _noop() -> str:
    return ""


@DBOS.workflow(name="bench.scale.noop_steps")
async def noop_steps(n: int) -> str:
    """The floor: ``n`` no-op DBOS steps in one workflow."""
    for i in range(n):
        await DBOS.run_step_async({"name": f"noop:{i}"}, _noop)
    return "ok"


class _Statements:
    """Counts the statements the system database gets (all DBOS engines of this process) while
    ``on``: a figure the machine's load does not move."""

    def __init__(self) -> None:
        self.on, self.n = False, 0
        sqlalchemy.event.listen(sqlalchemy.engine.Engine, "before_cursor_execute", self._count)

    def _count(self, *_: Any) -> None:
        # on DBOS's executor threads (the workflows and their blocking calls), not the
        # queues' pollers
        if self.on and threading.current_thread().name.startswith("dbos-executor"):
            self.n += 1

    async def of(self, run: Awaitable[None]) -> int:
        self.on, self.n = True, 0
        try:
            await run
        finally:
            self.on = False
        return self.n


STATEMENTS = _Statements()


def databases(kind: str, tmp: Path, pg: Any, tag: str) -> str:
    """The ``--db`` URL of a fresh database (its session store in the same database)."""
    (tmp / tag).mkdir()
    if kind == "sqlite":
        return f"sqlite:///{tmp / tag / 'durable.sqlite3'}"
    pg.psql(f"CREATE DATABASE {tag};")
    return str(pg.get_uri().replace("/postgres?", f"/{tag}?"))


def _tag(kind: str, what: str) -> str:
    return f"{kind}_{what}_{int(time.time() * 1000) % 10**8}"


def step_overhead(kind: str, args: argparse.Namespace, tmp: Path, pg: Any) -> tuple[float, float]:
    """(our overhead per step, the floor per step) in seconds; prints the figures."""
    db = databases(kind, tmp, pg, _tag(kind, "steps"))
    config = DurableConfig(db, worker_concurrency=1, polling_interval=1.0)
    stop, ready = threading.Event(), threading.Event()
    worker = threading.Thread(
        target=run_worker,
        args=(config, agent),
        kwargs={"stop": stop, "ready": ready.set, "executor_id": f"bench-{kind}", "grace": 5.0},
        daemon=True,
    )
    worker.start()
    if not ready.wait(120):
        raise TimeoutError("the in-process worker did not start")
    store = config.open_store()
    plain_session = agent().with_store(store).build(f"plain-{kind}")
    last: dict[str, str] = {}

    async def plain(i: int) -> None:
        assert (await plain_session.arun_turn(f"p{i}")).ok

    async def durable(i: int) -> None:
        prompt = to_json([Messages.user(f"d{i}")]).decode()
        h = await DBOS.start_workflow_async(durable_turn, f"durable-{kind}", prompt)
        res = from_json(await h.get_result(), TurnResult)
        assert res.ok, res.error
        last["durable"] = h.workflow_id

    async def floor(i: int) -> None:
        h = await DBOS.start_workflow_async(noop_steps, STEPS)
        assert await h.get_result() == "ok"
        last["floor"] = h.workflow_id

    runs: list[tuple[str, Callable[[int], Awaitable[None]]]] = [
        ("plain", plain),
        ("durable", durable),
        ("floor", floor),
    ]

    async def rounds() -> dict[str, list[float]]:
        for _, run in runs:  # warm: connections, imports, the first session write
            await run(-1)
        times: dict[str, list[float]] = {name: [] for name, _ in runs}
        for r in range(args.rounds):
            for name, run in runs[r % 3 :] + runs[: r % 3]:
                t0 = time.perf_counter()
                await run(r)
                times[name].append(time.perf_counter() - t0)
        counted = {name: await STATEMENTS.of(run(-2)) for name, run in runs if name != "plain"}
        print(
            f"{kind:8s}   system-database statements per durable turn: {counted['durable']}, "
            f"per floor workflow: {counted['floor']}"
        )
        ops = {k: await DBOS.list_workflow_steps_async(v) for k, v in last.items()}
        for name, steps in ops.items():
            names = [str(s["function_name"]).split(":")[0] for s in steps]
            counts = {n: names.count(n) for n in dict.fromkeys(names)}
            print(f"{kind:8s}   DBOS operations recorded per {name} workflow: {len(steps)} {counts}")
        return times

    try:
        times = asyncio.run(rounds())
    finally:
        plain_session.close()
        store.close()
        stop.set()
        worker.join(60)
    med = {k: statistics.median(v) for k, v in times.items()}
    diff = statistics.median(d - p for d, p in zip(times["durable"], times["plain"], strict=True))
    ours, base = diff / STEPS, med["floor"] / STEPS
    ratio = ours / base
    verdict = "met" if ratio <= GOAL else "NOT met"
    print(
        f"{kind:8s} per turn, medians of {args.rounds} rounds: plain {med['plain'] * 1000:.1f} ms, "
        f"durable {med['durable'] * 1000:.1f} ms, floor ({STEPS} no-op DBOS steps) "
        f"{med['floor'] * 1000:.1f} ms"
    )
    print(
        f"{kind:8s} durable overhead {ours * 1000:.2f} ms/step, floor {base * 1000:.2f} ms/step, "
        f"ratio {ratio:.2f} (goal <= {GOAL}): {verdict}  [{load()}]"
    )
    return ours, base


def throughput(
    kind: str, workers: int, args: argparse.Namespace, tmp: Path, pg: Any, env: dict[str, str]
) -> float:
    tag = _tag(kind, f"w{workers}")
    db = databases(kind, tmp, pg, tag)
    pool = WorkerPool(tmp / tag, db, None, env, concurrency=args.concurrency)
    try:
        pool.start(workers)
        with DurableClient(DurableConfig(db)) as client:
            t0 = time.perf_counter()
            handles = [client.enqueue_turn(f"s{i % args.sessions}", f"t{i}") for i in range(args.turns)]
            for h in handles:
                assert h.result(timeout=900).ok
            return args.turns / (time.perf_counter() - t0)
    finally:
        pool.stop()


def queued_latency(
    kind: str, args: argparse.Namespace, tmp: Path, pg: Any, env: dict[str, str], steering: bool
) -> float:
    """Median enqueue -> result of one turn run alone on one worker process (seconds)."""
    tag = _tag(kind, "lat")
    db = databases(kind, tmp, pg, tag)
    extra = () if steering else ("--no-steering",)
    pool = WorkerPool(tmp / tag, db, None, env, concurrency=1, extra=extra)
    try:
        pool.start(1)
        with DurableClient(DurableConfig(db)) as client:
            client.enqueue_turn("warm", "warm").result(timeout=120)
            times = []
            for i in range(args.latency_turns):
                t0 = time.perf_counter()
                assert client.enqueue_turn("lat", f"l{i}").result(timeout=120, poll=0.005).ok
                times.append(time.perf_counter() - t0)
            return statistics.median(times)
    finally:
        pool.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=30, help="rounds of the per-step overhead figure")
    ap.add_argument("--turns", type=int, default=60)
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--db", default="sqlite,postgres")
    ap.add_argument("--concurrency", type=int, default=4, help="turns at once per worker")
    ap.add_argument("--token-delay", type=float, default=0.002, help="seconds per streamed token")
    ap.add_argument("--latency-turns", type=int, default=10)
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",") if x]
    kinds = args.db.split(",")
    print(f"cores {os.cpu_count()}; {load()}")
    verdicts = []
    with tempfile.TemporaryDirectory() as d, FakeModelServer(token_delay=args.token_delay) as model:
        tmp = Path(d)
        env = {"FA_MODEL_URL": model.base_url, "FA_EFFECTS_DB": str(tmp / "effects.sqlite3"), "FA_SLOW": "0"}
        os.environ.update(env)
        effects_table(env["FA_EFFECTS_DB"]).close()
        pg = start_postgres(tmp / "pg") if "postgres" in kinds else None
        try:
            for kind in kinds:
                ours, base = step_overhead(kind, args, tmp, pg)
                verdicts.append((kind, ours, base))
                for steering in (True, False):
                    lat = queued_latency(kind, args, tmp, pg, env, steering)
                    print(
                        f"{kind:8s} enqueue -> result of a turn alone on 1 worker process, steering "
                        f"{'on ' if steering else 'off'}: {lat * 1000:.1f} ms (median)  [{load()}]"
                    )
                base_tps = None
                for n in counts:
                    tps = throughput(kind, n, args, tmp, pg, env)
                    base_tps = base_tps or (tps if n == counts[0] else None)
                    eff = "" if base_tps is None else f"  efficiency {tps / (n / counts[0] * base_tps):.2f}"
                    print(
                        f"{kind:8s} {n} worker(s) x {args.concurrency}: {tps:6.2f} turns/s{eff}  [{load()}]"
                    )
        finally:
            if pg is not None:
                pg.cleanup()
    for kind, ours, base in verdicts:
        verdict = "met" if ours <= GOAL * base else "NOT met"
        print(
            f"goal {kind}: durable overhead per step <= {GOAL} x the DBOS floor per step: "
            f"{ours * 1000:.2f} / {base * 1000:.2f} ms = {ours / base:.2f}: {verdict}"
        )
    print(f"throughput: the issue states no goal (reported, not judged); {load()}")


if __name__ == "__main__":
    main()
