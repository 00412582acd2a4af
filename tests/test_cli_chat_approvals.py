"""``foundation-ai chat`` through a pseudo-terminal (pexpect) against the loopback fixture
server: answering the shell tool's question with a reason (``n REASON``: the reason goes to
the model in the tool result) or with ``a`` (allowed for the rest of the session: no more
questions for that tool)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._cli_helpers import CLI, cli_env, text_stream, tool_call_stream
from tests._fixture_server import FixtureServer

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
        m["content"] for r in server.requests for m in (r.json() or {}).get("messages", []) if m["role"] == "tool"
    ]


def test_a_denial_with_a_reason_sends_the_reason_to_the_model(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with FixtureServer() as server:
        server.queue(tool_call_stream("run_command", {"command": "touch made.txt"}), text_stream("understood"))
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
