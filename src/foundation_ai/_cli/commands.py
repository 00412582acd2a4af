"""The CLI's commands: ``run``, ``chat``, ``sessions``, ``show`` (parsing lives in
:mod:`foundation_ai.cli`).

Each ``cmd_*`` takes the parsed ``argparse.Namespace`` and returns an exit status; configuration
problems raise :class:`~foundation_ai.errors.ConfigurationError` (exit 2) and the entry point
prints them as one line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..backends._http import mask_url
from ..errors import ConfigurationError
from ..types import ModelParams, to_json
from .builtin_tools import files_tools, shell_tools
from .model_choice import ModelChoice, check_reachable, load_model, parse_model_spec
from .render import TurnRenderer, format_usage, make_console, render_records
from .session_index import SessionInfo, describe_sessions, resolve_session_id
from .turns import QuestionBox, TurnRunner

__all__ = [
    "EXIT_BROKEN_PIPE",
    "SessionSetup",
    "cmd_chat",
    "cmd_run",
    "cmd_sessions",
    "cmd_show",
    "failure_message",
    "open_store",
]

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
EXIT_BROKEN_PIPE = 141
"""stdout was closed by its reader (``| head``): 128 + SIGPIPE, what a shell reports for a Unix
tool ended by a closed pipe."""


def silence_stdout() -> None:
    """Point stdout's file descriptor at ``/dev/null`` after its reader went away, so output
    still buffered (and the interpreter's final flush) goes nowhere instead of raising
    ``BrokenPipeError`` again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def open_store(path: str | None) -> Any:
    """The SQLite session store at ``path`` (default: the agent layer's default file)."""
    from ..agentic import SqliteSessionStore

    try:
        return SqliteSessionStore(path)
    except Exception as exc:  # sqlite3.Error, OSError: an unusable path
        raise ConfigurationError(f"cannot open the session store {path or '(default)'}: {exc}") from None


def _params(args: argparse.Namespace) -> ModelParams | None:
    changes: dict[str, Any] = {}
    if args.max_tokens is not None:
        changes["max_tokens"] = args.max_tokens
    if args.temperature is not None:
        changes["temperature"] = args.temperature
    if args.seed is not None:
        changes["seed"] = args.seed
    return ModelParams(**changes) if changes else None


def _decline(command: str) -> bool:
    return False


@dataclass
class SessionSetup:
    """What ``chat`` and ``run`` build from their options."""

    session: Any
    choice: ModelChoice
    store: Any
    resumed: bool
    questions: QuestionBox = field(default_factory=lambda: QuestionBox(_decline))
    tools: str = ""
    """A one-line description of the built-in tools on offer (``""``: none)."""


def setup_session(args: argparse.Namespace) -> SessionSetup:
    """Build the ``AgentSession`` described by the options (model, tools, params, store, resume).

    Every option is checked before the model is loaded, so a mistake costs no loading time.

    Raises:
        ConfigurationError: a bad model spec, a missing key, an unknown session, a bad root or
            ``--tool-choice``.
    """
    from ..agentic import AgentSession

    choice = parse_model_spec(args.model, args.base_url)
    store = open_store(args.db)
    session_id = resolve_session_id(store, args.session) if args.session else None
    questions = QuestionBox(_decline)
    tools, described = _builtin_tools(args, questions)
    tool_choice = None
    if args.tool_choice:
        tool_choice = parse_tool_choice(args.tool_choice)
        offered = [t.definition.name for t in tools]
        name = getattr(tool_choice, "name", None)
        if name is not None and name not in offered:
            raise ConfigurationError(
                f"--tool-choice {name}: no such tool on offer ({', '.join(offered) or 'none; add --tools'})"
            )
    model = load_model(choice)
    builder = AgentSession.builder(model).with_store(store).with_tools(tools)
    if args.system:
        builder = builder.with_system_prompt(args.system)
    params = _params(args)
    if params is not None:
        builder = builder.with_params(params)
    if tool_choice is not None:
        builder = builder.with_tool_choice(tool_choice)
    session = builder.resume(session_id) if session_id else builder.build()
    return SessionSetup(session, choice, store, session_id is not None, questions, ", ".join(described))


def _builtin_tools(args: argparse.Namespace, questions: QuestionBox) -> tuple[list[Any], list[str]]:
    """The ``--tools`` sets as agent tools, and a description of each set for the banner."""
    tool_sets = list(dict.fromkeys(args.tools))
    if tool_sets and args.root and not os.path.isdir(args.root):
        raise ConfigurationError(f"--root {args.root}: not a directory")
    root = os.path.abspath(args.root or os.getcwd())
    tools: list[Any] = []
    described: list[str] = []
    if "files" in tool_sets:
        tools += files_tools(root)
        described.append(f"files (inside {root})")
    if "shell" in tool_sets:

        def confirm(command: str) -> bool:
            return questions.ask(f"run shell command: {command}  ?")

        tools += shell_tools(root, confirm=None if args.yes else confirm, timeout=args.shell_timeout)
        described.append(
            f"shell in {root} ({'runs without asking' if args.yes else 'asks before each command'})"
        )
    return tools, described


def parse_tool_choice(text: str) -> Any:
    """``--tool-choice``: ``auto``, ``none``, ``required`` or a tool name, as a ``ToolChoice``."""
    from ..types import ToolChoice

    key = text.strip()
    fixed = {"auto": ToolChoice.Auto, "none": ToolChoice.None_, "required": ToolChoice.Required}
    if key.lower() in fixed:
        return fixed[key.lower()]()
    return ToolChoice.Function(key)


def failure_message(error: Any, choice: ModelChoice) -> str:
    """One line for a failed turn: the ``AgenticError`` message, with the server named when it
    could not be reached."""
    message = " ".join(str(getattr(error, "message", error)).split()) or "the turn failed"
    if "connection failed" in message or "ConnectError" in message:
        where = mask_url(choice.base_url) if choice.base_url else f"the {choice.kind} API"
        return f"cannot reach {where}: {message}"
    return message


def usage_line(summary: Any, choice: ModelChoice, model: Any = None) -> str:
    """The line printed after each turn: tokens in/out and cost (USD): ``$0 (local)`` for
    in-process models, ``n/a`` when nothing was charged and ``model``'s descriptor knows no price
    (e.g. an unknown model behind ``--base-url``)."""
    u = summary.usage
    if choice.kind in ("local", "gguf"):
        return format_usage(u.input, u.output, None, u.cache_read, u.cache_write, local=True)
    descriptor = getattr(model, "descriptor", None)
    unpriced = descriptor is not None and getattr(descriptor, "input_price", None) is None
    cost = None if (unpriced and not u.cost_usd) else u.cost_usd
    return format_usage(u.input, u.output, cost, u.cache_read, u.cache_write)


# ---------------------------------------------------------------------------------------------
# run


class _RunOutput:
    """Collects a ``run`` turn: the answer text per output (retractions drop outputs) and the end.

    When stdout's reader goes away (``run --json | head -1``), the first failed write calls
    ``abort`` so the turn ends as ``Aborted`` (stored as such), and the rest of the turn is
    consumed without output.
    """

    def __init__(
        self, json_lines: bool, stream_text: bool, err: TurnRenderer, abort: Callable[[], None] = lambda: None
    ) -> None:
        self.json_lines = json_lines
        self.stream_text = stream_text
        self.err = err
        self.abort = abort
        self.pieces: dict[str, list[str]] = {}
        self.terminal: Any = None
        self.stdout_closed = False
        """stdout's reader went away: nothing more is printed, the turn was aborted."""

    def _write(self, text: str) -> None:
        if self.stdout_closed:
            return
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            self.stdout_closed = True
            silence_stdout()
            self.abort()

    def handle(self, event: Any) -> None:
        from ..agentic import TurnEvent

        if isinstance(event, TurnEvent.Failed | TurnEvent.Done):
            self.terminal = event
        if self.json_lines:
            self._write(to_json(event).decode("utf-8") + "\n")
        if isinstance(event, TurnEvent.Text):
            self.pieces.setdefault(event.message_id, []).append(event.text)
            if self.stream_text and not self.json_lines:
                self._write(event.text)
        if self.stdout_closed:
            return
        if isinstance(event, TurnEvent.Retract):
            for mid in event.message_ids:
                self.pieces.pop(mid, None)
            if self.stream_text and not self.json_lines:
                self.err.retract(event.reason)
        elif self.json_lines:
            pass
        elif isinstance(event, TurnEvent.Thinking):
            self.err.thinking(event.text, event.message_id)
        elif isinstance(event, TurnEvent.ToolCall):
            self.err.tool_call(event.call)
        elif isinstance(event, TurnEvent.ToolResult):
            self.err.tool_result(event.result)

    def answer(self) -> str:
        """The turn's text, one output per paragraph (retracted outputs left out)."""
        texts = ("".join(p).strip("\n") for p in self.pieces.values())
        return "\n".join(t for t in texts if t)


def cmd_run(args: argparse.Namespace) -> int:
    """``foundation-ai run PROMPT``: one turn. Prints the answer on stdout (streamed when stdout
    is a terminal, else once complete so retracted output never shows), tool activity and the
    usage line on stderr; ``--json`` prints every ``TurnEvent`` as one JSON line on stdout.
    Exit 0 on success, 1 when the turn failed, 130 when interrupted, 141 (quietly) when stdout's
    reader went away (``| head -1``): the running turn is then aborted, so the store holds it
    as an ``Aborted`` turn with what it produced."""
    from ..agentic import TurnEvent, TurnOutcome

    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        raise ConfigurationError("the prompt is empty")
    setup = setup_session(args)
    err = TurnRenderer(make_console(stderr=True))
    out = _RunOutput(args.json, sys.stdout.isatty(), err, setup.session.abort)
    runner = TurnRunner(setup.session, out.handle, questions=setup.questions)
    try:
        runner.run(lambda: setup.session.run_turn_stream(prompt).events())
    finally:
        setup.session.close()
    if out.stdout_closed:  # `run --json | head -1`: the reader left; the turn was aborted
        return EXIT_BROKEN_PIPE
    if runner.error is not None:
        from ..cli import error_line

        print(error_line(f"{type(runner.error).__name__}: {runner.error}"), file=sys.stderr)
        return EXIT_FAILED
    end = out.terminal
    if not args.json:
        if out.stream_text:
            if out.pieces:
                out._write("\n")
        elif text := out.answer():
            out._write(text + "\n")
        if out.stdout_closed:
            return EXIT_BROKEN_PIPE
        if end is not None and (end.summary.usage.total_tokens or isinstance(end, TurnEvent.Done)):
            err.usage(usage_line(end.summary, setup.choice, setup.session.model))
    if isinstance(end, TurnEvent.Failed):
        from ..cli import error_line

        print(error_line(failure_message(end.error, setup.choice)), file=sys.stderr)
        return EXIT_FAILED
    if runner.interrupted or (end is not None and end.summary.outcome is TurnOutcome.Aborted):
        return EXIT_INTERRUPTED
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# sessions / show


def cmd_sessions(args: argparse.Namespace) -> int:
    """``foundation-ai sessions``: stored sessions, newest first (id, updated, messages, first
    prompt)."""
    store = open_store(args.db)
    try:
        rows = describe_sessions(store, limit=args.limit)
    finally:
        store.close()
    if args.json:
        for r in rows:
            row = {
                "session_id": r.session_id,
                "updated": r.updated.isoformat().replace("+00:00", "Z") if r.updated else None,
                "message_count": r.message_count,
                "first_prompt": r.first_prompt,
            }
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
        return EXIT_OK
    console = make_console()
    if not rows:
        console.print("no stored sessions")
        return EXIT_OK
    for line in session_table(rows, console.width if console.is_terminal else 10_000):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return EXIT_OK


def session_table(rows: list[SessionInfo], width: int = 100) -> list[str]:
    """The ``sessions`` listing as plain lines: a header, then one line per session (the first
    prompt cut to fit ``width`` characters)."""
    head = f"{'ID':<25}  {'UPDATED (UTC)':<19}  {'MSGS':>4}  FIRST PROMPT"
    lines = [head]
    room = max(30, width - 56)
    for r in rows:
        prompt = r.first_prompt if len(r.first_prompt) <= room else r.first_prompt[: room - 1] + "…"
        lines.append(f"{r.session_id:<25}  {r.updated_text:<19}  {r.message_count:>4}  {prompt}")
    return lines


def cmd_show(args: argparse.Namespace) -> int:
    """``foundation-ai show ID``: a stored session's transcript (``--json``: its records as JSON
    lines)."""
    store = open_store(args.db)
    try:
        session_id = resolve_session_id(store, args.session_id)
        records = store.load(session_id)
    finally:
        store.close()
    if args.json:
        for rec in records:
            sys.stdout.write(to_json(rec).decode("utf-8") + "\n")
        return EXIT_OK
    console = make_console()  # `show ID > file`: the content's own lines, no hard wrapping
    console.print(f"[bold]session {session_id}[/bold]")
    render_records(console, records)
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# chat


def cmd_chat(args: argparse.Namespace) -> int:
    """``foundation-ai chat``: the interactive loop (see :mod:`foundation_ai._cli.chat`)."""
    from .chat import ChatApp

    if args.base_url:
        check_reachable(parse_model_spec(args.model, args.base_url).base_url or args.base_url)
    setup = setup_session(args)
    try:
        return ChatApp(setup).run()
    finally:
        setup.session.close()
