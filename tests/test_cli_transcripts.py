"""Transcripts as the CLI prints them: ``chat`` fed from a pipe reads like a terminal session
(``you> TEXT`` once, the answer on its own line, ``/history`` without a doubled prompt), and a
turn interrupted by Ctrl-C is marked ``(turn interrupted)`` alike by ``run`` when it happens and
by ``show`` (and ``/history``) afterwards.

Piped chats go to the loopback fixture server; the interrupted turns are real: the bundled
SmolLM2 on a pseudo-terminal drawn by pyte with Ctrl-C typed mid-answer, and a scripted model
whose turn is aborted while a tool runs.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
from rich.console import Console

from foundation_ai._cli.render import INTERRUPTED, render_records
from foundation_ai.agentic import AgentSession, ScriptedModel, SqliteSessionStore, call, say
from tests._cli_helpers import CLI, Terminal, cli_env, text_stream
from tests._fixture_server import FixtureServer

pexpect = pytest.importorskip("pexpect")


def chat_through_a_pipe(home: Path, stdin: str, *answers: str) -> str:
    with FixtureServer() as srv:
        srv.queue(*(text_stream(a) for a in answers))
        r = subprocess.run(
            [*CLI, "chat", "-m", "openai:m", "--base-url", srv.base_url, "--db", str(home / "s.db")],
            input=stdin, capture_output=True, text=True, timeout=120, env=cli_env(home),
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_piped_chat_history_shows_each_prompt_once(tmp_path: Path) -> None:
    out = chat_through_a_pipe(tmp_path, "My name is Ada.\n/history\n", "Hello Ada.")
    assert "you> you>" not in out
    lines = out.splitlines()
    assert lines.count("you> My name is Ada.") == 2  # as typed, then in the history
    typed = lines.index("you> My name is Ada.")
    assert lines[typed + 1] == "Hello Ada."  # the answer on its own line, not after the prompt
    history = lines.index("you> /history")
    assert lines[history + 1 : history + 3] == ["you> My name is Ada.", "assistant> Hello Ada."]


def test_piped_chat_reads_like_a_terminal_session(tmp_path: Path) -> None:
    out = chat_through_a_pipe(tmp_path, "First.\nSecond.\n", "One.", "Two.")
    prompts = [ln.rstrip() for ln in out.splitlines() if ln.startswith("you>")]
    assert prompts == ["you> First.", "you> Second.", "you>"]  # the last: end of input
    assert "you> One." not in out and "you> Two." not in out


# ---------------------------------------------------------------------------------------------
# interrupted turns


def transcript(records: list) -> str:
    console = Console(record=True, width=120, force_terminal=False, color_system=None)
    render_records(console, records)
    return console.export_text()


def test_a_turn_aborted_during_a_tool_is_marked_in_the_transcript(tmp_path: Path) -> None:
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        """Take a while."""
        started.set()
        release.wait(10)
        return "slow result"

    store = SqliteSessionStore(tmp_path / "s.db")
    model = ScriptedModel([call("slow", {}), say("Fine.")])
    session = AgentSession.builder(model).with_tools(slow).with_store(store).build()

    def abort_when_the_tool_runs() -> None:
        started.wait(10)
        session.abort()
        release.set()

    threading.Thread(target=abort_when_the_tool_runs, daemon=True).start()
    session.run_turn("first")
    session.run_turn("second")
    text = transcript(store.load(str(session.session_id)))
    session.close()
    store.close()
    first, second = text.split("you> second")
    assert first.count(INTERRUPTED) == 1 and first.index(INTERRUPTED) < first.index("tokens:")
    assert INTERRUPTED not in second and "assistant> Fine." in second


def test_ctrl_c_in_run_is_marked_there_and_in_show(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    term = Terminal(rows=200, cols=200)
    child = pexpect.spawn(
        CLI[0], [*CLI[1:], "run", "--plain", "--max-tokens", "400", "--seed", "7", "--temperature", "0",
                 "--db", str(db), "Write a very long story about a dragon."],
        env=cli_env(tmp_path), timeout=180, dimensions=(200, 200),
    )  # fmt: skip
    child.logfile_read = term.log
    child.expect(r"\w+\W+\w+\W+\w+\W+\w+")  # the answer is streaming
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    screen = term.text()
    assert INTERRUPTED in screen
    assert screen.index(INTERRUPTED) < screen.index("tokens:")
    listing = subprocess.run(
        [*CLI, "sessions", "--db", str(db)], capture_output=True, text=True, env=cli_env(tmp_path)
    )
    session_id = listing.stdout.splitlines()[1].split()[0]
    shown = subprocess.run(
        [*CLI, "show", session_id, "--db", str(db)], capture_output=True, text=True, env=cli_env(tmp_path)
    )
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[-2:-1] == [INTERRUPTED] and lines[-1].startswith("tokens:")
    assert lines[1] == "you> Write a very long story about a dragon."


def test_a_completed_turn_is_not_marked(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    session = AgentSession.builder(ScriptedModel([say("Done.")])).with_store(store).build()
    session.run_turn("go")
    text = transcript(store.load(str(session.session_id)))
    session.close()
    store.close()
    assert "assistant> Done." in text and INTERRUPTED not in text
