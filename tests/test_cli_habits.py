"""The CLI with the habits users bring from ``llm``, each through the real ``foundation-ai`` in a
subprocess (or a pseudo-terminal drawn by pyte): a bare prompt runs it; ``-s`` is the system
prompt and ``-S`` the session; piped stdin is sent with the prompt; ``--no-stream``, ``-q``,
``--key``, ``-c``; ambiguous id prefixes list the candidates; ``models``; ``keys``; a TOML config
file; ``-a`` attachments; ``--schema``; the answer as Markdown on a terminal, plain when piped
or with ``--plain``.

Turns run on the bundled SmolLM2 (temperature 0, a seed, few tokens) where what matters is what
the model and the store did, and on the loopback fixture server (canned OpenAI Chat streams)
where what matters is the request the CLI sent. Every subprocess gets its config and data dirs
under ``tmp_path`` (``XDG_CONFIG_HOME``, ``XDG_DATA_HOME``, ``HOME``): nothing is written to the
user's own directories.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests._cli_helpers import CLI, Terminal, cli_env, text_stream
from tests._fixture_server import FixtureServer

pexpect = pytest.importorskip("pexpect")

SMALL = ["--max-tokens", "12", "--seed", "7", "--temperature", "0"]
PNG_1PX = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def fa(home: Path, *args: str, stdin: str | None = "", **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``foundation-ai ARGS`` with ``stdin`` piped in (``None``: /dev/null)."""
    return subprocess.run(
        [*CLI, *args],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        timeout=300,
        env=cli_env(home, **env),
    )


def records(home: Path, db: Path, session_id: str | None = None) -> list[dict[str, Any]]:
    if session_id is None:
        listing = fa(home, "sessions", "--json", "--db", str(db))
        session_id = json.loads(listing.stdout.splitlines()[0])["session_id"]
    shown = fa(home, "show", session_id, "--json", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line) for line in shown.stdout.splitlines()]


