"""In-process unit tests of the CLI's parts with a deterministic ``ScriptedModel``: model-spec
parsing, rendering (panels, usage line, transcripts), the session index, the chat's event
handling, and the hand-off of a tool's y/N question from the turn's worker thread to the thread
that owns the terminal."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
from rich.console import Console

from foundation_ai._cli.chat import ChatApp
from foundation_ai._cli.commands import (
    SessionSetup,
    failure_message,
    parse_tool_choice,
    session_table,
    usage_line,
)
from foundation_ai._cli.model_choice import ModelChoice, load_model, parse_model_spec
from foundation_ai._cli.render import TurnRenderer, format_usage, render_records
from foundation_ai._cli.session_index import describe_sessions, resolve_session_id
from foundation_ai._cli.turns import QuestionBox, TurnRunner, is_yes
from foundation_ai.agentic import AgentSession, InMemorySessionStore, ScriptedModel, call, fail, say, think
from foundation_ai.agentic.toolsets.builtin import files_tools, shell_tools
from foundation_ai.cli import build_parser, error_line
from foundation_ai.errors import ConfigurationError
from foundation_ai.types import (
    AgenticError,
    MessageRole,
    Messages,
    SessionRecord,
    TextContent,
    TokenSnapshot,
    ToolCall,
    ToolChoice,
    UserMessage,
)

LOCAL = ModelChoice("local")


def recording_console() -> Console:
    return Console(record=True, width=100, force_terminal=False, color_system=None)


# ---------------------------------------------------------------------------------------------
# model choice


@pytest.mark.parametrize(
    ("spec", "base_url", "expected"),
    [
        (None, None, ModelChoice("local")),
        ("local", None, ModelChoice("local")),
        ("SmolLM2", None, ModelChoice("local")),
        ("openai:gpt-4o-mini", None, ModelChoice("openai", "gpt-4o-mini")),
        (
            "openai:smollm2",
            "http://127.0.0.1:8080",
            ModelChoice("openai", "smollm2", "http://127.0.0.1:8080"),
        ),
        ("responses:gpt-5-mini", None, ModelChoice("responses", "gpt-5-mini")),
        ("Anthropic:claude-sonnet-4-5", None, ModelChoice("anthropic", "claude-sonnet-4-5")),
        ("openai:org/model:tag", None, ModelChoice("openai", "org/model:tag")),
        ("gguf:/models/x.gguf", None, ModelChoice("gguf", "/models/x.gguf")),
    ],
)
def test_parse_model_spec(spec: str | None, base_url: str | None, expected: ModelChoice) -> None:
    assert parse_model_spec(spec, base_url) == expected


@pytest.mark.parametrize(
    ("spec", "base_url", "needle"),
    [
        ("gpt-4o", None, "use PROVIDER:NAME"),
        ("google:gemini", None, "unknown model provider 'google'"),
        ("anthropic:", None, "has no name"),
        (None, "http://127.0.0.1:1", "--base-url needs an HTTP model"),
        ("gguf:x.gguf", "http://127.0.0.1:1", "--base-url needs an HTTP model"),
    ],
)
def test_parse_model_spec_errors(spec: str | None, base_url: str | None, needle: str) -> None:
    with pytest.raises(ConfigurationError, match=needle):
        parse_model_spec(spec, base_url)


def test_load_model_needs_a_key_without_base_url() -> None:
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY is not set"):
        load_model(ModelChoice("anthropic", "claude-x"), env={})
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY is not set"):
        load_model(ModelChoice("responses", "gpt-x"), env={})


def test_load_model_http_backends_without_network() -> None:
    m = load_model(ModelChoice("openai", "gpt-x"), env={"OPENAI_API_KEY": "sk-test-123456"})
    assert m.descriptor.name == "gpt-x"
    m = load_model(ModelChoice("openai", "smollm2", "http://127.0.0.1:9"), env={})
    assert m.descriptor.name == "smollm2"
    m = load_model(ModelChoice("anthropic", "claude-x", "http://127.0.0.1:9"), env={})
    assert m.descriptor.name == "claude-x"


def test_choice_labels() -> None:
    assert LOCAL.label == "local:SmolLM2-135M-Instruct"
    assert ModelChoice("openai", "gpt-4o").label == "openai:gpt-4o"


def test_parse_tool_choice() -> None:
    assert parse_tool_choice("auto") == ToolChoice.Auto()
    assert parse_tool_choice("NONE") == ToolChoice.None_()
    assert parse_tool_choice("required") == ToolChoice.Required()
    assert parse_tool_choice("read_file") == ToolChoice.Function("read_file")
    # several: the turn's first generations in order (force the call, then the answer)
    assert parse_tool_choice("read_file, none") == [ToolChoice.Function("read_file"), ToolChoice.None_()]
    assert parse_tool_choice("REQUIRED,auto") == [ToolChoice.Required(), ToolChoice.Auto()]
    with pytest.raises(ConfigurationError, match="an empty choice"):
        parse_tool_choice("read_file,")


def test_parser_options() -> None:
    p = build_parser()
    a = p.parse_args(["run", "hi", "--tools", "files,shell", "--tools", "files", "-m", "openai:x", "--yes"])
    assert a.tools == ["files", "shell", "files"] and a.model == "openai:x" and a.yes
    with pytest.raises(SystemExit):
        p.parse_args(["run", "hi", "--max-tokens", "0"])


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "hi", "-q", "--max-tokens", "4", "--temperature", "0", "--seed", "1"],
        ["-v", "run", "-m", "openai:x", "--tools", "files", "-S", "abc", "--json", "hi"],
        ["chat", "-c", "-s", "be brief", "--tools", "shell", "--yes"],
        ["run"],
    ],
)
def test_a_parser_built_for_one_command_parses_it_as_the_full_parser(argv: list[str]) -> None:
    """The entry point builds only ``run``'s (or ``chat``'s) subparser for those commands: the
    same namespace as the parser of every command (issue 31: the others are not built)."""
    from foundation_ai._cli.parser import command_of, with_default_command

    words = with_default_command(argv)
    command = command_of(words)
    assert command in ("run", "chat")
    only = build_parser(command)
    assert set(only._subparsers._group_actions[0].choices) == {command}  # type: ignore[union-attr]
    assert vars(only.parse_args(words)) == vars(build_parser().parse_args(words))


def test_command_of_finds_the_command_after_the_verbose_flags() -> None:
    from foundation_ai._cli.parser import command_of, with_default_command

    assert command_of(with_default_command(["-v", "Hi"])) == "run"
    assert command_of(["serve", "--port", "1"]) == "serve"
    assert command_of(["--help"]) is None and command_of([]) is None
    assert set(build_parser(command_of(["serve"]))._subparsers._group_actions[0].choices) > {"serve", "run"}  # type: ignore[union-attr]


def test_error_line_is_one_line() -> None:
    assert error_line("bad\n  thing\n") == "foundation-ai: error: bad thing"


def test_failure_message_names_the_unreachable_server() -> None:
    err = AgenticError(kind="provider", message="connection failed (ConnectError): refused")
    choice = ModelChoice("openai", "x", "http://127.0.0.1:9")
    assert (
        failure_message(err, choice)
        == "cannot reach http://127.0.0.1:9: connection failed (ConnectError): refused"
    )
    assert failure_message(AgenticError(kind="provider", message="HTTP 500\nboom"), choice) == "HTTP 500 boom"


# ---------------------------------------------------------------------------------------------
# rendering


def test_format_usage() -> None:
    assert format_usage(1234, 56, 0.0012345) == "tokens: 1,234 in · 56 out · cost $0.001234"
    assert format_usage(10, 5, None, cache_read=7) == "tokens: 10 in · 5 out · 7 cache read · cost n/a"


def test_usage_line_local_and_priced() -> None:
    class S:
        usage = TokenSnapshot(input=10, output=5, total_tokens=15, cost_usd=0.0)

    assert usage_line(S(), LOCAL) == "tokens: 10 in · 5 out · cost $0 (local)"
    assert usage_line(S(), ModelChoice("openai", "x")) == "tokens: 10 in · 5 out · cost $0.000000"
    unpriced = load_model(ModelChoice("openai", "smollm2", "http://127.0.0.1:9"), env={})
    assert usage_line(S(), ModelChoice("openai", "smollm2"), unpriced) == "tokens: 10 in · 5 out · cost n/a"


def test_renderer_streams_pieces_thinking_and_panels() -> None:
    console = recording_console()
    r = TurnRenderer(console)
    r.thinking("let me ")
    r.thinking("think")
    r.text("Hel", "m1")
    r.text("lo", "m1")
    r.text("Second output.", "m2")
    r.tool_call(ToolCall(id="c1", name="read_file", arguments={"path": "a.txt"}))
    r.tool_result(Messages.ToolResult(tool_call_id="c1", name="read_file", content=TextContent("contents!")))
    r.tool_result(
        Messages.ToolResult(
            tool_call_id="c2", name="read_file", content=TextContent("x"), error_detail="refused: outside"
        )
    )
    r.retract("steered")
    r.usage("tokens: 1 in · 2 out · cost $0 (local)")
    out = console.export_text()
    lines = out.splitlines()
    assert lines[0] == "let me think"
    assert lines[1] == "Hello"
    assert lines[2] == "Second output."
    assert "tool call read_file" in out and '{"path": "a.txt"}' in out
    assert "tool result read_file" in out and "contents!" in out
    assert "tool error read_file" in out and "refused: outside" in out
    assert "[output above retracted: steered]" in out
    assert lines[-1] == "tokens: 1 in · 2 out · cost $0 (local)"


def test_long_tool_output_is_cut_in_the_panel() -> None:
    console = recording_console()
    TurnRenderer(console).tool_result(
        Messages.ToolResult(tool_call_id="c", name="t", content=TextContent("y" * 5000))
    )
    out = console.export_text()
    assert "more characters)" in out
    assert out.count("y") < 1000


def test_render_records_hides_retracted_messages() -> None:
    gone = Messages.Assistant(model="m", content=TextContent("withdrawn text"))
    early = Messages.Assistant(model="m", content=TextContent("partial"))
    final = msgspec.structs.replace(early, content=TextContent("partial, then complete"))
    records = [
        SessionRecord.Conversation(message=Messages.user("first prompt")),
        SessionRecord.Conversation(message=gone),
        SessionRecord.Retracted(reason="vacuous", message_ids=[gone.id]),
        SessionRecord.Conversation(message=Messages.Assistant(model="m", content=TextContent("kept answer"))),
        SessionRecord.Conversation(message=early),
        SessionRecord.Conversation(message=final),  # the same id again: the later version wins
        SessionRecord.Summary(message_count=2, usage=TokenSnapshot(input=3, output=4, total_tokens=7)),
    ]
    console = recording_console()
    assert render_records(console, records) == 3
    out = console.export_text()
    assert out.count("partial") == 1 and "partial, then complete" in out
    assert "you> first prompt" in out and "assistant> kept answer" in out
    assert "withdrawn text" not in out
    assert "tokens: 3 in · 4 out" in out


# ---------------------------------------------------------------------------------------------
# session index


def _session(store: InMemorySessionStore, script: list, prompt: str) -> str:
    s = AgentSession.builder(ScriptedModel(script)).with_store(store).build()
    s.run_turn(prompt)
    return str(s.session_id)


def test_session_index_and_prefix_resolution() -> None:
    store = InMemorySessionStore()
    a = _session(store, [say("one")], "first   prompt\nwith lines")
    b = _session(store, [say("two")], "second")
    rows = describe_sessions(store)
    assert [r.session_id for r in rows] == [b, a]  # most recently updated first
    assert rows[1].first_prompt == "first prompt"  # the session's title: its first line, spaces folded
    assert rows[1].message_count == 2
    assert rows[0].updated is not None and rows[0].updated >= rows[1].updated  # type: ignore[operator]
    lines = session_table(rows, width=80)
    assert lines[0].startswith("ID") and b in lines[1] and "second" in lines[1]
    assert describe_sessions(store, limit=1)[0].session_id == b
    assert resolve_session_id(store, a) == a
    common = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
    assert resolve_session_id(store, a[: common + 1]) == a  # the shortest unique prefix
    with pytest.raises(ConfigurationError, match="no stored session"):
        resolve_session_id(store, "zzz")
    with pytest.raises(ConfigurationError, match="ambiguous"):
        resolve_session_id(store, a[:common])


# ---------------------------------------------------------------------------------------------
# chat event handling and the worker-thread hand-off


def _setup(session: AgentSession, questions: QuestionBox | None = None) -> SessionSetup:
    return SessionSetup(session, LOCAL, session.store, False, questions or QuestionBox(lambda _: False))


def test_chat_handle_event_renders_a_whole_turn() -> None:
    model = ScriptedModel(
        [[think("pondering"), say("Let me look."), call("echo", {"text": "hi"})], say("It says hi.")],
        chunk_mode="delta",
    )

    def echo(text: str) -> str:
        """Echo the text back.

        Args:
            text: what to echo.
        """
        return f"echo: {text}"

    session = AgentSession.builder(model).with_tools(echo).with_store(InMemorySessionStore()).build()
    console = recording_console()
    app = ChatApp(_setup(session), console)
    runner = TurnRunner(session, app.handle_event, on_line=None)
    runner.run(lambda: session.run_turn_stream("go").events())
    assert runner.error is None and not runner.interrupted
    out = console.export_text()
    assert "pondering" in out
    assert "Let me look." in out
    assert "tool call echo" in out and "tool result echo" in out and "echo: hi" in out
    assert "It says hi." in out
    assert "tokens: " in out and "cost $0 (local)" in out


def test_chat_failed_turn_is_shown_and_session_survives() -> None:
    from foundation_ai.agentic import fail

    model = ScriptedModel([fail("HTTP 500: server exploded"), say("fine now")])
    session = AgentSession.builder(model).with_store(InMemorySessionStore()).build()
    console = recording_console()
    app = ChatApp(_setup(session), console)
    TurnRunner(session, app.handle_event).run(lambda: session.run_turn_stream("a").events())
    TurnRunner(session, app.handle_event).run(lambda: session.run_turn_stream("b").events())
    out = console.export_text()
    assert "error: HTTP 500: server exploded" in out
    assert "fine now" in out


def test_chat_on_line_steers_follows_up_and_aborts() -> None:
    calls: list[tuple[str, str]] = []

    class FakeSession:
        session_id = "s"

        def steer(self, m: Any) -> None:
            # the user's own words: a user message (shown as the user's in /history)
            assert isinstance(m, UserMessage) and m.role == MessageRole.User, m
            calls.append(("steer", m.text()))

        def follow_up(self, m: str) -> None:
            calls.append(("follow_up", m))

        def abort(self) -> None:
            calls.append(("abort", ""))

    console = recording_console()
    app = ChatApp(SessionSetup(FakeSession(), LOCAL, None, False), console)
    app.on_line("/steer  be brief ")
    app.on_line("and then this")
    app.on_line("/steer")
    app.on_line("/abort")
    app.on_line("/what")
    app.on_line("/exit")
    assert calls == [("steer", "be brief"), ("follow_up", "and then this"), ("abort", ""), ("abort", "")]
    assert app.exit_requested
    out = console.export_text()
    assert "steering: be brief" in out and "queued as a follow-up: and then this" in out
    assert "usage: /steer TEXT" in out and "not /what" in out


@pytest.mark.parametrize(
    ("answer", "ran"), [("y\n", True), ("yes\n", True), ("n\n", False), ("\n", False), ("", False)]
)
def test_shell_question_is_answered_on_the_main_thread(tmp_path: Path, answer: str, ran: bool) -> None:
    """The shell tool runs in the agent's worker thread; its y/N question is asked and answered
    by the runner on the calling thread, reading the given stdin."""
    r_fd, w_fd = os.pipe()
    os.write(w_fd, answer.encode())
    os.close(w_fd)
    stdin = os.fdopen(r_fd, "r")
    prompts = open(tmp_path / "prompts.txt", "w+")  # noqa: SIM115
    questions = QuestionBox(lambda _: False)
    tools = shell_tools(tmp_path, confirm=lambda c: questions.ask(f"run {c!r}?"))
    model = ScriptedModel([call("run_command", {"command": "touch made.txt"}), say("done")])
    session = AgentSession.builder(model).with_tools(tools).with_store(InMemorySessionStore()).build()
    results = []

    def handle(ev: object) -> None:
        from foundation_ai.agentic import TurnEvent

        if isinstance(ev, TurnEvent.ToolResult):
            results.append(ev.result)

    runner = TurnRunner(session, handle, questions=questions, stdin=stdin, prompt_out=prompts)
    runner.run(lambda: session.run_turn_stream("go").events())
    stdin.close()
    prompts.seek(0)
    assert "run 'touch made.txt'? [y/N]" in prompts.read()
    assert (tmp_path / "made.txt").exists() is ran
    assert len(results) == 1
    assert (results[0].error_detail is None) is ran
    if not ran:
        assert "declined" in results[0].error_detail


def test_is_yes() -> None:
    assert is_yes("y") and is_yes(" YES ") and not is_yes("") and not is_yes("no") and not is_yes("yep")


def test_files_tools_are_agent_tools(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha", encoding="utf-8")
    tools = files_tools(tmp_path)
    names = [t.definition.name for t in tools]
    assert names == ["read_file", "write_file", "edit_file", "list_dir"]
    schema = tools[2].definition.arguments.schema
    assert set(schema["required"]) == {"path", "old", "new"}
    model = ScriptedModel(
        [[call("read_file", {"path": "a.txt"}), call("read_file", {"path": "../../etc/passwd"})], say("ok")]
    )
    session = AgentSession.builder(model).with_tools(tools).with_store(InMemorySessionStore()).build()
    turn = session.run_turn("read")
    ok, refused = turn.tool_results()
    assert ok.error_detail is None and ok.content == TextContent("alpha")
    assert refused.error_detail is not None and "outside the root directory" in refused.error_detail


def test_setup_namespace_defaults() -> None:
    a = build_parser().parse_args(["chat"])
    assert isinstance(a, argparse.Namespace)
    assert a.session is None and a.tools == [] and a.db is None and a.shell_timeout == 30.0


def test_ctrl_c_during_a_slow_tool_aborts_and_keeps_the_session() -> None:
    """A SIGINT on the main thread while the worker runs a slow tool: the runner calls abort(),
    the turn ends as Aborted with every tool call paired with a result, and the session takes
    another turn."""
    import signal
    import threading
    import time

    from foundation_ai.agentic import TurnEvent, TurnOutcome
    from foundation_ai.agentic.stores import conversation_of

    started = threading.Event()

    def slow() -> str:
        """Take a while."""
        started.set()
        time.sleep(1.5)
        return "slow result"

    model = ScriptedModel([call("slow", {}), say("never reached"), say("second turn")])
    session = AgentSession.builder(model).with_tools(slow).with_store(InMemorySessionStore()).build()
    events: list[object] = []
    notices: list[str] = []
    runner = TurnRunner(session, events.append, on_interrupt=lambda: notices.append("interrupted"))

    def press_ctrl_c() -> None:
        started.wait(10)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    runner.run(lambda: session.run_turn_stream("go").events())
    assert runner.interrupted and runner.interrupts == 1 and notices == ["interrupted"]
    assert runner.error is None
    end = events[-1]
    assert isinstance(end, TurnEvent.Done) and end.summary.outcome is TurnOutcome.Aborted
    assert not any(isinstance(e, TurnEvent.Text) and "never reached" in e.text for e in events)
    messages = conversation_of(session.history())
    calls = [m for m in messages if isinstance(getattr(m, "content", None), ToolCall)]
    results = [m for m in messages if isinstance(m, Messages.ToolResult)]
    assert {c.content.id for c in calls} == {r.tool_call_id for r in results}  # type: ignore[attr-defined]
    # the session goes on
    later: list[object] = []
    TurnRunner(session, later.append).run(lambda: session.run_turn_stream("again").events())
    assert isinstance(later[-1], TurnEvent.Done) and later[-1].summary.outcome is TurnOutcome.Completed


# ---------------------------------------------------------------------------------------------
# setup_session and cmd_run in-process, on a ScriptedModel


class Scripted:
    """The script the CLI's model will play, and the models it made."""

    def __init__(self) -> None:
        self.script: list = []
        self.models: list[ScriptedModel] = []


