"""``foundation-ai chat`` through a pseudo-terminal (pexpect) against the loopback fixture
server: answering the shell tool's question with a reason (``n REASON``: the reason goes to
the model in the tool result) or with ``a`` (allowed for the rest of the session: no more
questions for that tool); a ``/steer`` shown by ``/history`` as the user's words."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests._cli_helpers import CLI, _chunk, cli_env, text_stream, tool_call_stream
from tests._fixture_server import Canned, FixtureServer, sse

pexpect = pytest.importorskip("pexpect")

PROMPT = "you> "
QUESTION = r"run this command \(\d+ lines?, [\d,]+ characters\)\? \[y/N\] "


def _spawn(home: Path, server: FixtureServer, work: Path) -> pexpect.spawn:
    argv = [*CLI[1:], "chat", "-m", "openai:m", "--base-url", server.base_url, "--db", str(home / "c.db")]
    argv += ["--tools", "shell", "--root", str(work)]
    env = cli_env(home, TERM="xterm")
    return pexpect.spawn(CLI[0], argv, encoding="utf-8", timeout=120, env=env, dimensions=(50, 200))


def _quit(child: pexpect.spawn) -> None:
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def _tool_results(server: FixtureServer) -> list[str]:
    return [
        m["content"]
        for r in server.requests
        for m in (r.json() or {}).get("messages", [])
        if m["role"] == "tool"
    ]


def test_a_denial_with_a_reason_sends_the_reason_to_the_model(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with FixtureServer() as server:
        server.queue(
            tool_call_stream("run_command", {"command": "touch made.txt"}), text_stream("understood")
        )
        child = _spawn(tmp_path, server, work)
        child.expect_exact(PROMPT)
        child.sendline("make a file")
        child.expect_exact("n REASON: decline, telling the model why")
        child.expect(QUESTION)
        child.sendline("n: use python instead")
        child.expect_exact("understood")
        child.expect_exact(PROMPT)
        _quit(child)
        results = _tool_results(server)
    assert not (work / "made.txt").exists()
    assert len(results) == 1 and "the user declined to run this command: use python instead" in results[0]


def test_allow_for_this_session_asks_no_more_questions_for_the_tool(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with FixtureServer() as server:
        server.queue(
            tool_call_stream("run_command", {"command": "touch one.txt"}),
            text_stream("first done"),
            tool_call_stream("run_command", {"command": "touch two.txt"}, call_id="call_2"),
            text_stream("second done"),
        )
        child = _spawn(tmp_path, server, work)
        child.expect_exact(PROMPT)
        child.sendline("first")
        child.expect(QUESTION)
        child.sendline("a")
        child.expect_exact("first done")
        child.expect_exact(PROMPT)
        child.sendline("second")
        child.expect_exact("second done")
        second_turn = child.before  # everything the second turn showed before its answer
        child.expect_exact(PROMPT)
        _quit(child)
    assert (work / "one.txt").exists() and (work / "two.txt").exists()
    assert "the model wants to run a shell command" not in second_turn  # not asked again
    assert json.dumps("touch two.txt")[1:-1] in json.dumps(server.requests[-1].json())


def _slow_story(words: int, delay: float) -> Canned:
    first = [_chunk({"role": "assistant", "content": "Once"})]
    rest = [_chunk({"content": f" word{i}"}) for i in range(words)]
    return Canned(chunks=sse([*first, *rest, _chunk({}, "stop"), "[DONE]"]), delay=delay)


def test_history_shows_a_steer_as_the_users_words(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with FixtureServer() as server:
        server.queue(_slow_story(600, 0.05), text_stream("steered answer"))
        child = _spawn(tmp_path, server, work)
        child.expect_exact(PROMPT)
        child.sendline("tell a story")
        child.expect_exact("Once")
        child.sendline("/steer stop and say OK")
        child.expect_exact("steered answer")
        child.expect_exact(PROMPT)
        child.sendline("/history")
        child.expect_exact("/history")
        child.expect_exact("steered answer")  # the last line of the transcript /history prints
        history = child.before
        child.expect_exact(PROMPT)
        _quit(child)
    assert re.search(r"you> (?:\x1b\[[0-9;]*m)*stop and say OK", history), history
    assert "agent> " not in history
    last = server.requests[-1].json()["messages"]
    assert {"role": "user", "content": "stop and say OK"} in last  # sent as the user's words


def test_text_typed_during_a_turn_is_not_echoed_into_the_streamed_answer(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with FixtureServer() as server:
        server.queue(_slow_story(60, 0.05), text_stream("follow-up answer"))
        child = _spawn(tmp_path, server, work)
        child.expect_exact(PROMPT)
        child.sendline("tell a story")
        child.expect_exact("Once")
        child.sendline("hello there")
        child.expect_exact("queued as a follow-up: hello there")
        streamed = child.before  # the answer streamed while the line was typed
        child.expect_exact("follow-up answer")
        child.expect_exact(PROMPT)
        child.sendline("echo is back")  # between turns the terminal echoes again
        child.expect_exact("echo is back")
        _quit(child)
    assert "hello there" not in streamed, streamed
