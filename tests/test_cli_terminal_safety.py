"""Nothing the model, a tool or a server writes controls the user's terminal.

The real ``foundation-ai`` runs in a pseudo-terminal (pexpect) against a loopback server that
plays a hostile model (canned OpenAI Chat Completions streams); everything it writes is drawn
by a real terminal emulator (pyte), and the tests read the emulated screen:

- the shell tool's y/N question shows the whole command, whatever it contains (cursor-up and
  erase-line sequences, 40 newlines, padding far past the old 600-character panel), with its
  line count and length on the question line; answering "y" runs exactly what was shown;
- answers, tool panels, server error lines, ``show``, ``sessions`` and ``chat`` show OSC 52
  (clipboard), screen-clear, window-title and hyperlink sequences as visible text: the title
  never changes and nothing shown before is erased;
- ``--json`` stays byte-exact (the control characters arrive unchanged, JSON-escaped).

Plus unit and property tests of :func:`foundation_ai._cli.safe_text.visible` and a seeded,
bounded fuzz test of the renderer through pyte.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pyte
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from foundation_ai._cli.approval import shell_question
from foundation_ai._cli.render import TurnRenderer, render_records
from foundation_ai._cli.safe_text import count_controls, visible, visible_line
from foundation_ai._cli.status import error_line
from foundation_ai.types import Messages, ToolCall, ToolResultMessage
from tests._cli_helpers import CLI, Terminal, cli_env, text_stream, tool_call_stream
from tests._fixture_server import Canned, FixtureServer
from tests._fuzz import fuzz_settings

pexpect = pytest.importorskip("pexpect")

ESC = "\x1b"
HOSTILE = {
    "osc52": f"{ESC}]52;c;cm0gLXJmIH4=\a",
    "clear": f"{ESC}[2J{ESC}[H",
    "title": f"{ESC}]0;owned-title\a{ESC}]2;owned-title{ESC}\\",
    "link": f"{ESC}]8;;http://evil.example/{ESC}\\click{ESC}]8;;{ESC}\\",
}
"""Sequences a model or server might send, by kind."""

ALL_HOSTILE = "".join(HOSTILE.values())
ANSWER = f"first line\nSAFE-ANSWER {ALL_HOSTILE} END"


def spawn(args: list[str], home: Path, term: Terminal, **env: str) -> pexpect.spawn:
    child = pexpect.spawn(
        CLI[0],
        [*CLI[1:], *args],
        env=cli_env(home, TERM="xterm", **env),
        timeout=60,
        dimensions=(term.rows, term.cols),
    )
    child.logfile_read = term.log
    return child


def http_model(srv: FixtureServer) -> list[str]:
    return ["--model", "openai:m", "--base-url", srv.base_url]


def assert_untouched(screen: pyte.Screen) -> None:
    assert screen.title == "" and screen.icon_name == "", (screen.title, screen.icon_name)


def assert_shown_escaped(text: str) -> None:
    """Each hostile sequence is on the screen as visible text."""
    assert r"\x1b]52;c;cm0gLXJmIH4=\x07" in text
    assert r"\x1b[2J\x1b[H" in text
    assert r"\x1b]0;owned-title\x07" in text
    assert r"\x1b]8;;http://evil.example/\x1b\click" in text


# --------------------------------------------------------------------------------------------
# the shell tool's approval question


TRICKS = {
    "cursor_up_and_erase_line": "touch pwned;" + f"{ESC}[1A{ESC}[2K" * 3 + "\rls -la",
    "forty_newlines": "touch pwned" + "\n" * 40 + "ls -la",
    "padding_past_the_panel": "ls -la" + " " * 700 + "; touch pwned",
    "carriage_return_overwrite": "touch pwned; true\r" + "ls -la" + " " * 20,
}


@pytest.mark.parametrize("trick", sorted(TRICKS))
def test_shell_question_shows_the_whole_command_on_screen(tmp_path: Path, trick: str) -> None:
    command = TRICKS[trick]
    root = tmp_path / "root"
    root.mkdir()
    term = Terminal(rows=60, cols=100)
    with FixtureServer() as srv:
        srv.queue(tool_call_stream("run_command", {"command": command}), text_stream("done"))
        child = spawn(
            ["run", *http_model(srv), "--tools", "shell", "--root", str(root), "--plain", "go",
             "--db", str(tmp_path / "s.db")],
            tmp_path,
            term,
        )  # fmt: skip
        child.expect_exact("[y/N] ")
        shown = term.text()
        lines = command.split("\n")
        size = f"({len(lines)} line{'s' if len(lines) > 1 else ''}, {len(command)} characters)"
        # the line next to the cursor states the real size of the command
        assert f"run this command {size}? [y/N]" in shown, shown
        # every non-blank line of the command is on the screen, in full (escaped, blanks marked)
        assert "touch pwned" in shown and "ls -la" in shown
        if trick == "padding_past_the_panel":
            assert "ls -la⟨700 spaces⟩; touch pwned" in shown
        if trick == "forty_newlines":
            assert "⟨39 empty lines⟩" in shown and "41 │ ls -la" in shown
        if trick == "cursor_up_and_erase_line":
            assert r"touch pwned;\x1b[1A\x1b[2K\x1b[1A\x1b[2K\x1b[1A\x1b[2K\rls -la" in shown
        assert_untouched(term.screen())
        child.sendline("y")
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == 0, term.text()
    assert (root / "pwned").exists()  # what was shown is what ran


def test_shell_question_format() -> None:
    q = shell_question("ls\n\n\n\n\ntouch pwned")
    assert q.splitlines() == [
        "the model wants to run a shell command (6 lines, 18 characters):",
        "  1 │ ls",
        "    │ ⟨4 empty lines⟩",
        "  6 │ touch pwned",
        "run this command (6 lines, 18 characters)?",
    ]
    q = shell_question(f"echo {ESC}[2J")
    assert "1 control character shown escaped" in q and r"echo \x1b[2J" in q and ESC not in q


# --------------------------------------------------------------------------------------------
# answers, tool panels, server errors, show, sessions, chat


@pytest.mark.parametrize("style", ["markdown", "plain", "markdown-no-stream"])
def test_run_answer_cannot_drive_the_terminal(tmp_path: Path, style: str) -> None:
    term = Terminal()
    db = tmp_path / "s.db"
    extra = {"plain": ["--plain"], "markdown": [], "markdown-no-stream": ["--no-stream"]}[style]
    with FixtureServer() as srv:
        srv.queue(text_stream(ANSWER))
        child = spawn(["run", *http_model(srv), *extra, "--db", str(db), "hi"], tmp_path, term)
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == 0, term.text()
    shown = term.text()
    assert "first line" in shown and "SAFE-ANSWER" in shown and "END" in shown
    if style == "plain":
        assert_shown_escaped(shown)
    else:  # Markdown reads backslash escapes itself; every sequence is still plain text
        flat = shown.replace("\n", "")
        for piece in ("]52;c;cm0gLXJmIH4=", "[2J", "]0;owned-title", "]8;;http://evil.example/"):
            assert piece in flat, piece
    assert_untouched(term.screen())


def test_tool_result_panel_and_chat_cannot_drive_the_terminal(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "evil.txt").write_text(f"FILE-START {ALL_HOSTILE} FILE-END")
    term = Terminal()
    with FixtureServer() as srv:
        srv.queue(tool_call_stream("read_file", {"path": "evil.txt"}), text_stream(ANSWER))
        child = spawn(
            [
                "chat",
                *http_model(srv),
                "--tools",
                "files",
                "--root",
                str(root),
                "--db",
                str(tmp_path / "s.db"),
            ],
            tmp_path,
            term,
        )
        child.expect_exact("you> ")
        child.sendline("read it")
        child.expect("tokens: ")
        child.expect_exact("you> ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        child.close()
    shown = term.text()
    assert "FILE-START" in shown and "FILE-END" in shown and "SAFE-ANSWER" in shown
    assert shown.count(r"\x1b]52;c;cm0gLXJmIH4=\x07") >= 2  # in the tool panel and the answer
    assert_shown_escaped(shown)
    assert_untouched(term.screen())


def test_server_error_line_cannot_drive_the_terminal(tmp_path: Path) -> None:
    term = Terminal()
    body = json.dumps({"error": {"message": f"ERR-START {ALL_HOSTILE} ERR-END", "type": "server_error"}})
    with FixtureServer() as srv:
        srv.queue(Canned(status=400, body=body.encode(), content_type="application/json"))
        child = spawn(["run", *http_model(srv), "--db", str(tmp_path / "s.db"), "hi"], tmp_path, term)
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == 1
    shown = term.text()
    assert "foundation-ai: error:" in shown and "ERR-START" in shown and "ERR-END" in shown
    assert_shown_escaped(shown)
    assert_untouched(term.screen())


def _pty_output(args: list[str], home: Path) -> Terminal:
    term = Terminal()
    child = spawn(args, home, term)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, term.text()
    return term


def test_show_and_sessions_cannot_drive_the_terminal_and_json_is_byte_exact(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    prompt = f"PROMPT {HOSTILE['title']} {HOSTILE['osc52']}"
    with FixtureServer() as srv:
        srv.queue(text_stream(ANSWER))
        r = subprocess.run(
            [*CLI, "run", *http_model(srv), "--json", "--db", str(db), prompt],
            capture_output=True, timeout=60, env=cli_env(tmp_path), stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert "".join(e["text"] for e in events if e["type"] == "text") == ANSWER  # byte-exact
    assert b"\\u001b]52;" in r.stdout  # JSON's own escape of ESC, nothing of ours

    term = _pty_output(["sessions", "--db", str(db)], tmp_path)
    shown = term.text()
    assert "PROMPT" in shown and r"\x1b]0;owned-title\x07" in shown and r"\x1b]52;c;" in shown
    assert_untouched(term.screen())

    listing = subprocess.run(
        [*CLI, "sessions", "--json", "--db", str(db)], capture_output=True, text=True, env=cli_env(tmp_path)
    )
    session_id = json.loads(listing.stdout.splitlines()[0])["session_id"]
    term = _pty_output(["show", session_id, "--db", str(db)], tmp_path)
    shown = term.text()
    assert "PROMPT" in shown and "SAFE-ANSWER" in shown and "END" in shown
    assert_shown_escaped(shown)
    assert_untouched(term.screen())


# --------------------------------------------------------------------------------------------
# visible(): units, properties, and a fuzz test of the renderer through pyte


def test_visible_escapes_each_kind_of_control() -> None:
    assert visible("a\x1b[31mb") == r"a\x1b[31mb"
    assert visible("bell\a del\x7f nul\x00 bs\b") == r"bell\x07 del\x7f nul\x00 bs\x08"
    assert visible("csi\x9b2J nel\x85") == r"csi\x9b2J nel\x85"
    assert visible("abc\u202edcba\u2066x\u2069") == r"abc\u202edcba\u2066x\u2069"
    assert visible("cr\rover") == r"cr\rover"
    assert visible("keep\nlines\tand tabs\r\n") == "keep\nlines\tand tabs\n"
    assert visible("plain ünïcødé 😀 text") == "plain ünïcødé 😀 text"
    assert visible_line("two\nlines\t!") == r"two\nlines\t!"
    assert count_controls("a\x1b\nb\u202e") == 2
    assert error_line(f"boom {ESC}]0;t\a\n next") == r"foundation-ai: error: boom \x1b]0;t\x07 next"


_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
HOSTILE_ALPHABET = st.sampled_from(
    [*"ab ;[]0123456789?\\/:\n\t\r\a\b\x1b\x7f\x9b\x9d\x90\u202e\u2066\u200f", "é", "😀", "]8;;", "]52;c;"]
)
hostile_text = st.lists(HOSTILE_ALPHABET, max_size=60).map("".join)
narrow_text = hostile_text.filter(lambda t: "😀" not in t)
"""Without wide characters, whose tab stops rich and ``str.expandtabs`` count differently."""


@pytest.mark.fuzz
@fuzz_settings(300)
@given(hostile_text)
def test_visible_leaves_no_control_character_and_is_idempotent(text: str) -> None:
    out = visible(text)
    assert _UNSAFE.search(out) is None
    assert visible(out) == out
    assert "\n" not in visible_line(text) and _UNSAFE.search(visible_line(text)) is None
    # nothing is lost: each original line is still there once escaped
    assert out.count("\n") == text.replace("\r\n", "\n").count("\n")


def _screen_of(draw: Callable[[Console], None]) -> pyte.Screen:
    out = io.StringIO()
    draw(Console(force_terminal=True, color_system="standard", width=200, file=out))
    screen = pyte.Screen(200, 80)
    screen.set_mode(pyte.modes.LNM)  # a newline returns to column 0, as a tty's ONLCR does
    pyte.Stream(screen).feed(out.getvalue())
    return screen


@pytest.mark.fuzz
@fuzz_settings(60)
@given(narrow_text, hostile_text)
def test_fuzz_renderer_draws_exactly_the_escaped_text(answer: str, tool_output: str) -> None:
    """Whatever the model and a tool send, the emulated screen shows the escaped text line by
    line, the title stays empty and the cursor never moves up over earlier output."""

    def draw(console: Console) -> None:
        console.print("MARKER-TOP", markup=False)
        r = TurnRenderer(console)
        r.text("A:" + answer, "m1")
        r.end_line()
        call = ToolCall(id="c1", name=f"tool{tool_output[:5]}", arguments={"x": tool_output})
        r.tool_call(call)
        r.tool_result(
            ToolResultMessage(tool_call_id="c1", name="t", content=Messages.user(tool_output).content)
        )
        r.failed(tool_output)
        render_records(console, [Messages.user(answer)])

    screen = _screen_of(draw)
    shown = [row.rstrip() for row in screen.display]
    assert shown[0] == "MARKER-TOP"  # nothing erased it or moved the cursor back over it
    assert_untouched(screen)
    expected = visible("A:" + answer).expandtabs(8).split("\n")
    assert [line.rstrip() for line in expected] == shown[1 : 1 + len(expected)]