@pytest.fixture()
def scripted(monkeypatch: pytest.MonkeyPatch) -> Scripted:
    """Make the CLI load a ScriptedModel playing ``scripted.script`` instead of a backend."""
    from foundation_ai._cli import commands

    box = Scripted()

    def fake_load(choice: ModelChoice) -> ScriptedModel:
        m = ScriptedModel(list(box.script), chunk_mode="delta")
        box.models.append(m)
        return m

    monkeypatch.setattr(commands, "load_model", fake_load)
    return box


def test_setup_session_applies_the_options(scripted: Scripted, tmp_path: Path) -> None:
    from foundation_ai._cli.commands import setup_session

    scripted.script.append(say("ok"))
    args = build_parser().parse_args(
        ["run", "hi", "--system", "Be brief.", "--max-tokens", "7", "--temperature", "0.2", "--seed", "5",
         "--tools", "files,shell", "--root", str(tmp_path), "--tool-choice", "list_dir", "--db",
         str(tmp_path / "s.db")]
    )  # fmt: skip
    setup = setup_session(args)
    s = setup.session
    assert s.system_prompt == "Be brief."
    assert (s.params.max_tokens, s.params.temperature, s.params.seed) == (7, 0.2, 5)
    assert s.registry.names() == ["read_file", "write_file", "edit_file", "list_dir", "run_command"]
    assert s.tool_choice == ToolChoice.Function("list_dir")
    assert "files (inside" in setup.tools and "asks before each command" in setup.tools
    s.run_turn("hi")
    interaction = scripted.models[0].interactions[0]
    assert interaction.system_prompt == "Be brief."
    s.close()


