"""``foundation-ai chat`` driven through a pseudo-terminal (pexpect) on the bundled SmolLM2:
a streamed turn with its usage line, ``/exit`` and resuming with ``--session``; Ctrl-C during a
turn interrupts it and the session goes on; ``/steer`` during a turn; Ctrl-D quits (during a
turn: once the turn is done)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")

CLI = [sys.executable, "-m", "foundation_ai"]
PROMPT = "you> "
USAGE = re.compile(r"tokens: ([\d,]+) in · ([\d,]+) out · cost \$0 \(local\)")
ANSI_GAP = r"(?:\x1b\[[0-9;]*m)*"
"""Colour codes rich may put between a label and the text."""
RESUME = re.compile(r"resume with: foundation-ai chat --session ([0-9a-z]{25})")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env.update({"NO_PROXY": "127.0.0.1,localhost", "TERM": "xterm", "PYTHONUNBUFFERED": "1"})
    return env


def spawn(db: Path, *args: str, max_tokens: int = 16) -> pexpect.spawn:
    argv = [
        *CLI[1:],
        "chat",
        "--db",
        str(db),
        "--max-tokens",
        str(max_tokens),
        "--seed",
        "7",
        "--temperature",
        "0",
        *args,
    ]
    child = pexpect.spawn(CLI[0], argv, encoding="utf-8", timeout=180, env=_env(), dimensions=(50, 160))
    return child


def finish(child: pexpect.spawn) -> str:
    """Send /exit, wait for the end; return the session id printed at exit."""
    child.sendline("/exit")
    child.expect(RESUME)
    session_id = child.match.group(1)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    return str(session_id)


def show(db: Path, session_id: str) -> str:
    r = subprocess.run(
        [*CLI, "show", session_id, "--db", str(db)], capture_output=True, text=True, timeout=120, env=_env()
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_chat_streams_shows_usage_and_resumes(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    child = spawn(db)
    child.expect(r"session ([0-9a-z]{25}) \(new\)")
    started_id = child.match.group(1)
    child.expect_exact(PROMPT)
    child.sendline("What is the capital of France?")
    child.expect_exact("What is the capital of France?")  # the terminal's echo
    child.expect(USAGE)
    answer = child.before.strip()
    assert answer, "no streamed answer before the usage line"
    assert int(child.match.group(2)) > 0
    child.expect_exact(PROMPT)
    session_id = finish(child)
    assert session_id == started_id

    # resume: the history is shown, and the conversation goes on in the same session
    child = spawn(db, "--session", session_id)
    child.expect(rf"session {session_id} \(resumed\)")
    child.expect(ANSI_GAP.join(["you> ", r"What is the capital of France\?"]))
    child.expect_exact("assistant> ")
    child.expect_exact(PROMPT)
    child.sendline("And of Italy?")
    child.expect(USAGE)
    child.expect_exact(PROMPT)
    assert finish(child) == session_id

    transcript = show(db, session_id)
    assert transcript.index("you> What is the capital of France?") < transcript.index("you> And of Italy?")
    assert transcript.count("assistant> ") == 2


def test_ctrl_c_interrupts_the_turn_and_keeps_the_session(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    child = spawn(db, max_tokens=400)
    child.expect_exact(PROMPT)
    child.sendline("Write a very long story about a dragon.")  # 300+ tokens at temperature 0
    child.expect_exact("about a dragon.")  # echo
    child.expect(r"\w+\W+\w+\W+\w+")  # some streamed words: the turn is running
    child.sendintr()
    child.expect_exact("interrupting")
    child.expect_exact("(turn interrupted; the session is kept)")
    child.expect(USAGE)
    # the turn stopped early: far fewer tokens than the 400 allowed
    assert int(child.match.group(2).replace(",", "")) < 400
    child.expect_exact(PROMPT)
    # the session is alive: another turn runs to completion
    child.sendline("Say hello.")
    child.expect(USAGE)
    child.expect_exact(PROMPT)
    session_id = finish(child)
    transcript = show(db, session_id)
    assert "you> Write a very long story about a dragon." in transcript
    assert "you> Say hello." in transcript


def test_steer_during_a_turn(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    # room for a long story: the steer must reach the chat while the answer is still generated,
    # also when this test process reads the terminal late on a loaded machine (with 300 tokens
    # the whole answer was once done before the steer arrived; a steer taken then waits for the
    # next turn). A steered turn stops early, so the room costs no time.
    child = spawn(db, max_tokens=800)
    child.expect_exact(PROMPT)
    child.sendline("Write a very long story about a dragon.")
    child.expect_exact("about a dragon.")
    child.expect(r"\w+\W+\w+\W+\w+")
    child.sendline("/steer Stop the story. Say only: OK.")
    child.expect_exact("steering: Stop the story. Say only: OK.")
    child.expect_exact("retracted")
    child.expect(USAGE)
    child.expect_exact(PROMPT)
    session_id = finish(child)
    transcript = show(db, session_id)
    # the steering message is part of the persisted conversation
    assert "Stop the story. Say only: OK." in transcript


def test_commands_between_turns_and_ctrl_d(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    child = spawn(db)
    child.expect(r"session ([0-9a-z]{25}) \(new\)")
    session_id = child.match.group(1)
    child.expect_exact(PROMPT)
    child.sendline("/help")
    child.expect_exact("/steer TEXT")
    child.expect_exact(PROMPT)
    child.sendline("/session")
    child.expect_exact(session_id)
    child.expect_exact(PROMPT)
    child.sendline("/steer nothing to steer")
    child.expect_exact("no turn is running")
    child.expect_exact(PROMPT)
    child.sendline("/nonsense")
    child.expect_exact("unknown command /nonsense")
    child.expect_exact(PROMPT)
    child.sendintr()  # Ctrl-C with no turn running does not quit
    child.expect_exact("no turn is running")
    child.expect_exact(PROMPT)
    child.sendeof()  # Ctrl-D quits; no turn ran, so no session was stored to resume
    child.expect_exact("no turn was run: nothing was saved")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_ctrl_d_during_a_turn_quits_after_the_turn(tmp_path: Path) -> None:
    """Tester defect 7: Ctrl-D during a turn was swallowed. It now lets the turn finish (its
    answer and usage line are shown, it is not interrupted), then the chat ends (exit 0)."""
    db = tmp_path / "chat.sqlite3"
    child = spawn(db, max_tokens=120)
    child.expect_exact(PROMPT)
    child.sendline("Write a very long story about a dragon.")
    child.expect_exact("about a dragon.")  # echo
    child.expect(r"\w+\W+\w+\W+\w+")  # the turn is streaming
    child.sendeof()
    child.expect_exact("Ctrl-D: the chat ends when this turn is done")
    child.expect(USAGE)
    assert "turn interrupted" not in child.before
    child.expect(RESUME)
    session_id = child.match.group(1)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "you> Write a very long story about a dragon." in show(db, session_id)


def test_shell_tool_asks_in_chat(tmp_path: Path) -> None:
    """The shell tool's y/N question appears in the chat and the typed answer decides."""
    db = tmp_path / "chat.sqlite3"
    work = tmp_path / "work"
    work.mkdir()
    child = spawn(
        db, "--tools", "shell", "--root", str(work), "--tool-choice", "run_command,none", max_tokens=48
    )
    child.expect_exact(PROMPT)
    child.sendline("Run the command: touch made.txt")
    child.expect(ANSI_GAP.join(["tool call", " run_command"]))
    child.expect(r"the model wants to run a shell command \(\d+ lines?, [\d,]+ characters\):")
    child.expect(r"run this command \(\d+ lines?, [\d,]+ characters\)\? \[y/N\] ")
    command = child.before  # the command's numbered lines
    child.sendline("y")
    child.expect(ANSI_GAP.join(["tool result", " run_command"]))
    child.expect_exact("exit code 0")
    child.expect(USAGE)
    child.expect_exact(PROMPT)
    finish(child)
    assert "touch" in command
    assert (work / "made.txt").exists()


def _closed_port() -> int:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def test_chat_with_unreachable_server_fails_at_once(tmp_path: Path) -> None:
    port = _closed_port()
    r = subprocess.run(
        [*CLI, "chat", "--model", "openai:x", "--base-url", f"http://127.0.0.1:{port}/v1", "--db", str(tmp_path / "s")],
        input="", capture_output=True, text=True, timeout=60, env=_env(),
    )  # fmt: skip
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert lines == [f"foundation-ai: error: cannot reach http://127.0.0.1:{port}/v1: Connection refused"]


def test_chat_with_missing_key_fails_at_once(tmp_path: Path) -> None:
    r = subprocess.run(
        [*CLI, "chat", "--model", "anthropic:claude-sonnet-4-5", "--db", str(tmp_path / "s")],
        input="", capture_output=True, text=True, timeout=60, env=_env(),
    )  # fmt: skip
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert "ANTHROPIC_API_KEY is not set" in r.stderr
