"""The real ``foundation-ai`` command in a subprocess, on the bundled SmolLM2 model (small
``--max-tokens``, fixed seed, temperature 0): ``run``, ``run --json``, ``sessions``, ``show``,
one-line errors with their exit codes, and the ``files`` / ``shell`` tools end to end."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from foundation_ai.agentic import TurnEvent

CLI = [sys.executable, "-m", "foundation_ai"]
SMALL = ["--max-tokens", "12", "--seed", "7", "--temperature", "0"]
TOOLS = ["--max-tokens", "48", "--seed", "7", "--temperature", "0"]  # room for a complete call


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env.update({"NO_PROXY": "127.0.0.1,localhost", "COLUMNS": "120", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def cli(
    *args: str,
    db: Path | None = None,
    cwd: Path | None = None,
    stdin: str = "",
    timeout: float = 300,
    **env: str,
):
    cmd = [*CLI, *args]
    if db is not None:
        cmd += ["--db", str(db)]
    return subprocess.run(
        cmd, input=stdin, capture_output=True, text=True, timeout=timeout, env=_env(**env), cwd=cwd
    )


def json_events(stdout: str) -> list[dict]:
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    return [json.loads(ln) for ln in lines]


def one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("foundation-ai: error: "), stderr
    return lines[0]


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


# --------------------------------------------------------------------------------------------
# run, run --json, sessions, show on the bundled model


@pytest.fixture(scope="module")
def store_with_runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    db = tmp_path_factory.mktemp("cli") / "sessions.sqlite3"
    plain = cli("run", "What is the capital of France?", *SMALL, db=db)
    js = cli("run", "Name a colour.", "--json", *SMALL, db=db)
    return {"db": db, "plain": plain, "json": js}


def test_run_prints_an_answer_and_exits_0(store_with_runs: dict) -> None:
    r = store_with_runs["plain"]
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip(), "no answer on stdout"
    assert "tokens: " in r.stderr and " in · " in r.stderr and "cost $0 (local)" in r.stderr


def test_run_json_emits_turn_events_ending_in_done(store_with_runs: dict) -> None:
    r = store_with_runs["json"]
    assert r.returncode == 0, r.stderr
    events = json_events(r.stdout)
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "done"
    assert "text" in kinds
    assert kinds.count("done") == 1 and "failed" not in kinds
    assert events[-1]["summary"]["outcome"] == "completed"
    assert 0 < events[-1]["summary"]["usage"]["output"] <= 12
    assert "".join(e["text"] for e in events if e["type"] == "text").strip()
    # every line decodes as one of the TurnEvent variants
    union = (
        TurnEvent.Text | TurnEvent.Thinking | TurnEvent.ToolCall | TurnEvent.ToolResult | TurnEvent.Retract
        | TurnEvent.Progress | TurnEvent.Failed | TurnEvent.Done
    )  # fmt: skip
    decoded = [msgspec.json.decode(line, type=union) for line in r.stdout.splitlines()]
    assert isinstance(decoded[-1], TurnEvent.Done)


def test_sessions_lists_both_runs(store_with_runs: dict) -> None:
    r = cli("sessions", db=store_with_runs["db"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:2] == ["ID", "UPDATED"]
    assert len(lines) == 3
    newest, oldest = lines[1], lines[2]
    assert "Name a colour." in newest and "What is the capital of France?" in oldest
    for line in (newest, oldest):
        cols = line.split()
        assert len(cols[0]) == 25  # a SCRU128 session id
        assert cols[3] == "2"  # the prompt and the answer


def test_show_prints_the_transcript(store_with_runs: dict) -> None:
    db = store_with_runs["db"]
    listing = cli("sessions", db=db).stdout.splitlines()
    session_id = next(ln.split()[0] for ln in listing[1:] if "capital of France" in ln)
    r = cli("show", session_id, db=db)
    assert r.returncode == 0, r.stderr
    assert f"session {session_id}" in r.stdout
    assert "you> What is the capital of France?" in r.stdout
    answer = store_with_runs["plain"].stdout.strip()
    assert "assistant> " in r.stdout
    assert answer.split()[0] in r.stdout
    # the transcript's usage line shows the cost as `run` did (tester defect 7)
    assert "cost $0 (local)" in r.stdout and "$0.000000" not in r.stdout
    # a unique prefix works too, and --json gives the stored records
    r2 = cli("show", session_id[:12], "--json", db=db)
    assert r2.returncode == 0, r2.stderr
    kinds = [json.loads(ln)["type"] for ln in r2.stdout.splitlines()]
    assert kinds[0] == "conversation" and kinds[-1] == "summary"


def test_sessions_on_an_empty_store(tmp_path: Path) -> None:
    from foundation_ai.agentic import SqliteSessionStore

    SqliteSessionStore(tmp_path / "empty.sqlite3").close()  # a --db file that does not exist is an error
    r = cli("sessions", db=tmp_path / "empty.sqlite3")
    assert r.returncode == 0
    assert r.stdout.strip() == "no stored sessions"


def test_a_chat_left_before_any_turn_announces_no_saved_session(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    r = cli("chat", db=db, stdin="")  # end of input at the first prompt
    assert r.returncode == 0, r.stderr
    assert "nothing was saved" in r.stdout and "resume with" not in r.stdout
    assert cli("sessions", db=db).stdout.strip() == "no stored sessions"


# --------------------------------------------------------------------------------------------
# one-line errors and exit codes


def test_missing_openai_key_is_one_line_exit_2(tmp_path: Path) -> None:
    r = cli("run", "hi", "--model", "openai:gpt-4o-mini", db=tmp_path / "s.db")
    assert r.returncode == 2
    line = one_error_line(r.stderr)
    assert "OPENAI_API_KEY is not set" in line
    assert r.stdout == ""


@pytest.mark.parametrize(
    ("spec", "var"),
    [("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"), ("responses:gpt-5-mini", "OPENAI_API_KEY")],
)
def test_missing_key_other_providers(tmp_path: Path, spec: str, var: str) -> None:
    r = cli("run", "hi", "--model", spec, db=tmp_path / "s.db")
    assert r.returncode == 2
    assert f"{var} is not set" in one_error_line(r.stderr)


def test_unreachable_base_url_is_one_line_exit_1(tmp_path: Path) -> None:
    port = closed_port()
    r = cli(
        "run",
        "hi",
        "--model",
        "openai:smollm2",
        "--base-url",
        f"http://127.0.0.1:{port}",
        db=tmp_path / "s.db",
    )
    assert r.returncode == 1
    line = one_error_line(r.stderr)
    assert f"cannot reach http://127.0.0.1:{port}" in line


def test_unreachable_base_url_json_ends_in_failed(tmp_path: Path) -> None:
    port = closed_port()
    r = cli(
        "run",
        "hi",
        "--json",
        "--model",
        "openai:x",
        "--base-url",
        f"http://127.0.0.1:{port}",
        db=tmp_path / "s.db",
    )
    assert r.returncode == 1
    events = json_events(r.stdout)
    assert events[-1]["type"] == "failed"
    assert events[-1]["error"]["kind"] == "provider"
    assert "cannot reach" in one_error_line(r.stderr)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "hi", "--model", "mystery"], "unknown model 'mystery'"),
        (["run", "hi", "--model", "bogus:x"], "unknown model provider 'bogus'"),
        (["run", "hi", "--model", "openai:"], "has no name"),
        (["run", "hi", "--base-url", "http://127.0.0.1:1"], "--base-url needs an HTTP model"),
        (["run", "hi", "--session", "nope"], "no stored session 'nope'"),
        (["show", "nope"], "s.db: no such file"),  # the --db file does not exist: not an empty store
        (["run", "   "], "the prompt is empty"),
        (["run", "hi", "--model", "gguf:/no/such/file.gguf"], "no such GGUF file"),
        (["run", "hi", "--tool-choice", "read_file"], "--tool-choice read_file: no such tool on offer"),
        (["run", "hi", "--tools", "files", "--root", "/no/such/dir"], "--root /no/such/dir: not a directory"),
    ],
)
def test_configuration_errors_are_one_line_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    r = cli(*args, db=tmp_path / "s.db")
    assert r.returncode == 2, r.stderr
    assert needle in one_error_line(r.stderr)


def test_bad_option_is_usage_error(tmp_path: Path) -> None:
    r = cli("run", "hi", "--tools", "internet", db=tmp_path / "s.db")
    assert r.returncode == 2
    assert "unknown tool set 'internet'" in r.stderr


def test_python_m_foundation_ai_and_help() -> None:
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("foundation-ai ")
    r = cli("--help")
    assert r.returncode == 0
    for command in ("chat", "run", "sessions", "show"):
        assert command in r.stdout
    r = cli(stdin="What is 2 + 2?")  # no command: the help, and one line saying what to do
    assert r.returncode == 2 and "run" in r.stdout
    assert one_error_line(r.stderr).endswith('piped text is read by run (echo "Hi" | foundation-ai run)')


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).parent / "foundation-ai"
    assert exe.exists()
    r = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "foundation-ai" in r.stdout


# --------------------------------------------------------------------------------------------
# built-in tools end to end (the tool call is forced with --tool-choice; llama.cpp enforces it
# with a grammar, so even the 135M model sends a valid call)


@pytest.fixture()
def sandbox(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("hello from notes\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("TOP-SECRET-CONTENT\n", encoding="utf-8")
    return root


def _tool_results(stdout: str) -> list[dict]:
    return [e["result"] for e in json_events(stdout) if e["type"] == "tool_result"]


def test_files_tool_refuses_a_path_outside_the_root(sandbox: Path, tmp_path: Path) -> None:
    r = cli(
        "run", "Call read_file with path ../secret.txt", "--json", "--tools", "files", "--root", str(sandbox),
        "--tool-choice", "read_file,none", *TOOLS, db=tmp_path / "s.db",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    results = _tool_results(r.stdout)
    assert results, r.stdout
    first = results[0]
    assert first["name"] == "read_file"
    assert "resolves outside the root directory" in first["error_detail"]
    assert "TOP-SECRET-CONTENT" not in r.stdout


def test_shell_tool_asks_and_a_no_declines(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    r = cli(
        "run", "Run the command: touch made.txt", "--json", "--tools", "shell", "--root", str(work),
        "--tool-choice", "run_command,none", *TOOLS, db=tmp_path / "s.db", stdin="n\n",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "[y/N]" in r.stderr
    results = _tool_results(r.stdout)
    assert results and results[0]["name"] == "run_command"
    assert "declined" in results[0]["error_detail"]
    assert list(work.iterdir()) == []


def test_shell_tool_with_yes_runs_without_asking(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    r = cli(
        "run", "Run the command: echo hi", "--json", "--tools", "shell", "--yes", "--root", str(work),
        "--tool-choice", "run_command,none", *TOOLS, db=tmp_path / "s.db",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "[y/N]" not in r.stderr
    results = _tool_results(r.stdout)
    assert results and results[0]["name"] == "run_command"
    assert "error_detail" not in results[0]
    assert results[0]["content"]["content"].startswith("exit code ")


def test_run_ctrl_c_aborts_the_turn_exit_130(tmp_path: Path) -> None:
    """SIGINT during `run --json`: the turn is aborted (not killed), ends with a `done` event
    whose outcome is `aborted`, and the process exits 130."""
    db = tmp_path / "s.db"
    proc = subprocess.Popen(
        [*CLI, "run", "Write a very long story about a dragon.", "--json", "--max-tokens", "400", "--seed", "7",
         "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )  # fmt: skip
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(json.loads(line))
        if seen[-1]["type"] == "text":
            proc.send_signal(signal.SIGINT)
            break
    rest, _err = proc.communicate(timeout=120)
    seen += json_events(rest)
    assert proc.returncode == 130
    assert seen[-1]["type"] == "done"
    assert seen[-1]["summary"]["outcome"] == "aborted"
    assert seen[-1]["summary"]["usage"]["output"] < 400
    # what was produced is kept in the session
    shown = cli("show", json_session_id(db), db=db)
    assert "you> Write a very long story about a dragon." in shown.stdout


def json_session_id(db: Path) -> str:
    listing = cli("sessions", db=db).stdout.splitlines()
    return listing[1].split()[0]


def test_run_continues_a_session(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    first = cli("run", "Name a fruit.", *SMALL, db=db)
    assert first.returncode == 0, first.stderr
    session_id = json_session_id(db)
    second = cli("run", "Name another one.", "--session", session_id[:10], *SMALL, db=db)
    assert second.returncode == 0, second.stderr
    listing = cli("sessions", db=db).stdout.splitlines()
    assert len(listing) == 2  # still one session, now with four messages
    assert listing[1].split()[3] == "4"
    shown = cli("show", session_id, db=db).stdout
    assert shown.index("you> Name a fruit.") < shown.index("you> Name another one.")


def test_run_json_reader_leaves_early_exit_141_turn_aborted(tmp_path: Path) -> None:
    """Tester defect 5: `run --json ... | head -1` exited 1 silently. When stdout's reader goes
    away mid-turn, the command aborts the turn (it stops early, well short of --max-tokens),
    exits 141 with nothing on stderr, and the stored session holds the prompt and a summary."""
    db = tmp_path / "s.db"
    proc = subprocess.Popen(
        [*CLI, "run", "Write a very long story about a dragon.", "--json", "--max-tokens", "400", "--seed", "7",
         "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    for line in proc.stdout:
        if json.loads(line)["type"] == "text":
            break  # like `head`: the first text line, then the reader leaves
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 141
    assert err == b""
    records = [json.loads(ln) for ln in cli("show", json_session_id(db), "--json", db=db).stdout.splitlines()]
    assert records[0]["type"] == "conversation"
    assert records[0]["message"]["content"]["content"] == "Write a very long story about a dragon."
    summaries = [r for r in records if r["type"] == "summary"]
    assert summaries and summaries[-1]["usage"]["output"] < 400


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ('root = "/no/such/dir"', "agents.bot: root '/no/such/dir' is not a directory"),
        ("root = 3", "agents.bot: root must be a path"),
    ],
)
def test_a_bad_root_in_the_agents_file_is_a_one_line_exit_2(tmp_path: Path, entry: str, needle: str) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text(f'[agents.bot]\ntools = ["files"]\n{entry}\n', encoding="utf-8")
    r = cli("serve", "--agents", str(agents), "--no-auth", "--port", "0", db=tmp_path / "s.db")
    assert r.returncode == 2, r.stderr
    assert f"{agents}: {needle}" in one_error_line(r.stderr)
