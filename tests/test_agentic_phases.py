"""The turn loop as named phases (docs/turn-loop.md): the loop never imports the session, each
phase is small, and a phase can be called on its own with a session and a ``TurnState``."""

from __future__ import annotations

import ast
import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

import foundation_ai.agentic as agentic
from foundation_ai import AgentSession
from foundation_ai.agentic import InMemorySessionStore, ScriptedModel, TurnOutcome, say
from foundation_ai.agentic.turn import Phase, TurnState
from foundation_ai.agentic.turn.begin import open_turn, persist_prompt
from foundation_ai.agentic.turn.drain import admit, drain_steering
from foundation_ai.agentic.turn.finish import finish, release
from foundation_ai.agentic.turn.persist import persist_records
from foundation_ai.types import AgentProgress, Messages, SessionRecord, Stream

AGENTIC = Path(agentic.__file__).parent
LOOP_MODULES = [AGENTIC / "loop.py", *sorted((AGENTIC / "turn").glob("*.py"))]


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, resolved to a dotted name under ``foundation_ai``."""
    package = "foundation_ai.agentic" + ("" if path.parent == AGENTIC else ".turn")
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1] if node.level else []
            mod = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names.add(mod)
            names.update(f"{mod}.{a.name}" for a in node.names)
    return names


def test_the_loop_never_imports_the_session() -> None:
    assert len(LOOP_MODULES) >= 10
    for path in LOOP_MODULES:
        bad = {n for n in imported_modules(path) if n.startswith("foundation_ai.agentic.session")}
        assert not bad, f"{path.name} imports {bad}"


def test_the_import_check_sees_relative_imports() -> None:
    session = AGENTIC / "session.py"
    assert "foundation_ai.agentic.turn" in imported_modules(session)
    assert "foundation_ai.agentic.turn.run_turn" in imported_modules(session)


def test_each_loop_module_imports_first_in_a_fresh_interpreter() -> None:
    names = [f"foundation_ai.agentic.{'' if p.parent == AGENTIC else 'turn.'}{p.stem}" for p in LOOP_MODULES]
    code = (
        "import importlib, sys\n"
        "for name in sys.argv[1:]:\n"
        "    for m in [m for m in sys.modules if m.startswith('foundation_ai')]:\n"
        "        del sys.modules[m]\n"
        "    importlib.import_module(name)\n"
        "from foundation_ai.agentic.session import run_turn\n"
        "from foundation_ai.agentic.turn.machine import run_turn as same\n"
        "assert run_turn is same\n"
        "print('ok', len(sys.argv) - 1)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ok {len(names)}"


def test_every_phase_function_is_under_80_lines() -> None:
    for path in LOOP_MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name != "run_turn":
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                assert length <= 80, f"{path.name}:{node.name} has {length} lines"


def test_every_phase_is_named_in_the_docs() -> None:
    page = (AGENTIC.parents[2] / "docs" / "turn-loop.md").read_text()
    for phase in Phase:
        assert f"`{phase.value}`" in page, phase


# -- phases called one by one ----------------------------------------------------------------


def session(**kw: object) -> AgentSession:
    b = AgentSession.builder(ScriptedModel([say("hi")])).with_store(InMemorySessionStore())
    if "inner" in kw:
        b = b.with_max_iterations(inner=int(kw["inner"]))  # type: ignore[call-overload]
    return b.build()


def test_open_and_prompt_persist_the_prompt_and_queued_follow_ups() -> None:
    agent = session()
    agent.follow_up("and then?")
    state = TurnState(["hello"], None, emit=True)

    async def go() -> tuple[Phase, Phase]:
        try:
            return open_turn(agent, state), persist_prompt(agent, state)
        finally:
            release(agent)

    assert asyncio.run(go()) == (Phase.PROMPT, Phase.DRAIN_STEERING)
    assert [m.text() for m in agent.messages] == ["hello", "and then?"]
    assert state.keep_from == 0 and state.head_end == 2 and state.persisted == 2
    kinds = [type(i).__name__ for i in state.out]
    assert kinds == ["Stream.Init", "Stream.Pending", "Stream.Next", "Stream.Next"]
    agent.flush()  # phases queue what they persist; the driver writes it after each phase
    stored = agent.store.load(agent.session_id)
    assert [r.message.text() for r in stored if isinstance(r, SessionRecord.Conversation)] == [
        "hello",
        "and then?",
    ]


def test_drain_steering_persists_steers_and_ends_an_aborted_turn() -> None:
    agent = session()
    state = TurnState(["x"], None)
    agent.steering.steer("look left")
    assert drain_steering(agent, state) is Phase.ADMIT
    assert [m.text() for m in agent.messages] == ["look left"]
    assert state.out[0] == Stream.Pending(AgentProgress.Steering(source="steer"))
    agent.steering.bind(asyncio.new_event_loop())  # abort() only counts while a turn is bound
    try:
        agent.steering.abort()
        assert drain_steering(agent, state) is Phase.FINISH
        assert state.outcome is TurnOutcome.Aborted
    finally:
        loop = agent.steering._loop
        release(agent)
        assert loop is not None
        loop.close()


def test_admit_counts_model_calls_and_stops_at_the_limit() -> None:
    agent = session(inner=2)
    state = TurnState(["x"], None)
    assert admit(agent, state) is Phase.ASSEMBLE_CONTEXT
    assert admit(agent, state) is Phase.ASSEMBLE_CONTEXT
    assert (state.inner, state.generations, state.model_index) == (2, 2, 0)
    assert admit(agent, state) is Phase.FINISH
    assert state.outcome is TurnOutcome.IterationLimit
    failed = state.records[-1]
    assert isinstance(failed, SessionRecord.FailedAction) and failed.error.kind == "iteration_limit"


def test_finish_puts_the_failed_action_after_the_summary() -> None:
    agent = session(inner=1)
    state = TurnState(["x"], None)
    admit(agent, state)
    admit(agent, state)  # fails: iteration limit
    finish(agent, state)
    assert [type(r).__name__ for r in state.records] == [
        "SessionRecord.Summary",
        "SessionRecord.FailedAction",
    ]
    assert [type(i.value).__name__ for i in state.out] == [
        "SessionRecord.Summary",
        "SessionRecord.FailedAction",
    ]
    agent.flush()  # phases queue what they persist; the driver writes it after each phase
    assert isinstance(
        agent.store.load(agent.session_id)[-1], SessionRecord.Summary
    )  # FailedAction: never stored


def test_persist_records_stores_memory_records_but_not_conversation() -> None:
    agent = session()
    state = TurnState(["x"], None)
    note = SessionRecord.WorkingMemory(version=1)
    persist_records(agent, state, [note])
    agent.flush()  # phases queue what they persist; the driver writes it after each phase
    assert state.records == [note] and agent.store.load(agent.session_id) == [note]
    with pytest.raises(ValueError, match="Conversation"):
        persist_records(agent, state, [SessionRecord.Conversation(message=Messages.user("hi"))])
    assert agent.store.load(agent.session_id) == [note] and agent.messages == []