def user_texts(recs: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in recs:
        m = r.get("message", {})
        if r["type"] == "conversation" and m.get("type") == "user" and m["content"]["type"] == "text":
            out.append(m["content"]["content"])
    return out


def one_error(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("foundation-ai: error: "), stderr
    return lines[0]


def http(srv: FixtureServer) -> list[str]:
    return ["--model", "openai:m", "--base-url", srv.base_url]


def sent(srv: FixtureServer, i: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = srv.requests[i].json()
    return body


# --------------------------------------------------------------------------------------------
# a bare prompt, -s/--system, -S/--session, -c/--continue, ambiguous prefixes


def test_a_bare_prompt_runs_it_on_the_bundled_model(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    r = fa(tmp_path, "What is the capital of France?", *SMALL, "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() and "tokens: " in r.stderr
    # options before the prompt work too
    r2 = fa(tmp_path, "-m", "local", *SMALL, "--db", str(db), "Name a colour.")
    assert r2.returncode == 0, r2.stderr
    assert user_texts(records(tmp_path, db)) == ["Name a colour."]


def test_no_arguments_print_the_help(tmp_path: Path) -> None:
    r = fa(tmp_path)
    assert r.returncode == 2 and "A prompt without a command runs it" in " ".join(r.stdout.split())


def test_dash_s_is_the_system_prompt_and_dash_capital_s_the_session(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with FixtureServer() as srv:
        srv.queue(text_stream("Bonjour."), text_stream("Encore."))
        r = fa(tmp_path, *http(srv), "-s", "Answer in French.", "--db", str(db), "Hi")
        assert r.returncode == 0, r.stderr
        assert sent(srv)["messages"][0] == {"role": "system", "content": "Answer in French."}
        session_id = json.loads(fa(tmp_path, "sessions", "--json", "--db", str(db)).stdout)["session_id"]
        r = fa(tmp_path, *http(srv), "-S", session_id[:12], "--db", str(db), "Again")
        assert r.returncode == 0, r.stderr
        replayed = [m["content"] for m in sent(srv, 1)["messages"] if m["role"] in ("user", "assistant")]
        assert replayed == ["Hi", "Bonjour.", "Again"]


def test_continue_resumes_the_most_recent_session(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    assert fa(tmp_path, "run", "Name a fruit.", *SMALL, "--db", str(db)).returncode == 0
    assert fa(tmp_path, "run", "Name a colour.", *SMALL, "--db", str(db)).returncode == 0
    r = fa(tmp_path, "run", "-c", "Name another one.", *SMALL, "--db", str(db))
    assert r.returncode == 0, r.stderr
    rows = [
        json.loads(line) for line in fa(tmp_path, "sessions", "--json", "--db", str(db)).stdout.splitlines()
    ]
    assert len(rows) == 2
    newest = records(tmp_path, db, rows[0]["session_id"])
    assert user_texts(newest) == ["Name a colour.", "Name another one."]


def test_continue_without_any_session_is_a_usage_error(tmp_path: Path) -> None:
    r = fa(tmp_path, "run", "--continue", "hi", "--db", str(tmp_path / "s.db"))
    assert r.returncode == 2 and "no stored session yet" in one_error(r.stderr)


def test_an_ambiguous_id_prefix_lists_the_candidates(tmp_path: Path) -> None:
    from foundation_ai.agentic import SqliteSessionStore
    from foundation_ai.types import Messages, SessionRecord

    db = tmp_path / "s.db"
    store = SqliteSessionStore(str(db))
    ids = ["0abcdefghijklmnopqrstuvw1", "0abcdefghijklmnopqrstuvw2", "0abzzzzzzzzzzzzzzzzzzzzz3"]
    for sid in ids:
        store.append(sid, [SessionRecord.Conversation(message=Messages.user(f"hello {sid[-1]}"))])
    store.close()
    r = fa(tmp_path, "show", "0abc", "--db", str(db))
    assert r.returncode == 2
    line = one_error(r.stderr)
    assert (
        "ambiguous (2 sessions match: " in line and ids[0] in line and ids[1] in line and ids[2] not in line
    )
    r = fa(tmp_path, "run", "-S", "0ab", "hi", "--db", str(db))
    assert r.returncode == 2 and all(i in r.stderr for i in ids)


# --------------------------------------------------------------------------------------------
# piped stdin, --no-stream, -q, --plain / Markdown


def test_piped_stdin_is_sent_before_the_prompt(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    notes = "The meeting moved to Tuesday.\nBring the report.\n"
    r = fa(tmp_path, "run", "Summarize.", *SMALL, "--db", str(db), stdin=notes)
    assert r.returncode == 0, r.stderr
    assert user_texts(records(tmp_path, db)) == [
        "The meeting moved to Tuesday.\nBring the report.\n\nSummarize."
    ]
    # no prompt: stdin is the prompt; '-' too
    for args in (["run"], ["run", "-"]):
        db2 = tmp_path / f"{len(args)}.db"
        r = fa(tmp_path, *args, *SMALL, "--db", str(db2), stdin="Say hi.")
        assert r.returncode == 0, r.stderr
        assert user_texts(records(tmp_path, db2)) == ["Say hi."]


def test_no_stream_shows_only_the_final_answer_on_a_terminal(tmp_path: Path) -> None:
    """A vacuous first answer is retracted and retried: streamed, it shows with a retraction
    note; with --no-stream only the real answer appears."""
    for flags, expect_retraction in ((["--plain"], True), (["--plain", "--no-stream"], False)):
        term = Terminal()
        with FixtureServer() as srv:
            srv.queue(text_stream("..."), text_stream("The real answer."))
            child = pexpect.spawn(
                CLI[0], [*CLI[1:], "run", *http(srv), *flags, "--db", str(tmp_path / "s.db"), "question"],
                env=cli_env(tmp_path, TERM="xterm"), timeout=60, dimensions=(term.rows, term.cols),
            )  # fmt: skip
            child.logfile_read = term.log
            child.expect(pexpect.EOF)
            child.close()
        shown = term.text()
        assert child.exitstatus == 0 and "The real answer." in shown, shown
        assert ("output above retracted" in shown) is expect_retraction, shown


def test_quiet_prints_only_the_answer(tmp_path: Path) -> None:
    r = fa(tmp_path, "run", "-q", "Name a colour.", *SMALL, "--db", str(tmp_path / "s.db"))
    assert r.returncode == 0 and r.stdout.strip() and r.stderr == ""


def test_the_answer_is_markdown_on_a_terminal_plain_when_piped_or_asked(tmp_path: Path) -> None:
    answer = "# Title\n\nSome **bold** text and [a link](http://example.test/x)."
    shown: dict[str, str] = {}
    for name, flags in (("markdown", []), ("plain", ["--plain"]), ("markdown-no-stream", ["--no-stream"])):
        term = Terminal()
        with FixtureServer() as srv:
            srv.queue(text_stream(answer))
            child = pexpect.spawn(
                CLI[0], [*CLI[1:], "run", *http(srv), *flags, "--db", str(tmp_path / "s.db"), "hi"],
                env=cli_env(tmp_path, TERM="xterm"), timeout=60, dimensions=(term.rows, term.cols),
            )  # fmt: skip
            child.logfile_read = term.log
            child.expect(pexpect.EOF)
            child.close()
        assert child.exitstatus == 0
        shown[name] = term.text()
    for name in ("markdown", "markdown-no-stream"):
        text = shown[name]
        assert "Title" in text and "# Title" not in text and "**bold**" not in text, text
        assert "Some bold text" in text and "http://example.test/x" in text  # a link shows its URL
        assert text.count("Some bold text") == 1  # the streamed rows were replaced, not repeated
    assert "# Title" in shown["plain"] and "Some **bold** text" in shown["plain"]
    with FixtureServer() as srv:
        srv.queue(text_stream(answer))
        piped = fa(tmp_path, "run", *http(srv), "--db", str(tmp_path / "s.db"), "hi")
    assert piped.stdout == answer + "\n"


# --------------------------------------------------------------------------------------------
# --key, keys, models, config.toml


def test_explicit_key_is_sent_and_only_to_http_models(tmp_path: Path) -> None:
    with FixtureServer() as srv:
        srv.queue(text_stream("ok"))
        r = fa(tmp_path, *http(srv), "--key", "sk-explicit-123", "--db", str(tmp_path / "s.db"), "hi")
        assert r.returncode == 0, r.stderr
        assert srv.requests[0].headers["authorization"] == "Bearer sk-explicit-123"
    r = fa(tmp_path, "run", "--key", "sk-x", "hi", "--db", str(tmp_path / "s.db"))
    assert r.returncode == 2 and "--key is for HTTP models" in one_error(r.stderr)


def test_keys_set_list_and_path_keep_the_key_private(tmp_path: Path) -> None:
    r = fa(tmp_path, "keys", "set", "openai", stdin="sk-stored-456\n")
    assert r.returncode == 0, r.stderr
    path = Path(fa(tmp_path, "keys", "path").stdout.strip())
    assert path == tmp_path / "config" / "foundation-ai" / "keys.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"openai": "sk-stored-456"}
    listing = fa(tmp_path, "keys", "list")
    assert "sk-stored" not in listing.stdout + listing.stderr  # values are never printed
    lines = dict(line.split(None, 1) for line in listing.stdout.splitlines())
    assert lines["openai"] == "keys.json" and lines["anthropic"] == "not set"
    env_wins = fa(tmp_path, "keys", "list", OPENAI_API_KEY="sk-env")
    assert "openai        env OPENAI_API_KEY (also in keys.json)" in env_wins.stdout
    bad = fa(tmp_path, "keys", "set", "openai", stdin="\n")
    assert bad.returncode == 2 and "non-empty" in one_error(bad.stderr)


def test_a_stored_key_is_used_when_the_environment_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process (a real OpenAI host is never called from tests): the key handed to the
    library comes from the environment, else keys.json."""
    from foundation_ai._cli.commands import _stored_key_env
    from foundation_ai._cli.config import write_key
    from foundation_ai._cli.model_choice import ModelChoice

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    choice = ModelChoice("responses", "gpt-4o-mini")
    assert _stored_key_env(choice) is None  # nothing stored: the library reports the missing key
    write_key("openai", "sk-stored")
    assert _stored_key_env(choice)["OPENAI_API_KEY"] == "sk-stored"  # type: ignore[index]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert _stored_key_env(choice) is None  # the environment wins
    assert _stored_key_env(ModelChoice("anthropic", "claude")) is None


def test_a_stored_key_never_goes_to_another_host(tmp_path: Path) -> None:
    """A stored key follows the environment-key rule: not sent to a --base-url it was not
    paired with; --key is sent there explicitly."""
    assert fa(tmp_path, "keys", "set", "openai", "--value", "sk-stored-789").returncode == 0
    with FixtureServer() as srv:
        srv.queue(text_stream("ok"))
        r = fa(tmp_path, *http(srv), "--db", str(tmp_path / "s.db"), "hi")
        assert r.returncode == 0, r.stderr
        assert "authorization" not in srv.requests[0].headers
        r = fa(tmp_path, *http(srv), "--key", "sk-flag", "--db", str(tmp_path / "s.db"), "hi")
        assert r.returncode == 0, r.stderr
        assert srv.requests[1].headers["authorization"] == "Bearer sk-flag"


def test_models_lists_the_bundled_model_and_those_of_providers_with_a_key(tmp_path: Path) -> None:
    r = fa(tmp_path, "models", "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert rows == [
        {
            "model": "local",
            "provider": "llama.cpp in-process (SmolLM2-135M-Instruct)",
            "context_window": 8192,
            "input_price": 0.0,
            "output_price": 0.0,
            "source": "bundled",
        }
    ]
    with_key = fa(tmp_path, "models", "--json", OPENAI_API_KEY="sk-x")
    rows = {row["model"]: row for row in map(json.loads, with_key.stdout.splitlines())}
    mini = rows["openai:gpt-4o-mini"]
    assert (mini["context_window"], mini["input_price"], mini["output_price"]) == (128000, 0.15, 0.6)
    assert mini["source"] == "key: env OPENAI_API_KEY"
    assert not any(m.startswith("anthropic:") for m in rows)
    table = fa(tmp_path, "models", "--all")
    assert "anthropic:claude-sonnet-4-5" in table.stdout and "200,000" in table.stdout
    assert table.stdout.splitlines()[0].split()[:2] == ["MODEL", "CONTEXT"]


def test_config_file_sets_defaults_and_flags_win(tmp_path: Path) -> None:
    with FixtureServer() as srv:
        conf = tmp_path / "config" / "foundation-ai" / "config.toml"
        conf.parent.mkdir(parents=True)
        conf.write_text(
            f'model = "openai:from-config"\nbase_url = "{srv.base_url}"\nsystem = "Be terse."\n'
            'tools = ["files"]\ntemperature = 0.25\n'
        )
        srv.queue(text_stream("ok"))
        r = fa(tmp_path, "run", "hi", "--db", str(tmp_path / "s.db"), "--root", str(tmp_path))
        assert r.returncode == 0, r.stderr
        body = sent(srv)
        assert body["model"] == "from-config" and body["temperature"] == 0.25
        assert body["messages"][0] == {"role": "system", "content": "Be terse."}
        assert {t["function"]["name"] for t in body["tools"]} >= {"read_file", "list_dir"}
        r = fa(
            tmp_path, "run", "hi", "-s", "Flag wins.", "--temperature", "0", "--db", str(tmp_path / "s.db")
        )
        body = sent(srv, 1)
        assert body["messages"][0]["content"] == "Flag wins." and body["temperature"] == 0
        conf.write_text("modle = 'typo'\n")
        r = fa(tmp_path, "run", "hi", "--db", str(tmp_path / "s.db"))
        assert r.returncode == 2 and "unknown setting 'modle'" in one_error(r.stderr)


# --------------------------------------------------------------------------------------------
# -a attachments, --schema


def test_attachments_text_file_on_the_bundled_model(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    notes = tmp_path / "notes.txt"
    notes.write_text("Alice is 31.")
    r = fa(tmp_path, "run", "-a", str(notes), "How old is Alice?", *SMALL, "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert user_texts(records(tmp_path, db)) == ["Attachment notes.txt:\nAlice is 31.", "How old is Alice?"]


def test_attachments_image_and_url_reach_the_server_as_such(tmp_path: Path) -> None:
    png = tmp_path / "dot.png"
    png.write_bytes(PNG_1PX)
    with FixtureServer() as srv:
        srv.queue(text_stream("A dot."))
        r = fa(tmp_path, *http(srv), "-a", str(png), "-a", "https://example.test/cat.jpg", "What is this?",
               "--db", str(tmp_path / "s.db"))  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert len(srv.requests) == 1  # the URL was passed on, never fetched by the CLI
        messages = sent(srv)["messages"]
    # the attachments and the prompt, given together, are one user message with three parts
    [content] = [m["content"] for m in messages if m["role"] == "user"]
    image, url, prompt = content
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG_1PX).decode()
    assert url == {"type": "text", "text": "Attachment (URL): https://example.test/cat.jpg"}
    assert prompt == {"type": "text", "text": "What is this?"}


def test_attachment_errors_are_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfe\x00\x01" * 10)
    for item, needle in (("missing.txt", "No such file"), (str(tmp_path / "blob.bin"), "nor UTF-8 text")):
        r = fa(tmp_path, "run", "-a", item, "hi", "--db", str(tmp_path / "s.db"))
        assert r.returncode == 2 and needle in one_error(r.stderr)


def test_schema_gives_json_matching_it_on_the_bundled_model(tmp_path: Path) -> None:
    r = fa(tmp_path, "run", "--schema", "name: str, age: int", "Invent a person.",
           "--max-tokens", "60", "--seed", "7", "--temperature", "0", "--db", str(tmp_path / "s.db"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    value = json.loads(r.stdout)
    assert set(value) == {"name", "age"} and isinstance(value["name"], str) and isinstance(value["age"], int)


def test_schema_is_sent_as_the_providers_structured_output_mode(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    with FixtureServer() as srv:
        srv.queue(text_stream('{"ok": true}'), text_stream('{"ok": true}'))
        r = fa(tmp_path, *http(srv), "--schema", "ok: bool", "hi", "--db", str(tmp_path / "s.db"))
        assert r.returncode == 0 and json.loads(r.stdout) == {"ok": True}, r.stderr
        fmt = sent(srv)["response_format"]
        assert fmt["type"] == "json_schema"
        assert fmt["json_schema"]["schema"] == {**schema, "additionalProperties": False}
        r = fa(tmp_path, *http(srv), "--schema", json.dumps(schema), "hi", "--db", str(tmp_path / "s.db"))
        assert r.returncode == 0, r.stderr
        assert sent(srv, 1)["response_format"]["json_schema"]["schema"] == schema
    for bad, needle in (
        ("{nope", "not valid JSON"),
        ("age: integer-ish", "unknown type"),
        ("1x: str", "field name"),
    ):
        r = fa(tmp_path, "run", "--schema", bad, "hi", "--db", str(tmp_path / "s.db"))
        assert r.returncode == 2 and needle in one_error(r.stderr)


def test_nothing_is_written_outside_the_test_dirs(tmp_path: Path) -> None:
    """The CLI's own files (config, keys, default store) land under XDG dirs set to tmp_path."""
    r = fa(tmp_path, "run", "Hi", *SMALL)  # no --db: the default store in XDG_DATA_HOME
    assert r.returncode == 0, r.stderr
    made = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert made and all(m.startswith(("data/", "config/")) for m in made), made
    assert os.path.exists(tmp_path / "data" / "foundation-ai" / "sessions.sqlite3")


def test_options_keep_the_local_models_recommended_sampling() -> None:
    """--max-tokens or --seed alone change only those fields: the bundled model keeps its
    recommended temperature (docs/models.md) instead of the generic 0.7."""
    from foundation_ai._cli.commands import _params
    from foundation_ai.backends import default_model

    model = default_model()
    params = _params(model, {"max_tokens": 5, "seed": 3})
    assert params is not None
    assert (params.max_tokens, params.seed) == (5, 3)
    assert params.temperature == model.default_params.temperature != 0.7
    assert _params(model, {}) is None  # nothing set: the model's own defaults apply


def test_chat_continue_resumes_the_most_recent_session(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with FixtureServer() as srv:
        srv.queue(text_stream("First."), text_stream("Second."))
        for prompt in ("older", "newer"):
            assert fa(tmp_path, *http(srv), "--db", str(db), prompt).returncode == 0
        newest = json.loads(fa(tmp_path, "sessions", "--json", "--db", str(db)).stdout.splitlines()[0])
        term = Terminal()
        child = pexpect.spawn(
            CLI[0], [*CLI[1:], "chat", "-c", *http(srv), "--db", str(db)],
            env=cli_env(tmp_path, TERM="xterm"), timeout=60, dimensions=(term.rows, term.cols),
        )  # fmt: skip
        child.logfile_read = term.log
        child.expect_exact("you> ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        child.close()
    shown = term.text()
    assert f"session {newest['session_id']} (resumed)" in shown
    assert "you> newer" in shown and "you> older" not in shown  # the resumed history is shown


def test_a_resumed_session_keeps_its_model_and_system_prompt(tmp_path: Path) -> None:
    """`run -S ID` / `-c` without --model or -s continue on the model and system prompt the
    session recorded (not the bundled model); flags still win."""
    db = tmp_path / "s.db"
    with FixtureServer() as srv:
        srv.queue(text_stream("One."), text_stream("Two."), text_stream("Three."))
        r = fa(tmp_path, "-m", "openai:remote-model", "--base-url", srv.base_url, "-s", "Be terse.",
               "--db", str(db), "first")  # fmt: skip
        assert r.returncode == 0, r.stderr
        r = fa(tmp_path, "-c", "--base-url", srv.base_url, "--db", str(db), "second")
        assert r.returncode == 0, r.stderr
        body = sent(srv, 1)
        assert body["model"] == "remote-model"
        assert body["messages"][0] == {"role": "system", "content": "Be terse."}
        r = fa(tmp_path, "-c", "--base-url", srv.base_url, "-s", "Be kind.", "--db", str(db), "third")
        assert r.returncode == 0, r.stderr
        assert sent(srv, 2)["messages"][0]["content"] == "Be kind."


def test_a_resumed_session_goes_back_to_the_server_it_recorded(tmp_path: Path) -> None:
    """`run -c` without --base-url talks to the server the session was started on (its base URL
    is recorded without credentials); --base-url still wins."""
    db = tmp_path / "s.db"
    with FixtureServer() as first_srv, FixtureServer() as other_srv:
        first_srv.queue(text_stream("One."), text_stream("Two."))
        other_srv.queue(text_stream("Elsewhere."))
        r = fa(
            tmp_path, "-m", "openai:remote-model", "--base-url", first_srv.base_url, "--db", str(db), "first"
        )
        assert r.returncode == 0, r.stderr
        r = fa(tmp_path, "-c", "--db", str(db), "second")
        assert r.returncode == 0, r.stderr
        assert "Two." in r.stdout
        assert len(first_srv.requests) == 2 and sent(first_srv, 1)["model"] == "remote-model"
        r = fa(tmp_path, "-c", "--base-url", other_srv.base_url, "--db", str(db), "third")
        assert r.returncode == 0, r.stderr
        assert "Elsewhere." in r.stdout and len(other_srv.requests) == 1


# ---------------------------------------------------------------------------------------------
# --mcp: an MCP server's tools offered through the command line (and config.toml)

MCP_SERVER = str(Path(__file__).resolve().parent / "_mcp_server.py")


def test_mcp_flag_offers_a_stdio_servers_tools_and_the_model_calls_one(tmp_path: Path) -> None:
    import sys

    db = tmp_path / "s.db"
    out = fa(
        tmp_path,
        "run",
        "--json",
        "--db",
        str(db),
        "--mcp",
        f"{sys.executable} {MCP_SERVER} stdio",
        "--tool-choice",
        "add,none",  # force the call, then the answer
        # a forced call on the xllamacpp engine is one whole JSON object: 12 tokens cut it off
        *["--max-tokens", "64", "--seed", "7", "--temperature", "0"],
        "What is 2 + 3? Use the add tool.",
    )
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    calls = [e for e in events if e["type"] == "tool_call"]
    results = [e for e in events if e["type"] == "tool_result"]
    assert calls and calls[0]["call"]["name"] == "add"
    assert results, events  # the MCP server answered the call (a result, not a refusal)


def test_mcp_servers_come_from_the_config_file_and_a_bad_one_is_a_usage_error(tmp_path: Path) -> None:
    cfg = tmp_path / "config" / "foundation-ai"
    cfg.mkdir(parents=True)
    (cfg / "config.toml").write_text('mcp = ["definitely-not-a-command-xyz"]\n', encoding="utf-8")
    out = fa(tmp_path, "run", "--db", str(tmp_path / "s.db"), *SMALL, "hi")
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "--mcp definitely-not-a-command-xyz" in one_error(out.stderr)
