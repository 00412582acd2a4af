"""Real worker processes for the durable-turn tests and bench: ``WorkerPool`` starts
``python -m foundation_ai worker`` subprocesses against a loopback fake model server, and
``expected_history`` is what an uninterrupted turn of the fake model stores."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from foundation_ai.types import SessionRecord

ROOT = Path(__file__).resolve().parent.parent


def start_postgres(path: Path) -> Any:
    """A pgserver PostgreSQL in ``path`` (``.get_uri()``; ``.cleanup()`` when done)."""
    import pgserver

    return pgserver.get_server(str(path), cleanup_mode="stop")


class WorkerPool:
    """Worker subprocesses sharing ``db`` (+ ``session_db``); each logs to ``logs/<id>.log``."""

    def __init__(
        self,
        tmp: Path,
        db: str,
        session_db: str | None,
        env: dict[str, str],
        concurrency: int = 2,
        grace: float = 5.0,
        extra: tuple[str, ...] = (),
        agent: str = "tests._durable_app:agent",
    ) -> None:
        self.tmp, self.db, self.session_db, self.concurrency = tmp, db, session_db, concurrency
        self.grace, self.extra, self.agent = grace, extra, agent
        self.env = {**os.environ, **env, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs = tmp / "logs"
        self.logs.mkdir(exist_ok=True)
        self.started = 0

    def db_args(self) -> list[str]:
        out = ["--db", self.db]
        if self.session_db:
            out += ["--session-db", self.session_db]
        return out

    def start(self, n: int = 1, wait: bool = True) -> list[str]:
        ids = []
        for _ in range(n):
            self.started += 1
            wid = f"w{self.started}"
            log = open(self.logs / f"{wid}.log", "wb")  # noqa: SIM115 - closed with the process
            cmd = [
                sys.executable,
                "-m",
                "foundation_ai",
                "worker",
                *self.db_args(),
                "--agent",
                self.agent,
                "--executor-id",
                wid,
                "--concurrency",
                str(self.concurrency),
                "--poll",
                "0.05",
                "--grace",
                str(self.grace),
                *self.extra,
            ]
            self.procs[wid] = subprocess.Popen(cmd, stdout=log, stderr=log, env=self.env, cwd=ROOT)
            ids.append(wid)
        if wait:
            for wid in ids:
                self.wait_ready(wid)
        return ids

    def wait_ready(self, wid: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if b"worker ready" in (self.logs / f"{wid}.log").read_bytes():
                return
            if self.procs[wid].poll() is not None:
                raise RuntimeError(f"worker {wid} exited: {(self.logs / f'{wid}.log').read_text()[-3000:]}")
            time.sleep(0.05)
        raise TimeoutError(f"worker {wid} not ready: {(self.logs / f'{wid}.log').read_text()[-3000:]}")

    def kill(self, wid: str) -> None:
        p = self.procs.pop(wid)
        p.send_signal(signal.SIGKILL)
        p.wait(10)

    def terminate(self, wid: str, timeout: float = 60) -> int:
        """SIGTERM ``wid`` and return its exit status."""
        p = self.procs.pop(wid)
        p.send_signal(signal.SIGTERM)
        return p.wait(timeout)

    def pid_of(self, pid: int) -> str | None:
        for wid, p in self.procs.items():
            if p.pid == pid:
                return wid
        return None

    def stop(self) -> dict[str, int | None]:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = {}
        for wid, p in self.procs.items():
            try:
                codes[wid] = p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                codes[wid] = p.wait(10)
        self.procs.clear()
        return codes


def expected_history(prompts: list[str]) -> list[tuple[Any, ...]]:
    """The stored history of uninterrupted turns of the fake model, without ids/timestamps."""
    out: list[tuple[Any, ...]] = []
    for p in prompts:
        out += [
            ("User", p),
            ("Assistant", "call", "record_fact", (("note", p),)),
            ("ToolResult", "record_fact", f"stored {p}"),
            ("Assistant", "call", "slow_lookup", (("key", p),)),
            ("ToolResult", "slow_lookup", f"value of {p}"),
            ("Assistant", f"done: {p}"),
            ("Summary", 6),
        ]
    return out


def normalized(records: list[SessionRecord]) -> list[tuple[Any, ...]]:
    """A session's stored records without ids and timestamps (see :func:`expected_history`)."""
    out: list[tuple[Any, ...]] = []
    for r in records:
        if isinstance(r, SessionRecord.Summary):
            out.append(("Summary", r.message_count))
            continue
        if not isinstance(r, SessionRecord.Conversation):
            out.append((type(r).__name__,))
            continue
        m = r.message
        kind = type(m).__name__.rsplit(".", 1)[-1].removesuffix("Message")
        c: Any = getattr(m, "content", None)
        if hasattr(c, "arguments"):
            out.append((kind, "call", c.name, tuple(sorted(c.arguments.items()))))
        elif kind == "ToolResult":
            out.append((kind, m.name, getattr(c, "content", None)))  # type: ignore[union-attr]
        else:
            out.append((kind, getattr(c, "content", None)))
    return out
