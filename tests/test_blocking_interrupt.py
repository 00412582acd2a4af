"""Ctrl-C (SIGINT) during a blocking call — ``run_turn``, ``ask``, iterating
``run_turn_stream().events()`` — ends the turn as a cancelled turn ends (its output so far kept
as aborted, an open tool call answered, the ``Summary`` stored), raises ``KeyboardInterrupt`` to
the caller, and leaves the session usable. Each case runs in a fresh Python process that sends
itself a real SIGINT (a test process must not take one)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

PRELUDE = """
import asyncio, json, os, signal, threading
from foundation_ai.agentic import AgentSession, InMemorySessionStore, ScriptedModel, call, say, tool
from foundation_ai.types import SessionRecord

started = threading.Event()

@tool
async def slow(n: int) -> str:
    '''Wait a long time.

    Args:
        n: anything.
    '''
    started.set()
    await asyncio.sleep(60)
    return "finished"

def interrupt_when_started():
    def run():
        started.wait(30)
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=run, daemon=True).start()

def history(store, sid):
    out = []
    for r in store.load(sid):
        if isinstance(r, SessionRecord.Conversation):
            m = r.message
            out.append([type(m).__name__.split(".")[-1], m.text() or "", type(getattr(m, "stop_reason", None)).__name__.split(".")[-1], getattr(m, "error_detail", None)])
        else:
            out.append([type(r).__name__.split(".")[-1]])
    return out
"""


def run_case(body: str) -> dict[str, Any]:
    code = PRELUDE + textwrap.dedent(body)
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    out["stderr"] = r.stderr
    return out


def test_ctrl_c_in_run_turn_ends_the_turn_raises_keyboard_interrupt_and_keeps_the_session_usable() -> None:
    out = run_case(
        """
        model = ScriptedModel([[say("Let me wait."), call("slow", {"n": 1})], say("second answer")])
        store = InMemorySessionStore()
        s = AgentSession.builder(model).with_tools(slow).with_store(store).build()
        interrupt_when_started()
        try:
            s.run_turn("go")
            raised = "nothing"
        except KeyboardInterrupt:
            raised = "KeyboardInterrupt"
        after = history(store, s.session_id)
        second = s.run_turn("again").text()
        print(json.dumps({"raised": raised, "after": after, "second": second}))
        """
    )
    assert out["raised"] == "KeyboardInterrupt"
    kinds = [h[0] for h in out["after"]]
    assert kinds[0] == "User" and kinds[-1] == "Summary", out["after"]
    results = [h for h in out["after"] if h[0] == "ToolResult"]
    assert len(results) == 1 and "aborted" in (results[0][3] or ""), out["after"]
    assert out["second"] == "second answer", "the session takes the next turn"
    assert "Task was destroyed" not in out["stderr"] and "never awaited" not in out["stderr"]


def test_ctrl_c_while_iterating_events_raises_keyboard_interrupt_not_a_runtime_error() -> None:
    out = run_case(
        """
        model = ScriptedModel([[say("Let me wait."), call("slow", {"n": 1})], say("second answer")])
        store = InMemorySessionStore()
        s = AgentSession.builder(model).with_tools(slow).with_store(store).build()
        seen = []
        stream = s.run_turn_stream("go")
        try:
            for ev in stream.events():
                seen.append(type(ev).__name__.split(".")[-1])
                if seen[-1] == "ToolCall":
                    interrupt_when_started()
            raised = "nothing"
        except KeyboardInterrupt:
            raised = "KeyboardInterrupt"
        except BaseException as e:
            raised = type(e).__name__ + ": " + str(e)
        outcome = str(stream.turn.outcome) if stream.turn is not None else None
        after = history(store, s.session_id)
        second = s.run_turn("again").text()
        print(json.dumps({"raised": raised, "seen": seen, "outcome": outcome, "after": after, "second": second}))
        """
    )
    assert out["raised"] == "KeyboardInterrupt", out
    assert "ToolCall" in out["seen"]
    assert out["outcome"] is not None and "Aborted" in out["outcome"], out
    assert [h[0] for h in out["after"]][-1] == "Summary", out["after"]
    assert out["second"] == "second answer"
    assert "Task was destroyed" not in out["stderr"] and "never awaited" not in out["stderr"]


def test_a_program_with_its_own_sigint_handler_keeps_it_during_a_blocking_turn() -> None:
    out = run_case(
        """
        hits = []
        signal.signal(signal.SIGINT, lambda *_: hits.append(1))
        model = ScriptedModel([[call("slow", {"n": 1})], say("done")])
        s = AgentSession.builder(model).with_tools(slow).with_store(InMemorySessionStore()).build()
        interrupt_when_started()
        # the program's handler runs and the turn goes on: cut the tool short to end the test
        threading.Thread(target=lambda: (started.wait(30), __import__("time").sleep(0.5), s.abort()), daemon=True).start()
        t = s.run_turn("go")
        print(json.dumps({"hits": len(hits), "outcome": str(t.outcome)}))
        """
    )
    assert out["hits"] == 1 and "Aborted" in out["outcome"], out