def test_cmd_run_drops_retracted_output(
    scripted: Scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A vacuous first answer is retracted by the loop and retried: `run` (stdout not a
    terminal) prints only the real answer."""
    from foundation_ai._cli.commands import cmd_run

    scripted.script.extend([say("..."), say("The real answer.")])
    args = build_parser().parse_args(["run", "question", "--db", str(tmp_path / "s.db")])
    assert cmd_run(args) == 0
    out = capsys.readouterr()
    assert out.out == "The real answer.\n"
    assert "tokens: " in out.err


def test_cmd_run_failed_turn_exit_1(
    scripted: Scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from foundation_ai._cli.commands import cmd_run

    scripted.script.append(fail("HTTP 401: invalid api key"))
    args = build_parser().parse_args(["run", "question", "--db", str(tmp_path / "s.db")])
    assert cmd_run(args) == 1
    err = capsys.readouterr().err
    assert "foundation-ai: error: HTTP 401: invalid api key" in err.splitlines()


def test_sessions_json_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from foundation_ai._cli.commands import cmd_sessions
    from foundation_ai.agentic import SqliteSessionStore

    db = tmp_path / "s.sqlite3"
    store = SqliteSessionStore(db)
    session = AgentSession.builder(ScriptedModel([say("hello there")])).with_store(store).build()
    session.run_turn("greet me")
    session.close()
    assert cmd_sessions(build_parser().parse_args(["sessions", "--json", "--db", str(db)])) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 1
    assert rows[0]["session_id"] == session.session_id
    assert rows[0]["message_count"] == 2 and rows[0]["first_prompt"] == "greet me"
    assert rows[0]["updated"].endswith("Z")
    assert cmd_sessions(build_parser().parse_args(["sessions", "--db", str(db)])) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:2] == ["ID", "UPDATED"] and session.session_id in table[1]


def test_cmd_run_prints_each_output_as_a_paragraph(
    scripted: Scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Text before a tool call and the final answer are separate outputs: one line each."""
    from foundation_ai._cli.commands import cmd_run

    scripted.script.extend([[say("Let me list."), call("list_dir", {})], say("There is a.txt.")])
    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    args = build_parser().parse_args(
        ["run", "what is here?", "--tools", "files", "--root", str(tmp_path), "--db", str(tmp_path / "s.db")]
    )
    assert cmd_run(args) == 0
    out = capsys.readouterr()
    assert out.out == "Let me list.\nThere is a.txt.\n"
    assert "tool call list_dir" in out.err and "tool result list_dir" in out.err and "a.txt" in out.err


# ---------------------------------------------------------------------------------------------
# tester's defects (show wrapping, cost display)


def test_show_to_a_file_does_not_hard_wrap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tester defect 4: `foundation-ai show ID > file` wrapped lines at 80 columns. When stdout
    is not a terminal, every line written is one of the content's own lines."""
    from foundation_ai._cli.commands import cmd_show
    from foundation_ai.agentic import SqliteSessionStore

    monkeypatch.setenv("COLUMNS", "80")
    long_prompt = " ".join(f"word{i}" for i in range(60))  # ~430 characters, one line
    long_answer = "An answer that goes on. " * 30 + "The end."
    db = tmp_path / "s.sqlite3"
    session = (
        AgentSession.builder(ScriptedModel([say(long_answer)])).with_store(SqliteSessionStore(db)).build()
    )
    session.run_turn(long_prompt)
    session.close()
    assert cmd_show(build_parser().parse_args(["show", str(session.session_id), "--db", str(db)])) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"you> {long_prompt}" in lines
    assert f"assistant> {long_answer}" in lines
    assert "\x1b[" not in "".join(lines)  # no colour codes in a file


def test_cost_is_shown_alike_in_run_chat_and_show() -> None:
    """Tester defect 7: a local turn's cost read `$0 (local)` in run/chat but `$0.000000` in
    show; and an unpriced model's turn read `n/a` in run/chat but `$0.000000` in show. The
    transcript's usage line now matches the live one: `$0 (local)` when the turn's model ran
    in-process (provider llamacpp), `n/a` when nothing was charged and no answer of the turn had
    a known price, the stored USD figure otherwise (also a priced turn that cost $0)."""
    from foundation_ai.types import CostStatus, UsageCosting, UsageReport

    usage = TokenSnapshot(input=10, output=5, total_tokens=15, cost_usd=0.0)
    charged = TokenSnapshot(input=10, output=5, total_tokens=15, cost_usd=0.0125)

    class S:
        pass

    S.usage = usage  # type: ignore[attr-defined]
    live = usage_line(S(), LOCAL)

    class Unpriced:
        class descriptor:  # the shape of a model's descriptor
            input_price = None

    local_answer = Messages.Assistant(model="smollm2", content=TextContent("hi"), provider="llamacpp")
    unpriced_answer = Messages.Assistant(model="my-model", content=TextContent("hi"), provider="openai")
    estimated = UsageReport(input=10, output=5, cost=UsageCosting(status=CostStatus.Estimated))
    priced_free = Messages.Assistant(
        model="gpt", content=TextContent("hi"), provider="openai", usage=estimated
    )
    records = [
        SessionRecord.Conversation(message=Messages.user("a")),
        SessionRecord.Conversation(message=local_answer),
        SessionRecord.Summary(message_count=2, usage=usage),
        SessionRecord.Conversation(message=Messages.user("b")),
        SessionRecord.Conversation(message=unpriced_answer),
        SessionRecord.Summary(message_count=2, usage=usage),
        SessionRecord.Conversation(message=Messages.user("c")),
        SessionRecord.Conversation(message=priced_free),
        SessionRecord.Summary(message_count=2, usage=usage),
        SessionRecord.Conversation(message=Messages.user("d")),
        SessionRecord.Conversation(message=unpriced_answer),
        SessionRecord.Summary(message_count=2, usage=charged),  # an earlier turn was charged
    ]
    console = recording_console()
    render_records(console, records)
    usage_lines = [ln for ln in console.export_text().splitlines() if ln.startswith("tokens:")]
    assert usage_lines[:2] == [live, usage_line(S(), ModelChoice("openai", "my-model"), Unpriced())]
    assert usage_lines == [
        "tokens: 10 in · 5 out · cost $0 (local)",
        "tokens: 10 in · 5 out · cost n/a",
        "tokens: 10 in · 5 out · cost $0.000000",
        "tokens: 10 in · 5 out · cost $0.012500",
    ]


def test_run_json_into_a_closed_pipe_aborts_quietly_exit_141(
    scripted: Scripted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tester defect 5: `run --json | head -1` exited 1 silently with the turn left running. The
    first write to the closed pipe aborts the turn (no further model call), the command exits
    141 without a message, and the store holds a consistent turn (every call has its result)."""
    from foundation_ai._cli.commands import EXIT_BROKEN_PIPE, cmd_run
    from foundation_ai.agentic import SqliteSessionStore
    from foundation_ai.agentic.stores import conversation_of

    scripted.script.extend([call("list_dir", {}), say("never generated")])
    # (the first event may come before the first model call: then none is made)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line
    pipe_out = os.fdopen(write_end, "w")
    monkeypatch.setattr("sys.stdout", pipe_out)
    db = tmp_path / "s.db"
    args = build_parser().parse_args(
        ["run", "list", "--json", "--tools", "files", "--root", str(tmp_path), "--db", str(db)]
    )
    try:
        assert cmd_run(args) == EXIT_BROKEN_PIPE == 141
    finally:
        pipe_out.close()  # its fd now points at /dev/null: closing is quiet
    assert capsys.readouterr().err == ""
    assert len(scripted.models[0].interactions) <= 1  # aborted at the first event: no second model call
    store = SqliteSessionStore(db)
    (session_id,) = store.sessions()
    messages = conversation_of(store.load(session_id))
    store.close()
    calls = [m for m in messages if isinstance(getattr(m, "content", None), ToolCall)]
    results = [m for m in messages if isinstance(m, Messages.ToolResult)]
    assert {c.content.id for c in calls} == {r.tool_call_id for r in results}  # type: ignore[attr-defined]
    assert isinstance(messages[0], Messages.User) and messages[0].content == TextContent("list")
    assert not any("never generated" in str(getattr(m, "content", "")) for m in messages)


def test_sessions_into_a_closed_pipe_exits_141_quietly(tmp_path: Path) -> None:
    """A closed stdout in any command (`sessions | head -1`) ends it quietly with 141."""
    import subprocess
    import sys

    from foundation_ai.agentic import SqliteSessionStore

    db = tmp_path / "s.db"
    store = SqliteSessionStore(db)
    for i in range(300):
        AgentSession.builder(ScriptedModel([say("ok")])).with_store(store).build().run_turn(f"prompt {i}")
    store.close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "foundation_ai", "sessions", "--limit", "300", "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().split()[:2] == [b"ID", b"UPDATED"]
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert err == b""


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--temperature", "-3"], "argument --temperature: must be a number >= 0, got -3"),
        (["--temperature", "nan"], "argument --temperature: must be a number >= 0, got nan"),
        (["--shell-timeout", "-1"], "argument --shell-timeout: must be a number of seconds > 0, got -1"),
        (["--shell-timeout", "0"], "argument --shell-timeout: must be a number of seconds > 0, got 0"),
        (["--max-tokens", "0"], "argument --max-tokens: must be a positive integer, got 0"),
        (["--max-tokens", "many"], "argument --max-tokens: must be a positive integer, got 'many'"),
        (["-m", "openai:x", "--base-url", "notaurl"], "argument --base-url: 'notaurl' is not an http(s) URL"),
        (
            ["-m", "openai:x", "--base-url", "ftp://h/"],
            "argument --base-url: 'ftp://h/' is not an http(s) URL",
        ),
        (
            ["-m", "openai:x", "--base-url", "http://h:99999"],
            "argument --base-url: 'http://h:99999' has a bad port",
        ),
        (
            ["-m", "openai:x", "--base-url", "http://127.0.0.1:9/v1?api-version=1"],
            "argument --base-url: 'http://127.0.0.1:9/v1?api-version=1' has a query or fragment",
        ),
        (
            ["-m", "openai:x", "--base-url", "http://127.0.0.1:9/v1#frag"],
            "argument --base-url: 'http://127.0.0.1:9/v1#frag' has a query or fragment",
        ),
    ],
)
def test_invalid_option_values_are_one_line_usage_errors(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tester defect 6: bad values were accepted (or `--base-url notaurl` failed later with
    exit 1 "cannot reach"); each is now a one-line usage error, exit 2, naming the value."""
    from foundation_ai.cli import main

    for command in ("run", "chat"):
        args = [command, "hi", *argv] if command == "run" else [command, *argv]
        with pytest.raises(SystemExit) as exc:
            main(args)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert (
            err.startswith(f"foundation-ai: error: {needle}")
            and f"(see: foundation-ai {command} --help)" in err
        )


def test_base_url_checked_by_the_library_too() -> None:
    with pytest.raises(ConfigurationError, match="--base-url 'notaurl' is not an http"):
        parse_model_spec("openai:x", "notaurl")


def test_help_documents_root_db_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """Tester defects 5, 6, 8: --help says the shell tool is not confined to --root, that --db
    creates missing directories, and what exit 141 means."""
    from foundation_ai.cli import main

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "shell commands are not confined to it" in text
    assert "missing parent directories are created" in text
    assert "141 stdout was closed early" in text
    assert "root directory of the files and shell tools" not in text


def test_ctrl_d_during_a_turn_ends_the_chat_after_the_turn() -> None:
    """Tester defect 7: Ctrl-D pressed during a turn was swallowed. On a real pseudo-terminal,
    Ctrl-D typed while the turn runs lets the turn complete (not aborted), tells the user, and
    makes the chat end once the turn is done."""
    import pty
    import termios

    from foundation_ai.agentic import TurnEvent, TurnOutcome, pause

    model = ScriptedModel([[say("slow "), pause(2.0), say("answer")]], chunk_mode="delta")
    session = AgentSession.builder(model).with_store(InMemorySessionStore()).build()
    console = recording_console()
    app = ChatApp(_setup(session), console)
    master, slave = pty.openpty()
    assert termios.tcgetattr(slave)[3] & termios.ICANON  # canonical mode: ^D at a line start is EOF
    tty_in = os.fdopen(slave, "r")
    try:
        os.write(master, termios.tcgetattr(slave)[6][termios.VEOF])  # the user presses Ctrl-D
        events: list[object] = []

        def handle(event: object) -> None:
            events.append(event)
            app.handle_event(event)

        runner = TurnRunner(session, handle, on_line=app.on_line, on_eof=app.on_eof, stdin=tty_in)  # type: ignore[arg-type]
        runner.run(lambda: session.run_turn_stream("go").events())
    finally:
        tty_in.close()
        os.close(master)
    assert runner.eof and app.exit_requested and not runner.interrupted
    end = events[-1]
    assert isinstance(end, TurnEvent.Done) and end.summary.outcome is TurnOutcome.Completed
    out = console.export_text()
    assert "slow" in out and "answer" in out
    assert "Ctrl-D: the chat ends when this turn is done" in out


def test_base_url_password_never_shown_in_cli_errors() -> None:
    """A password in --base-url (userinfo) is masked in both the usage and the unreachable errors."""
    from foundation_ai._cli.model_choice import check_base_url, check_reachable
    from foundation_ai.errors import ProviderError

    with pytest.raises(ConfigurationError) as bad:
        check_base_url("ftp://user:sk-SECRET@127.0.0.1:9/v1")
    assert "sk-SECRET" not in str(bad.value) and "***@127.0.0.1" in str(bad.value)
    with pytest.raises(ProviderError) as unreachable:
        check_reachable("http://user:sk-SECRET@127.0.0.1:9/v1", timeout=1.0)
    assert "sk-SECRET" not in str(unreachable.value) and "***@127.0.0.1" in str(unreachable.value)


class _LateStore(InMemorySessionStore):
    """Calls ``late(session)`` once, when a turn's ``Summary`` is written: after the turn took
    its last follow-ups and steering, before it ends (where a late /steer lands)."""

    def __init__(self, late: Any) -> None:
        super().__init__()
        self.late = late

    def append(self, session_id: str, records: Any, header: Any = None) -> None:
        super().append(session_id, records, header)
        if self.late is not None and any(isinstance(r, SessionRecord.Summary) for r in records):
            late, self.late = self.late, None
            late()


def test_chat_sends_a_steer_that_arrives_as_the_turn_ends_instead_of_holding_it() -> None:
    seen: list[list[str]] = []

    def answer(inter: Any) -> Any:
        seen.append([m.text() or "" for m in inter.messages])
        return say(f"answer {len(seen)}")

    holder: dict[str, AgentSession] = {}
    store = _LateStore(lambda: (holder["s"].steer("be brief"), holder["s"].follow_up("and this")))
    session = AgentSession.builder(ScriptedModel([answer] * 3)).with_store(store).build()
    holder["s"] = session
    console = recording_console()
    app = ChatApp(_setup(session), console)
    app.turn("hello")
    assert len(seen) == 2, "the late messages were sent as a turn of their own at once"
    assert seen[1][-2:] == ["and this", "be brief"]
    out = console.export_text()
    assert "the turn ended first; sending now: and this / be brief" in out
    assert "answer 1" in out and "answer 2" in out
    assert session.steering.idle(), "nothing left waiting for the next message"
    app.turn("next")
    assert seen[2][-1] == "next" and seen[2].count("be brief") == 1, "not sent twice"


def test_chat_ending_reports_a_late_steer_as_not_sent() -> None:
    holder: dict[str, AgentSession] = {}
    store = _LateStore(lambda: holder["s"].steer("too late"))
    session = AgentSession.builder(ScriptedModel([say("done")] * 2)).with_store(store).build()
    holder["s"] = session
    console = recording_console()
    app = ChatApp(_setup(session), console)
    app.exit_requested = True  # e.g. Ctrl-D during the turn
    app.turn("hello")
    assert "not sent (the turn ended first): too late" in console.export_text()
    assert len(session.messages) == 2, "no second turn"
