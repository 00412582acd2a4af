"""Objects the cycle collector tracks per concurrent session, ours vs the raw httpx floor.

Companion of ``bench/concurrency.py`` (issue 15, goal 2): CPython's full collections scan every
tracked container, so their cost grows with what each live session keeps tracked. This script
counts, with a loopback server in another process that holds its answers open:

- **waiting**: sessions whose request waits for a pool slot (``max_connections`` small, the
  server stalls every request before answering);
- **streaming**: sessions half way through their 200-chunk answer (no connection limit, the
  server stalls after 100 text events of the second request);
- **done**: sessions whose turn is over, every result kept (as ``asyncio.gather`` keeps them
  until the last one is done; the bench's own server).

Per session = (tracked objects with ``N2`` sessions - with ``N1``) / (``N2 - N1``), after
``gc.collect()``, so fixed costs cancel out; also the references among them
(``gc.get_referents``) and the types adding the most (``collections.Counter`` of type names).
Both contenders run in this process, one after the other, under the same GC settings.

Run: ``.venv/bin/python bench/gc_census.py [--n1 1000 --n2 3000 --top 25]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import concurrency as cb  # noqa: E402

STALL_TEXT_EVENTS = 100


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, mode: str) -> None:
    """The bench server's answers, stalled: ``wait`` before any answer, ``stream`` after
    ``STALL_TEXT_EVENTS`` text events of the second answer."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length)
            if mode == "wait":
                await asyncio.sleep(3600)
            if b'"role":"tool"' in body:
                events = cb.TEXT_EVENTS[:STALL_TEXT_EVENTS]
                writer.write(cb.HEAD)
                for p in cb._http_chunks(events):
                    writer.write(p)
                await writer.drain()
                await asyncio.sleep(3600)
            m = cb.SESSION_RE.search(body)
            writer.write(cb.HEAD)
            for p in cb._http_chunks(cb.tool_call_events(int(m.group(1)) if m else -1)):
                writer.write(p)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
        return
    finally:
        writer.close()


async def _serve(mode: str) -> None:
    server = await asyncio.start_server(
        lambda r, w: _handle(r, w, mode), "127.0.0.1", 0, backlog=16384, limit=1 << 20
    )
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def census() -> tuple[Counter[str], int]:
    """(tracked objects by type name, references among all tracked objects), after a full
    collection."""
    gc.collect()
    objs = gc.get_objects()
    types = Counter(type(o).__name__ for o in objs)
    refs = sum(len(gc.get_referents(o)) for o in objs)
    del objs
    return types, refs


async def _settle(prev: int = -1) -> None:
    """Wait until the number of tracked objects stops changing (every session reached the
    stall)."""
    for _ in range(200):
        await asyncio.sleep(0.3)
        gc.collect()
        now = len(gc.get_objects())
        if now == prev:
            return
        prev = now


async def measure(kind: str, mode: str, n: int, base: str, limit: int | None) -> tuple[Counter[str], int]:
    """Tracked objects while ``n`` conversations of ``kind`` (``ours`` / ``floor``) are stalled
    (``mode`` ``wait`` / ``stream``) or done, their results kept (``done``)."""
    if kind == "ours":
        sessions, store = cb.build_sessions(n, base, shared=True)
        sessions[0].model.options.max_connections = limit
        coros = [s.arun_turn(f"session {k}") for k, s in enumerate(sessions)]
    else:
        sessions, store = [], None
        pool = cb.FloorPool(limit)
        url = base + "/chat/completions"
        coros = [cb.floor_one(pool, url, k) for k in range(n)]
    task = asyncio.ensure_future(asyncio.gather(*coros))
    del coros
    if mode == "done":
        results = await task  # kept, as ``asyncio.gather`` keeps them until every one is done
    await _settle()
    found = census()
    if mode == "done":
        del results
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    if kind == "ours":
        for b in {id(s.model): s.model for s in sessions}.values():
            await b.aclose()
    else:
        await pool.aclose()
    del sessions, store
    return found


def run(mode: str, n1: int, n2: int, top: int) -> None:
    if mode == "done":
        proc, base = cb.start_server()
    else:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", mode],
            stdout=subprocess.PIPE,
            text=True,
            cwd=str(HERE.parent),
        )
        assert proc.stdout is not None
        base = f"http://127.0.0.1:{int(proc.stdout.readline())}/v1"
    limit = 100 if mode == "wait" else None
    try:
        for kind in ("floor", "ours"):
            a_types, a_refs = asyncio.run(measure(kind, mode, n1, base, limit))
            b_types, b_refs = asyncio.run(measure(kind, mode, n2, base, limit))
            d = n2 - n1
            per = (b_types.total() - a_types.total()) / d
            per_refs = (b_refs - a_refs) / d
            b_types.subtract(a_types)
            most = [(t, c / d) for t, c in b_types.most_common(top) if c / d >= 0.05]
            what = {
                "wait": "waiting for a pool slot",
                "stream": "streaming (100 of 200 chunks read)",
                "done": "done, its result kept",
            }[mode]
            print(f"{kind:5s} {what}: {per:6.1f} tracked objects, {per_refs:6.1f} references per session")
            print("      " + ", ".join(f"{t} {c:.2f}" for t, c in most))
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--serve", choices=("wait", "stream"), help=argparse.SUPPRESS)
    ap.add_argument("--n1", type=int, default=1000)
    ap.add_argument("--n2", type=int, default=3000)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--mode", choices=("wait", "stream", "done", "all"), default="all")
    args = ap.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve))
        return
    cb.raise_fd_limit()
    print(f"gc census: sessions {args.n1} -> {args.n2}, load average {os.getloadavg()}")
    for mode in ("wait", "stream", "done") if args.mode == "all" else (args.mode,):
        run(mode, args.n1, args.n2, args.top)


if __name__ == "__main__":
    main()
