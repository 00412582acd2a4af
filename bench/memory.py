"""Memory benchmarks, in one run:

(a) vector search: query latency and recall@10 against exact search, at 10,000 and 100,000
    vectors of 256 dimensions, for foundation_ai's ``InMemoryVectorStore`` (numpy, exact),
    ``SqliteVecStore`` (sqlite-vec through apsw, exact) and ``PgVectorStore`` (PostgreSQL 16 +
    pgvector HNSW, a real server started by pgserver in a temporary folder), beside the peers
    ``usearch`` (HNSW) and ``faiss`` (``IndexHNSWFlat`` and the exact ``IndexFlatIP``). Data: a
    mixture of 64 Gaussian clusters, L2-normalised (cosine); 200 queries from the same
    mixture; ground truth by exact numpy search. Load time is the bulk insert (plus index build).
(b) context assembly per turn (``MemoryManager.assemble_for``: retrieval for the prompt with an
    uncached embedding, memory blocks, history fitting) with 10,000 stored memories and a
    2,000-message history. Goal: under 5 ms per turn, judged on the median process CPU time per
    turn (wall times are printed too; they swell when other work shares the machine).
(c) embedding throughput of the default embedder (wordllama, uncached) on short texts.
(d) idle-session memory at 10,000 sessions, every run: the RSS growth per session of a live
    process (one turn each against a loopback server, the HTTP pool open; goal <= 20 KB), the
    traced heap beside it (``bench/concurrency.py --idle 10000``, a fresh process).

Usage: ``python bench/memory.py [--quick]`` (``--quick``: 10,000 vectors only). Prints the
load average and "met"/"NOT met" for the goal.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

DIM = 256
QUERIES = 200
K = 10
GOAL_ASSEMBLY_MS = 5.0
IDLE_SESSIONS = 10_000


def dataset(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(64, DIM)).astype(np.float32)
    pick = rng.integers(0, 64, size=n + QUERIES)
    data = centers[pick] + 0.6 * rng.normal(size=(n + QUERIES, DIM)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    return data[:n], data[n:]


def exact_top(data: np.ndarray, queries: np.ndarray) -> list[set[int]]:
    scores = queries @ data.T
    return [set(np.argpartition(-row, K)[:K].tolist()) for row in scores]


def report(name: str, n: int, load_s: float, lat_ms: list[float], recall: float) -> None:
    lat = sorted(lat_ms)
    p50 = statistics.median(lat)
    p95 = lat[int(len(lat) * 0.95) - 1]
    print(
        f"  {name:<34} n={n:>7,}  load {load_s:7.2f} s  query p50 {p50:8.3f} ms  p95 {p95:8.3f} ms  recall@10 {recall:.3f}"
    )


def run_store(
    name: str,
    n: int,
    load: Callable[[], Any],
    query: Callable[[Any, np.ndarray], list[int]],
    queries: np.ndarray,
    truth: list[set[int]],
) -> None:
    try:
        t0 = time.perf_counter()
        handle = load()
        load_s = time.perf_counter() - t0
        query(handle, queries[0])  # warm up
        lat: list[float] = []
        hits = 0
        for q, want in zip(queries, truth, strict=True):
            t = time.perf_counter()
            got = query(handle, q)
            lat.append((time.perf_counter() - t) * 1000)
            hits += len(want & set(got))
        report(name, n, load_s, lat, hits / (K * len(queries)))
    except Exception as exc:
        print(f"  {name:<34} n={n:>7,}  skipped: {type(exc).__name__}: {exc}")


def entries(data: np.ndarray) -> Any:
    from foundation_ai.vectors import VectorEntry

    for i in range(0, len(data), 2000):
        block = data[i : i + 2000].tolist()
        yield [VectorEntry(str(i + j), row) for j, row in enumerate(block)]


def bench_vectors(sizes: list[int], pg_uri: str | None, tmp: str) -> None:
    print("(a) vector search, 256 dimensions, cosine, k=10, 200 queries")
    for n in sizes:
        bench_size(n, pg_uri, tmp)


def bench_size(n: int, pg_uri: str | None, tmp: str) -> None:
    from foundation_ai.vectors import InMemoryVectorStore, Metric, PgVectorStore, SqliteVecStore

    data, queries = dataset(n)
    truth = exact_top(data, queries)

    def ids_of(matches: Any) -> list[int]:
        return [int(m.id) for m in matches]

    def load_mem() -> Any:
        s = InMemoryVectorStore(Metric.Cosine, DIM)
        for batch in entries(data):
            s.upsert(batch)
        return s

    run_store(
        "foundation_ai InMemoryVectorStore",
        n,
        load_mem,
        lambda s, q: ids_of(s.search(q.tolist(), K)),
        queries,
        truth,
    )

    def load_sqlite() -> Any:
        s = SqliteVecStore(os.path.join(tmp, f"v{n}.sqlite3"), dimensions=DIM)
        for batch in entries(data):
            s.upsert(batch)
        return s

    run_store(
        "foundation_ai SqliteVecStore",
        n,
        load_sqlite,
        lambda s, q: ids_of(s.search(q.tolist(), K)),
        queries,
        truth,
    )

    if pg_uri is not None:

        def load_pg() -> Any:
            s = PgVectorStore(pg_uri, dimensions=DIM, table=f"bench{n}", index=None)
            s.drop()
            s = PgVectorStore(pg_uri, dimensions=DIM, table=f"bench{n}", index=None)
            for batch in entries(data):
                s.upsert(batch)
            with s._lock:  # build the HNSW index after the bulk load (pgvector's advice)
                s._conn.execute("SET maintenance_work_mem = '512MB'")
                s._conn.execute(f"CREATE INDEX ON bench{n} USING hnsw (embedding vector_cosine_ops)")
            return s

        run_store(
            "foundation_ai PgVectorStore (HNSW)",
            n,
            load_pg,
            lambda s, q: ids_of(s.search(q.tolist(), K)),
            queries,
            truth,
        )

    def load_usearch() -> Any:
        from usearch.index import Index

        idx = Index(ndim=DIM, metric="cos", dtype="f32")
        idx.add(np.arange(n), data)
        return idx

    run_store(
        "peer usearch (HNSW)",
        n,
        load_usearch,
        lambda idx, q: [int(k) for k in idx.search(q, K).keys],
        queries,
        truth,
    )

    def load_faiss_hnsw() -> Any:
        import faiss

        idx = faiss.IndexHNSWFlat(DIM, 32, faiss.METRIC_INNER_PRODUCT)
        idx.hnsw.efSearch = 64
        idx.add(data)
        return idx

    def faiss_query(idx: Any, q: np.ndarray) -> list[int]:
        _, got = idx.search(q.reshape(1, -1), K)
        return [int(i) for i in got[0]]

    run_store("peer faiss IndexHNSWFlat", n, load_faiss_hnsw, faiss_query, queries, truth)

    def load_faiss_flat() -> Any:
        import faiss

        idx = faiss.IndexFlatIP(DIM)
        idx.add(data)
        return idx

    run_store("peer faiss IndexFlatIP (exact)", n, load_faiss_flat, faiss_query, queries, truth)


def bench_assembly() -> None:
    from foundation_ai.agentic import InMemorySessionStore, ScriptedModel
    from foundation_ai.memory import MemoryConfig, MemoryManager
    from foundation_ai.types import (
        MemoryFact,
        Messages,
        ModelId,
        ModelInteraction,
        ObservationEntry,
        SessionRecord,
        TextContent,
    )

    print("(b) context assembly per turn, 10,000 stored memories, 2,000-message history, 8,192-token window")
    rng = np.random.default_rng(3)
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "river",
        "mountain",
        "coffee",
        "train",
        "paper",
        "garden",
        "music",
        "python",
        "database",
        "kettle",
    ]

    def sentence(i: int) -> str:
        return f"note {i}: " + " ".join(rng.choice(words, size=12).tolist())

    model = ScriptedModel(context_window=8192)
    host = SimpleNamespace(
        models=[model], messages=[], store=InMemorySessionStore(), session_id="b", context_start=0
    )
    mgr = MemoryManager(MemoryConfig())
    mgr.bind(host)
    history: list[Any] = []
    records: list[Any] = []
    for i in range(1000):
        u = Messages.user(sentence(i))
        a = Messages.Assistant(model=ModelId.Name("m"), content=TextContent(sentence(i + 10**6)))
        history += [u, a]
        records += [SessionRecord.Conversation(message=u), SessionRecord.Conversation(message=a)]
    for j in range(80):  # 80 observations x 100 entries = 8,000 more memories
        records.append(
            SessionRecord.Observation(
                observations=[ObservationEntry(content=sentence(10**7 + j * 100 + e)) for e in range(100)],
                token_count=1500,
            )
        )
    records.append(
        SessionRecord.WorkingMemory(facts=[MemoryFact(content=sentence(-f)) for f in range(20)], version=1)
    )
    host.messages = history
    t0 = time.perf_counter()
    mgr.restore(records)
    assert mgr.retriever is not None
    mgr.retriever.flush(600)
    print(
        f"  indexed {len(mgr.retriever):,} memories (messages + observation entries) in {time.perf_counter() - t0:.2f} s"
    )
    interaction = ModelInteraction(system_prompt="You are a helpful assistant.")
    times: list[float] = []
    cpu: list[float] = []
    for t in range(300):
        host.messages.append(
            Messages.user(f"question {t}: what did I say about the {words[t % len(words)]} and {t}?")
        )
        keep = len(host.messages) - 1
        c1 = time.process_time()
        t1 = time.perf_counter()
        out = mgr.assemble_for(interaction, model, keep, keep + 1)
        times.append((time.perf_counter() - t1) * 1000)
        cpu.append((time.process_time() - c1) * 1000)
        host.messages.pop()
    assert mgr.last_context is not None
    times.sort()
    p95 = times[int(len(times) * 0.95) - 1]
    cpu_med = statistics.median(cpu)
    print(
        f"  assemble_for: CPU median {cpu_med:.3f} ms  mean {statistics.fmean(cpu):.3f} ms;  wall median "
        f"{statistics.median(times):.3f} ms  p95 {p95:.3f} ms  (request: {len(out.messages)} messages, "
        f"{mgr.last_context.tokens} tokens, {len(mgr.last_context.recalled)} recalled)"
    )
    verdict = "met" if cpu_med < GOAL_ASSEMBLY_MS else "NOT met"
    print(
        f"  goal: context assembly under {GOAL_ASSEMBLY_MS} ms per turn (median process CPU time, robust to "
        f"other work on the machine; wall p95 {'under' if p95 < GOAL_ASSEMBLY_MS else 'over'} it): {verdict}"
    )
    mgr.close()


def bench_embedding() -> None:
    from foundation_ai.memory import WordLlamaEmbedder

    print("(c) embedding throughput of the default embedder (wordllama 256-d, uncached)")
    e = WordLlamaEmbedder()
    texts = [f"message number {i} about the garden, the train and a cup of coffee" for i in range(10_000)]
    e.embed(texts[:10])
    for batch in (1, 64, 10_000):
        t0 = time.perf_counter()
        done = 0
        while done < len(texts):
            e.embed(texts[done : done + batch])
            done += batch
            if batch == 1 and done >= 2000:
                break
        dt = time.perf_counter() - t0
        print(f"  batch {batch:>6}: {done / dt:12,.0f} texts/s  ({dt / done * 1e6:8.2f} us per text)")


def bench_idle_sessions(n: int = IDLE_SESSIONS) -> None:
    """(d): ``bench/concurrency.py --idle N`` in a fresh process (its loopback server, its
    sessions), so nothing of (a)-(c) is in the figures."""
    import subprocess

    print(f"(d) idle-session memory in a live process, {n:,} sessions (bench/concurrency.py --idle)")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "concurrency.py")
    done = subprocess.run([sys.executable, script, "--idle", str(n)], check=False)
    if done.returncode not in (0, 1):
        print(f"  idle-session run failed (exit {done.returncode})")


def main() -> None:
    quick = "--quick" in sys.argv
    print(
        f"bench/memory.py  load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}  cpus {os.cpu_count()}"
    )
    sizes = [10_000] if quick else [10_000, 100_000]
    with tempfile.TemporaryDirectory() as tmp:
        server = None
        uri = None
        try:
            import pgserver

            server = pgserver.get_server(os.path.join(tmp, "pg"), cleanup_mode="stop")
            uri = server.get_uri()
        except Exception as exc:
            print(f"  (pgvector skipped: {type(exc).__name__}: {exc})")
        try:
            bench_vectors(sizes, uri, tmp)
        finally:
            if server is not None:
                server.cleanup()
    bench_assembly()
    bench_embedding()
    bench_idle_sessions()
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
