"""``foundation-ai serve`` under many concurrent streaming clients.

Four processes on loopback, so that no two of them share an event loop:

- a fake OpenAI-compatible model server (plain asyncio, prebuilt bytes) that answers every
  ``POST /v1/chat/completions`` with a stream of ``--tokens`` content chunks, ``--delay``
  seconds apart (chunk ``i`` carries the text ``"t<i> "``);
- ``foundation-ai serve``'s app under uvicorn (no auth, one agent whose model is
  ``openai_chat`` pointed at the fake server, SQLite session store in a temp dir);
- the raw relay floor: a plain Starlette app under the same uvicorn settings, in its own
  process, that relays each request to the fake model and streams its body back byte for byte
  as it arrives (no session, turn, parsing or re-encoding);
- a load generator (plain asyncio sockets, one connection per stream) that opens N streams at
  once and records, for every content chunk, its arrival time since the request started;
- this orchestrator, which starts the others, samples the servers' RSS and CPU time from
  ``/proc`` and prints the figures.

At each concurrency level (``--levels``, default 100 and 1,000) the load generator runs
``--rounds`` (default 5) sets of three rounds back to back, in an order that turns each set: a
*direct* round calls the fake model server itself, a *served* round calls it through ``serve``,
a *floor* round through the raw relay; same N, same tokens, same delay. The servers keep
running from one round to the next (kept-alive connections to the model included).

- **Added latency per chunk** = for chunk ``i`` of stream slot ``k``: its arrival time through
  ``serve`` minus the arrival time of chunk ``i`` of slot ``k`` in the same set's direct round
  (both measured from that stream's request start, so the first chunk includes connecting and
  starting the turn). Reported at p50 and p99 over all chunks and for the first chunk alone.
- **Relay per chunk** = the chunk's transit time (from the fake model writing it, a timestamp
  in its text, to its arrival at the client) through ``serve`` minus its transit in the direct
  round: what ``serve`` adds per chunk once the turn runs, without the queueing of N turns that
  all start at the same instant.
- **Server CPU per relayed chunk** = the server process's CPU time (user + system, from
  ``/proc``) over its rounds / the chunks relayed, turn start included; the same for the floor
  process over the floor rounds. Their ratio is judged.
- **Memory per open stream** = (peak server RSS during the served rounds - server RSS just
  before them) / N.
- **One core's worth of streams**: from the server CPU per chunk at the first level, the most
  streams one core carries at this token rate (``--core-level auto``; rounded down to tens);
  a last level runs at that count and judges the added latency there, under *sustained* load:
  the slots' starts are spread over one stream's length (``--tokens`` x ``--delay``) and each
  slot runs three streams back to back, so about that many streams are open at any time and
  their chunks arrive spread out. (Before, all N turns started at the same instant: every
  chunk then queued behind N turn starts and a burst of N chunks every ``--delay``, which at
  one core's worth takes the whole ``--delay`` to relay; that measures a thundering herd, and
  its p50 could not be below ~``--delay``/2 even on an idle machine.) The figure is judged
  only when the server's threads waited for a CPU at most 20 % of the time (``/proc``
  schedstat): on a machine where other processes take the CPU the latency is theirs, and the
  bench says "not judged" with the figure.

The machine may have as few as 2 cores shared with the load generator, the fake model and
other jobs, so the script prints the load average and each process's CPU use during the
rounds: a server at ~100 % of a core is saturated and its added latency is queueing; a server
whose threads wait for a CPU much of the time is starved by other processes, and its latency
is theirs. CPU time per chunk does not depend on that waiting, so the ratio to the floor is
the figure to compare between runs.

Between two served rounds come a direct and a floor round: with rounds longer than a few
seconds the upstream connections of both servers outlive httpx's keep-alive expiry (5 s), so
both open them again in each round (the same for both; it is in both figures).

Goals (issue 31, set before measuring, never tuned to the figures): at every level every
stream of every round completes with all its chunks (five rounds at 1,000 streams); server CPU
per relayed chunk <= 1.5x the raw relay floor's; added latency per chunk p50 <= 20 ms at the
streams one core carries; memory <= 256 KiB per open stream.

Run: ``.venv/bin/python bench/serve.py [--levels 100,1000] [--tokens 20] [--delay 0.05]``.
``--profile FILE`` writes a cProfile of the server process, in CPU time of its event loop
thread (the figures are then not
representative).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOAL_CPU_RATIO = 1.5
GOAL_CORE_P50_MS = 20.0
GOAL_KIB_PER_STREAM = 256.0
CORE_REPEAT = 3
"""Streams each slot of the sustained level runs back to back."""
MAX_RUNQ_SHARE = 0.2
"""The added latency at one core's worth of streams is judged only when the server's threads
waited for a CPU at most this share of the served rounds' time (else another process's work
is measured)."""


def _raise_fd_limit() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# -- the fake model server (its own process) ----------------------------------------------------


def _chunked(payload: dict[str, Any]) -> bytes:
    data = b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


async def fake_main(port: int, tokens: int, delay: float) -> None:
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": "fake"}
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )
    first = _chunked(
        {
            **base,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
        }
    )
    # chunk i's text is "t<i>@<send time> " (time.perf_counter: CLOCK_MONOTONIC, shared by the
    # processes of the box), so the load generator also sees each chunk's transit time
    marker = "\x00"
    around = json.dumps(
        {**base, "choices": [{"index": 0, "delta": {"content": marker}, "finish_reason": None}]},
        separators=(",", ":"),
    ).encode()
    before, after = around.split(b"\\u0000")

    def piece(i: int) -> bytes:
        data = b"data: " + before + b"t%d@%.6f " % (i, time.perf_counter()) + after + b"\n\n"
        return b"%x\r\n%s\r\n" % (len(data), data)

    usage = {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": 5 + tokens}
    last = (
        _chunked({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage})
        + b"%x\r\n%s\r\n" % (len(b"data: [DONE]\n\n"), b"data: [DONE]\n\n")
        + b"0\r\n\r\n"
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: one request after the other
                req = await reader.readuntil(b"\r\n\r\n")
                m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", req)
                await reader.readexactly(int(m.group(1)) if m else 0)
                writer.write(head + first + piece(0))
                for i in range(1, tokens):
                    await asyncio.sleep(delay)
                    writer.write(piece(i))
                writer.write(last)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


# -- the server under test (its own process) -----------------------------------------------------


def uvicorn_config(app: Any, args: argparse.Namespace) -> Any:
    """The uvicorn settings of both servers (under test and floor): loopback, ``--port``,
    ``--loop``, ``--http``, a backlog for a thousand connections at once."""
    import uvicorn

    return uvicorn.Config(
        app,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        backlog=4096,
        timeout_keep_alive=30,
        loop=args.loop,
        http=args.http,
    )


def serve_main(args: argparse.Namespace) -> None:
    import uvicorn

    from foundation_ai.agentic import InMemorySessionStore, SqliteSessionStore
    from foundation_ai.backends._openai_chat import openai_chat
    from foundation_ai.serve import Agent, Limits, ServeConfig, create_app

    # the backend's own shared pool (what `serve` uses for a model string): shards of 10
    # connections; one user httpx2.AsyncClient with unlimited connections would pay httpcore's
    # scan over all its pooled connections on every request and release
    model = openai_chat("fake", base_url=args.model_url, api_key="unused", max_retries=0, timeout=300)
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
    server = uvicorn.Server(uvicorn_config(app, args))
    if not args.profile:
        server.run()
        return
    import cProfile
    import signal

    prof = cProfile.Profile(time.thread_time)  # CPU time of the event loop thread, not wall time
    signal.signal(signal.SIGTERM, lambda *_: setattr(server, "should_exit", True))
    prof.enable()
    try:
        server.run()
    finally:
        prof.disable()
        prof.dump_stats(args.profile)


# -- the raw relay floor (its own process) -------------------------------------------------------


def floor_main(args: argparse.Namespace) -> None:
    """A plain Starlette app under the same uvicorn settings that relays each request to the
    fake model and streams its body back as it arrives: the chunks, byte for byte, with no
    session, turn, parsing or re-encoding. Upstream connections come from a free list of
    one-connection ``httpx2.AsyncClient`` objects (kept alive, O(1) per request: one client
    holding every connection would pay httpcore's scan over them on each request)."""
    import httpx2
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    url = args.model_url + "/chat/completions"
    free: list[httpx2.AsyncClient] = []
    limits = httpx2.Limits(max_connections=1, max_keepalive_connections=1)
    tls = httpx2.create_ssl_context()  # one for all clients (unused on http://; costly to build)
    headers = {"content-type": "application/json", "accept": "text/event-stream"}

    async def relay(request: Request) -> StreamingResponse:
        body = await request.body()
        client = free.pop() if free else httpx2.AsyncClient(timeout=300, limits=limits, verify=tls)
        resp = await client.send(
            client.build_request("POST", url, content=body, headers=headers), stream=True
        )

        async def chunks() -> Any:
            try:
                async for chunk in resp.aiter_raw():
                    yield chunk
            finally:
                await resp.aclose()
                free.append(client)

        return StreamingResponse(chunks(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", relay, methods=["POST"])])
    uvicorn.Server(uvicorn_config(app, args)).run()


# -- the load generator (its own process) --------------------------------------------------------

_PIECE = re.compile(rb'"content":"t(\d+)@(\d+\.\d+) "')


async def one_stream(port: int, request: bytes, tokens: int) -> tuple[list[float], list[float]]:
    """For content chunks 0..tokens-1: arrival times (s since the request started) and transit
    times (s from the fake model writing the chunk to its arrival here); NaN: missing."""
    times = [float("nan")] * tokens
    transit = [float("nan")] * tokens
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        tail = b""
        while True:
            data = await reader.read(65536)
            now = time.perf_counter()
            if not data:
                break
            buf = tail + data
            for m in _PIECE.finditer(buf):
                i = int(m.group(1))
                if i < tokens and times[i] != times[i]:  # NaN: not seen yet
                    times[i] = now - start
                    transit[i] = now - float(m.group(2))
            if b"[DONE]" in buf:
                break
            tail = buf[-64:]
    finally:
        writer.close()
    return times, transit


async def clients_main(
    port: int, model: str, n: int, tokens: int, stagger: float = 0.0, repeat: int = 1
) -> dict[str, Any]:
    """``n`` stream slots; slot ``k`` starts ``k * stagger / n`` s after the first and runs
    ``repeat`` streams one after the other. Results per stream, slot by slot (``repeat`` per
    slot), so two runs with the same arguments pair stream for stream."""
    body = json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "go"}], "stream": True}
    ).encode()
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"accept: text/event-stream\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    )
    t0 = time.perf_counter()

    async def slot(k: int) -> list[Any]:
        await asyncio.sleep(k * stagger / n)
        out: list[Any] = []
        for _ in range(repeat):
            try:
                out.append(await one_stream(port, request, tokens))
            except Exception as exc:  # counted as a failed stream
                out.append(exc)
        return out

    per_slot = await asyncio.gather(*(slot(k) for k in range(n)))
    results = [r for rs in per_slot for r in rs]
    wall = time.perf_counter() - t0
    errors = [repr(r) for r in results if isinstance(r, BaseException)]
    nan = [float("nan")] * tokens
    times = [r[0] if isinstance(r, tuple) else nan for r in results]
    transit = [r[1] if isinstance(r, tuple) else nan for r in results]
    return {"times": times, "transit": transit, "errors": errors[:3], "failed": len(errors), "wall": wall}


# -- the orchestrator ------------------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def runq_wait_s(pid: int) -> float:
    """Seconds the process's threads spent runnable but waiting for a CPU (``/proc/.../schedstat``)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (FileNotFoundError, IndexError, ValueError):
            continue
    return total / 1e9


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def wait_port(port: int) -> None:
    import socket

    for _ in range(600):
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


class Round:
    """One run of the load generator; samples the watched processes while it runs."""

    def __init__(
        self,
        env: dict[str, str],
        port: int,
        model: str,
        n: int,
        tokens: int,
        watch: dict[str, int],
        sustained: tuple[float, int] = (0.0, 1),
    ):
        self.env, self.port, self.model, self.n, self.tokens, self.watch = env, port, model, n, tokens, watch
        self.stagger, self.repeat = sustained
        self.peak_rss = 0
        self.cpu: dict[str, float] = {}
        self.cpu_s: dict[str, float] = {}

    def run(self, out: Path, server_pid: int) -> dict[str, Any]:
        cmd = [sys.executable, __file__, "--role", "clients", "--port", str(self.port), "--model", self.model]
        cmd += ["--clients", str(self.n), "--tokens", str(self.tokens), "--out", str(out)]
        cmd += ["--stagger", str(self.stagger), "--repeat", str(self.repeat)]
        before = {name: cpu_s(pid) for name, pid in self.watch.items()}
        waited = runq_wait_s(server_pid)
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=self.env)
        client_cpu = 0.0
        while proc.poll() is None:
            self.peak_rss = max(self.peak_rss, rss_kib(server_pid))
            try:
                client_cpu = cpu_s(proc.pid)
            except (FileNotFoundError, ProcessLookupError):
                pass
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        if proc.returncode:
            raise RuntimeError(f"the load generator failed ({proc.returncode})")
        self.cpu_s = {name: cpu_s(pid) - before[name] for name, pid in self.watch.items()}
        self.cpu = {name: used / wall for name, used in self.cpu_s.items()}
        self.cpu["clients"] = client_cpu / wall
        self.cpu["serve_runq"] = (runq_wait_s(server_pid) - waited) / wall
        result: dict[str, Any] = json.loads(out.read_text())
        return result


def level(
    n: int,
    rounds: int,
    tokens: int,
    env: dict[str, str],
    ports: dict[str, int],
    pids: dict[str, int],
    tmp: Path,
    sustained: tuple[float, int] = (0.0, 1),
) -> dict[str, Any]:
    """``rounds`` sets of rounds at ``n`` streams: direct, served and through the raw relay
    floor, in an order that turns each set (so no kind always follows another).
    ``sustained`` ``(stagger, repeat)``: the slots' starts spread over ``stagger`` s, each
    running ``repeat`` streams back to back (default: all ``n`` at once, one each)."""
    added: list[float] = []
    first: list[float] = []
    relay: list[float] = []
    kinds = ["direct", "served", "floor"]
    complete = dict.fromkeys(kinds, 0)
    failed = dict.fromkeys(kinds, 0)
    cpu_served: dict[str, list[float]] = {}
    cpu_s = {"served": 0.0, "floor": 0.0}
    walls: dict[str, list[float]] = {k: [] for k in kinds}
    rss_before = rss_kib(pids["serve"])
    peak = rss_before
    for r in range(rounds):
        order = kinds[r % 3 :] + kinds[: r % 3]
        got: dict[str, Any] = {}
        for kind in order:
            model = {"direct": "fake", "served": "bench", "floor": "fake"}[kind]
            rd = Round(env, ports[kind], model, n, tokens, pids, sustained)
            watched = pids["serve"] if kind != "floor" else pids["floor"]
            got[kind] = rd.run(tmp / f"round-{n}-{r}-{kind}.json", watched)
            if kind == "served":
                peak = max(peak, rd.peak_rss)
                for name, v in rd.cpu.items():
                    cpu_served.setdefault(name, []).append(v)
            if kind in cpu_s:
                cpu_s[kind] += rd.cpu_s["serve" if kind == "served" else "floor"]
            walls[kind].append(got[kind]["wall"])
            failed[kind] += got[kind]["failed"]
            for e in got[kind]["errors"]:
                print(f"  {kind} stream failed: {e}")
            done = sum(1 for ts in got[kind]["times"] if all(t == t for t in ts))
            complete[kind] += done
            if kind == "served" and done < n * sustained[1]:
                print(
                    f"  served round {r + 1}: {done}/{n * sustained[1]} streams complete"
                    f" ({got[kind]['wall']:.1f} s)"
                )
        for d_ts, s_ts in zip(got["direct"]["times"], got["served"]["times"], strict=True):
            for i, (d, s) in enumerate(zip(d_ts, s_ts, strict=True)):
                if d == d and s == s:
                    added.append(s - d)
                    if i == 0:
                        first.append(s - d)
        for d_tr, s_tr in zip(got["direct"]["transit"], got["served"]["transit"], strict=True):
            relay += [s - d for d, s in zip(d_tr, s_tr, strict=True) if d == d and s == s]
    chunks = n * sustained[1] * rounds * tokens
    return {
        "n": n,
        "streams": n * sustained[1] * rounds,
        "sustained": sustained,
        "complete": complete,
        "failed": failed,
        "added": added,
        "first": first,
        "relay": relay,
        "per_stream_kib": (peak - rss_before) / n,
        "rss_before": rss_before,
        "peak": peak,
        "cpu_served": {k: sum(v) / len(v) for k, v in cpu_served.items()},
        "server_us_per_chunk": cpu_s["served"] / chunks * 1e6,
        "floor_us_per_chunk": cpu_s["floor"] / chunks * 1e6,
        "walls": walls,
        "rounds": rounds,
    }


def core_streams(us_per_chunk: float, delay: float) -> int:
    """The most streams one core carries at ``us_per_chunk`` of server CPU per chunk and one
    chunk per stream every ``delay`` seconds, rounded down to a multiple of 10 (at least 10)."""
    return max(10, int(delay / (us_per_chunk / 1e6)) // 10 * 10)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--levels", default="100,1000", help="concurrent streams per level, comma-separated")
    p.add_argument(
        "--rounds", type=int, default=5, help="rounds of each kind (direct, served, floor) per level"
    )
    p.add_argument("--tokens", type=int, default=20)
    p.add_argument("--delay", type=float, default=0.05, help="seconds between the fake model's tokens")
    p.add_argument(
        "--core-level",
        default="auto",
        help="streams of the level that judges added latency (auto: the most one core carries, "
        "from the server CPU per chunk measured at the first level; 0: none)",
    )
    p.add_argument(
        "--store", choices=["sqlite", "memory"], default="sqlite", help="the server's session store"
    )
    p.add_argument("--profile", help="write a cProfile of the server process to this file")
    p.add_argument(
        "--src",
        default=str(ROOT / "src"),
        help="the foundation_ai source tree the server runs (before/after runs)",
    )
    p.add_argument(
        "--loop", default="auto", help="uvicorn --loop of the server (auto: uvloop when installed)"
    )
    p.add_argument(
        "--http", default="auto", help="uvicorn --http of the server (auto: httptools when installed)"
    )
    p.add_argument("--role", choices=["fake", "serve", "floor", "clients"], help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--clients", type=int, help=argparse.SUPPRESS)
    p.add_argument("--stagger", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--repeat", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--model-url", help=argparse.SUPPRESS)
    p.add_argument("--data-dir", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role:
        _raise_fd_limit()
        if args.role == "fake":
            asyncio.run(fake_main(args.port, args.tokens, args.delay))
        elif args.role == "serve":
            serve_main(args)
        elif args.role == "floor":
            floor_main(args)
        else:
            res = asyncio.run(
                clients_main(args.port, args.model, args.clients, args.tokens, args.stagger, args.repeat)
            )
            Path(args.out).write_text(json.dumps(res))
        return 0

    _raise_fd_limit()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    ports = {"direct": free_port(), "served": free_port(), "floor": free_port()}
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    common = ["--tokens", str(args.tokens), "--delay", str(args.delay), "--store", args.store]
    procs: list[subprocess.Popen[bytes]] = []
    results = []
    core: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory() as tmpname:
        tmp = Path(tmpname)
        try:
            fake = subprocess.Popen(
                [sys.executable, __file__, "--role", "fake", "--port", str(ports["direct"]), *common], env=env
            )
            procs.append(fake)
            model_url = ["--model-url", f"http://127.0.0.1:{ports['direct']}/v1"]
            uv = ["--loop", args.loop, "--http", args.http]
            serve_cmd = [sys.executable, __file__, "--role", "serve", "--port", str(ports["served"]), *common]
            serve_cmd += [*model_url, "--data-dir", str(tmp), *uv]
            if args.profile:
                serve_cmd += ["--profile", str(Path(args.profile).resolve())]
            serve_env = {**env, "PYTHONPATH": args.src + os.pathsep + os.environ.get("PYTHONPATH", "")}
            serve = subprocess.Popen(serve_cmd, env=serve_env)
            procs.append(serve)
            floor_cmd = [sys.executable, __file__, "--role", "floor", "--port", str(ports["floor"])]
            floor = subprocess.Popen([*floor_cmd, *common, *model_url, *uv], env=env)
            procs.append(floor)
            for port in ports.values():
                wait_port(port)
            pids = {"serve": serve.pid, "fake": fake.pid, "floor": floor.pid}
            print(
                f"serve bench: levels {levels}, {args.rounds} rounds each of direct, served and raw relay"
                f" floor; {args.tokens} tokens x {args.delay * 1000:.0f} ms, {args.store} store;"
                f" server: {args.src}, loop {args.loop}, http {args.http}; "
                f"{os.cpu_count()} cores, loadavg {os.getloadavg()[0]:.2f}"
            )
            for kind in ("served", "floor"):  # imports, first connections
                model = "bench" if kind == "served" else "fake"
                Round(env, ports[kind], model, 20, args.tokens, pids).run(
                    tmp / f"warm-{kind}.json", serve.pid
                )
            for n in levels:
                res = level(n, args.rounds, args.tokens, env, ports, pids, tmp)
                res["load"] = os.getloadavg()[0]
                results.append(res)
                report(res, args)
            if args.core_level != "0" and results:
                n_core = (
                    core_streams(results[0]["server_us_per_chunk"], args.delay)
                    if args.core_level == "auto"
                    else int(args.core_level)
                )
                # sustained load: the streams' starts spread over one stream's length, each
                # slot running CORE_REPEAT streams back to back, so ~n_core are open at once
                # (not n_core turns starting at the same instant and their chunks in one burst)
                sustained = (args.tokens * args.delay, CORE_REPEAT)
                print(
                    f"one core carries ~{n_core} streams ({results[0]['server_us_per_chunk']:.0f} us of"
                    f" server CPU per chunk at {results[0]['n']} streams, a chunk per stream every"
                    f" {args.delay * 1000:.0f} ms): added latency is judged at {n_core} streams,"
                    f" sustained"
                )
                core = level(n_core, args.rounds, args.tokens, env, ports, pids, tmp, sustained)
                core["load"] = os.getloadavg()[0]
                report(core, args)
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
    print(f"goals (stated before measuring); loadavg at the end {os.getloadavg()[0]:.2f}")
    goals: list[tuple[str, bool]] = []
    for res in results:
        n = res["n"]
        total = res["streams"]
        c = res["complete"]["served"]
        goals.append(
            (f"{n} streams: all {total} served streams complete ({res['rounds']} rounds)", c == total)
        )
        ours, fl = res["server_us_per_chunk"], res["floor_us_per_chunk"]
        ratio = ours / fl if fl > 0 else float("inf")
        goals.append(
            (
                f"{n} streams: server CPU per relayed chunk {ours:.0f} us <= {GOAL_CPU_RATIO:g}x the raw"
                f" relay floor's {fl:.0f} us (got {ratio:.2f}x)",
                ratio <= GOAL_CPU_RATIO,
            )
        )
        kib = res["per_stream_kib"]
        goals.append(
            (
                f"{n} streams: <= {GOAL_KIB_PER_STREAM:g} KiB per open stream (got {kib:.1f})",
                kib <= GOAL_KIB_PER_STREAM,
            )
        )
    judged: list[tuple[str, bool | None]] = list(goals)
    if core is not None:
        a50 = pct(core["added"], 0.5) * 1000
        waited = core["cpu_served"].get("serve_runq", 0.0)
        label = (
            f"{core['n']} streams (one core's worth, sustained): added latency p50 <= {GOAL_CORE_P50_MS:g} ms"
            f" per chunk over the direct round (got {a50:.1f}; server threads waiting for a CPU"
            f" {waited * 100:.0f} % of the time)"
        )
        # the goal assumes the server has its core: a server whose threads wait for a CPU
        # (other processes run) shows their time, not its own; then the figure is not judged
        judged.append((label, a50 <= GOAL_CORE_P50_MS if waited <= MAX_RUNQ_SHARE else None))
    for label, good in judged:
        verdict = "met" if good else "NOT met" if good is not None else "not judged (server starved of CPU)"
        print(f"  {verdict}: {label}")
    everything = [*results, *([core] if core is not None else [])]
    return 0 if all(r["complete"]["served"] == r["streams"] for r in everything) else 1


def report(res: dict[str, Any], args: argparse.Namespace) -> None:
    n, rounds = res["n"], res["rounds"]
    total = res["streams"]
    a, f = res["added"], res["first"]
    cpu = res["cpu_served"]
    rate = total / rounds * args.tokens / max(1e-9, sum(res["walls"]["served"]) / rounds)
    stagger, repeat = res["sustained"]
    how = (
        f"sustained: starts spread over {stagger:.2f} s, {repeat} streams back to back per slot, "
        if repeat > 1 or stagger > 0
        else ""
    )
    print(f"{n} concurrent streams ({how}{rounds} rounds of each kind), loadavg {res['load']:.2f}:")
    c, fl = res["complete"], res["failed"]
    print(
        f"  complete: direct {c['direct']}/{total}, served {c['served']}/{total}, floor {c['floor']}/{total}"
        f" (failed: direct {fl['direct']}, served {fl['served']}, floor {fl['floor']})"
    )
    w = res["walls"]
    print(
        f"  round wall time: direct {', '.join(f'{x:.2f}' for x in w['direct'])} s;"
        f" served {', '.join(f'{x:.2f}' for x in w['served'])} s (~{rate:.0f} chunks/s served);"
        f" floor {', '.join(f'{x:.2f}' for x in w['floor'])} s"
    )
    print(
        f"  added latency per chunk ({len(a)} chunks): p50 {pct(a, 0.5) * 1000:.1f} ms,"
        f" p99 {pct(a, 0.99) * 1000:.1f} ms; first chunk: p50 {pct(f, 0.5) * 1000:.1f} ms,"
        f" p99 {pct(f, 0.99) * 1000:.1f} ms"
    )
    rl = res["relay"]
    print(
        f"  relay per chunk (transit from the fake model's write to the client, served minus direct):"
        f" p50 {pct(rl, 0.5) * 1000:.1f} ms, p99 {pct(rl, 0.99) * 1000:.1f} ms"
    )
    print(
        f"  CPU during served rounds (share of one core): server {cpu.get('serve', 0) * 100:.0f} %,"
        f" fake model {cpu.get('fake', 0) * 100:.0f} %, load generator {cpu.get('clients', 0) * 100:.0f} %;"
        f" server threads runnable but waiting for a CPU {cpu.get('serve_runq', 0) * 100:.0f} % of the time"
    )
    us, floor_us = res["server_us_per_chunk"], res["floor_us_per_chunk"]
    ratio = us / floor_us if floor_us > 0 else float("inf")
    print(
        f"  server CPU per relayed chunk (process CPU time / chunks, turn start included): {us:.0f} us;"
        f" raw relay floor {floor_us:.0f} us; ratio {ratio:.2f}x"
        f" -> one core carries ~{1e6 / us:.0f} chunks/s, ~{1e6 / us * args.delay:.0f} streams at this token rate"
    )
    print(
        f"  server RSS {res['rss_before'] / 1024:.1f} MiB before, peak {res['peak'] / 1024:.1f} MiB"
        f" -> {res['per_stream_kib']:.1f} KiB per open stream"
    )


if __name__ == "__main__":
    sys.exit(main())
