"""The CLI's commands: ``run``, ``chat``, ``sessions``, ``show`` (parsing lives in
:mod:`foundation_ai._cli.parser`; ``models`` and ``keys`` in :mod:`foundation_ai._cli.setup_commands`).

Each ``cmd_*`` takes the parsed ``argparse.Namespace`` and returns an exit status; configuration
problems raise :class:`~foundation_ai.errors.ConfigurationError` (exit 2) and the entry point
prints them as one line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._lazy import lazy_exports
from ..errors import ConfigurationError, FoundationAIError
from ..types import ModelParams, OutputFormat, to_json
from .config import KEY_ENV, PROVIDER_KEY, Config, load_config, read_keys
from .model_choice import ModelChoice, check_reachable, load_model, parse_model_spec
from .prompt_input import attachment_messages, parse_schema, read_prompt
from .run_output import RunOutput, answer_mode, silence_stdout
from .safe_text import visible_line
from .status import EXIT_BROKEN_PIPE, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, error_line
from .turns import QuestionBox, TurnRunner, shell_decision

if TYPE_CHECKING:
    from .report import failure_message, usage_line
    from .session_index import SessionInfo

# Imported where used: rich's renderers (``render``, ``report``), the built-in tools and the
# session index, so a piped ``run -q`` on the local model loads none of them (`bench/cold_run.py`).
_LAZY = {"failure_message": "report", "usage_line": "report"}

__all__ = [
    "EXIT_BROKEN_PIPE",
    "SessionSetup",
    "apply_config",
    "cmd_chat",
    "cmd_run",
    "cmd_sessions",
    "cmd_show",
    "failure_message",
    "open_store",
    "silence_stdout",
    "usage_line",
]


__getattr__ = lazy_exports(globals(), _LAZY, __package__)


def open_store(path: str | None, *, read_only: bool = False) -> Any:
    """The session store ``--db`` names (default: the agent layer's default file,
    ``sessions.sqlite3`` in ``$FOUNDATION_AI_HOME`` or the user data directory).

    ``path`` is a file path, a ``sqlite:///PATH`` URL or a ``postgresql://`` URL
    (:mod:`foundation_ai._cli.locations`). ``read_only`` (``sessions``, ``show``): the file is
    opened for reading only, so a store on a read-only disk or in a directory the user cannot
    write can still be listed and shown; the default file missing is an empty store (nothing is
    created), a ``--db`` file missing is an error.

    Raises:
        ConfigurationError: the store cannot be opened (one line naming the file; when its file
            or directory cannot be written, it says so); a read-only ``--db`` that does not exist.
    """
    from ..agentic import InMemorySessionStore, SqliteSessionStore
    from ..agentic.stores import default_store_path
    from .locations import require_existing, session_target

    if path is not None:
        target = session_target(path)
        if target.kind == "postgresql":
            return _postgres_store(target.location)
        if read_only:
            require_existing(target)
        file = target.location
    else:
        file = str(default_store_path())
    if read_only and file != ":memory:" and not os.path.exists(file):
        return InMemorySessionStore()
    try:
        return SqliteSessionStore(file, read_only=read_only)
    except Exception as exc:  # StoreError, OSError: an unusable path
        message = (
            str(exc) if isinstance(exc, FoundationAIError) else f"cannot open the session store {file}: {exc}"
        )
        if not read_only and _not_writable(file):
            message = (
                f"cannot open the session store {file!r}: the file or its directory is read-only"
                " (pick another with --db or FOUNDATION_AI_HOME)"
            )
        raise ConfigurationError(message) from None


def _postgres_store(url: str) -> Any:
    """A ``PostgresSessionStore`` at ``url``.

    Raises:
        ConfigurationError: psycopg is not installed, or the server cannot be reached.
    """
    try:
        from ..agentic.stores.postgres import PostgresSessionStore
    except ImportError as exc:
        raise ConfigurationError(
            f"a postgresql:// --db needs the 'postgres' extra (pip install 'foundation-ai[postgres]'): {exc}"
        ) from None
    try:
        return PostgresSessionStore(url)
    except FoundationAIError as exc:
        raise ConfigurationError(str(exc)) from None


def _not_writable(file: str) -> bool:
    """``file`` (or, when it does not exist, its nearest existing directory) cannot be written."""
    if file == ":memory:":
        return False
    target = os.path.abspath(file)
    if os.path.exists(target):
        return not os.access(target, os.W_OK) or not os.access(os.path.dirname(target), os.W_OK)
    parent = os.path.dirname(target)
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    return bool(parent) and not os.access(parent, os.W_OK)


def apply_config(args: argparse.Namespace, config: Config) -> argparse.Namespace:
    """Fill the options not given on the command line from ``config`` (``config.toml``):
    ``model``, ``system``, ``tools``, ``temperature``, ``max_tokens``, and ``base_url`` when the
    model too comes from the config. ``-m ALIAS`` and ``-t TEMPLATE`` are resolved first
    (:mod:`foundation_ai._cli.saved`; ``-s`` wins over ``-t``, ``-t`` over the config's system
    prompt). Returns ``args`` (changed in place)."""
    from .saved import apply_saved

    apply_saved(args)
    if args.model is None and config.model is not None:
        args.model = config.model
        if args.base_url is None and config.base_url is not None:
            from .model_choice import check_base_url

            args.base_url = check_base_url(config.base_url)
    if args.system is None:
        args.system = config.system
    if not args.tools and config.tools:
        args.tools = list(config.tools)
    if not getattr(args, "mcp", None) and config.mcp:
        args.mcp = list(config.mcp)
    if args.temperature is None:
        args.temperature = config.temperature
    if args.max_tokens is None:
        args.max_tokens = config.max_tokens
    apply_saved(args)  # a config model that is an alias
    return args


def _param_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The ``ModelParams`` fields the options set (checked before any model is loaded)."""
    changes: dict[str, Any] = {}
    if args.max_tokens is not None:
        changes["max_tokens"] = args.max_tokens
    if args.temperature is not None:
        changes["temperature"] = args.temperature
    if args.seed is not None:
        changes["seed"] = args.seed
    schema = getattr(args, "schema", None)
    if schema:
        changes["output_format"] = OutputFormat.JsonSchema("answer", parse_schema(schema))
    return changes


def _params(model: Any, changes: dict[str, Any]) -> ModelParams | None:
    """``changes`` applied to the model's recommended sampling (``default_params`` of a local
    model, see ``docs/models.md``) or to the generic defaults; ``None`` when nothing changes, so
    the model keeps its own defaults."""
    if not changes:
        return None
    base = getattr(model, "default_params", None)
    return (base if isinstance(base, ModelParams) else ModelParams()).with_(**changes)


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


def _stored_key_env(choice: ModelChoice) -> dict[str, str] | None:
    """The environment with the key stored by ``keys set`` added, when the provider's variable
    is not set (the environment wins); ``None``: use the environment as is. The stored key is
    then treated as an environment key: the library sends it only to the provider's own host
    (or the host paired with it in ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``)."""
    name = PROVIDER_KEY.get(choice.kind)
    if name is None:
        return None
    var = KEY_ENV[name]
    if os.environ.get(var):
        return None
    stored = read_keys().get(name)
    return {**os.environ, var: stored} if stored else None


def _session_to_resume(args: argparse.Namespace, store: Any) -> str | None:
    if not getattr(args, "continue_", False) and not args.session:
        return None
    from .session_index import describe_sessions, resolve_session_id

    if getattr(args, "continue_", False):
        newest = describe_sessions(store, limit=1)
        if not newest:
            raise ConfigurationError("--continue: there is no stored session yet")
        return newest[0].session_id
    return resolve_session_id(store, args.session) if args.session else None


def _recorded_defaults(args: argparse.Namespace, store: Any, session_id: str) -> None:
    """A resumed session keeps the model, its server (the recorded base URL) and the system
    prompt it recorded (``--model`` / ``--base-url`` / ``-s`` given on the command line win;
    ``config.toml`` comes after the recording)."""
    meta_of = getattr(store, "session_meta", None)
    meta = meta_of(session_id) if callable(meta_of) else None
    if meta is None:
        return
    if args.model is None and meta.model:
        args.model = meta.model
        if args.base_url is None and getattr(meta, "base_url", None):
            args.base_url = meta.base_url
    if args.system is None and meta.system_prompt:
        args.system = meta.system_prompt


def setup_session(args: argparse.Namespace) -> SessionSetup:
    """Build the ``AgentSession`` described by the options (model, key, tools, params, store,
    resume), after filling unset options from the resumed session's record
    (:func:`_recorded_defaults`), then from ``config.toml`` (:func:`apply_config`).

    Every option is checked before the model is loaded, so a mistake costs no loading time.

    Raises:
        ConfigurationError: a bad model spec or config file, a missing key, an unknown or
            ambiguous session, a bad root, ``--tool-choice`` or ``--schema``.
    """
    from ..agentic import AgentSession

    store = open_store(args.db)
    session_id = _session_to_resume(args, store)
    if session_id is not None:
        _recorded_defaults(args, store, session_id)
    apply_config(args, load_config(getattr(args, "config", None)))
    choice = parse_model_spec(args.model, args.base_url)
    changes = _param_changes(args)
    questions = QuestionBox(_decline)
    tools, described = _builtin_tools(args, questions)
    tool_choice = None
    if args.tool_choice:
        tool_choice = parse_tool_choice(args.tool_choice)
        offered = [t.definition.name for t in tools]
        for choice_item in tool_choice if isinstance(tool_choice, list) else [tool_choice]:
            name = getattr(choice_item, "name", None)
            if name is not None and name not in offered:
                raise ConfigurationError(
                    f"--tool-choice {name}: no such tool on offer ({', '.join(offered) or 'none; add --tools'})"
                )
    key = getattr(args, "key", None)
    key_env = None if key else _stored_key_env(choice)
    model = load_model(choice) if key_env is None and not key else load_model(choice, key_env, api_key=key)
    params = _params(model, changes)
    builder = AgentSession.builder(model).with_store(store).with_tools(tools)
    if args.system:
        builder = builder.with_system_prompt(args.system)
    if params is not None:
        builder = builder.with_params(params)
    if tool_choice is not None:
        builder = builder.with_tool_choice(tool_choice)
    session = builder.resume(session_id) if session_id else builder.build()
    return SessionSetup(session, choice, store, session_id is not None, questions, ", ".join(described))


def _builtin_tools(args: argparse.Namespace, questions: QuestionBox) -> tuple[list[Any], list[str]]:
    """The ``--tools`` sets as agent tools, and a description of each set for the banner."""
    tool_sets = list(dict.fromkeys(args.tools))
    if not tool_sets and not getattr(args, "mcp", None):
        return [], []
    from ..agentic.toolsets.builtin import files_tools, shell_tools
    from ..agentic.toolsets.errors import ToolRefused
    from .approval import shell_question

    if tool_sets and args.root and not os.path.isdir(args.root):
        raise ConfigurationError(f"--root {args.root}: not a directory")
    root = os.path.abspath(args.root or os.getcwd())
    tools: list[Any] = []
    described: list[str] = []
    if "files" in tool_sets:
        tools += files_tools(root)
        described.append(f"files (inside {root})")
    if "shell" in tool_sets:
        allowed_for_session = threading.Event()  # answered `a`: no more questions for shell

        def confirm(command: str) -> bool:
            if allowed_for_session.is_set():
                return True
            question = shell_question(command).rsplit("\n", 1)
            hint = "(y: run it · a: run it and stop asking this session · n REASON: decline, telling the model why)"
            decision, reason = shell_decision(
                questions.ask_reply("\n".join([question[0], hint, question[1]]))
            )
            if decision == "always":
                allowed_for_session.set()
            if decision == "no" and reason:
                raise ToolRefused(f"the user declined to run this command: {reason}")
            return decision != "no"

        tools += shell_tools(root, confirm=None if args.yes else confirm, timeout=args.shell_timeout)
        described.append(
            f"shell in {root} ({'runs without asking' if args.yes else 'asks before each command'})"
        )
    for spec in getattr(args, "mcp", None) or []:
        source = _mcp_source(spec)
        tools += source
        described.append(f"mcp {spec} ({len(source)} tools)")
    return tools, described


def _mcp_source(spec: str) -> list[Any]:
    """The tools of one ``--mcp`` server: an http(s) URL (streamable HTTP) or a command (stdio,
    split like a shell). The connection is closed when the process exits.

    Raises:
        ConfigurationError: the server cannot be started or does not list its tools.
    """
    import atexit
    import shlex

    from ..agentic.toolsets.mcp import MCPServerTools

    text = spec.strip()
    try:
        if text.startswith(("http://", "https://")):
            server = MCPServerTools.http(text)
        else:
            argv = shlex.split(text)
            if not argv:
                raise ConfigurationError("--mcp needs a command or a URL")
            server = MCPServerTools.stdio(argv)
        atexit.register(server.close)
        return list(server.list_tools())
    except ConfigurationError:
        raise
    except Exception as exc:
        raise ConfigurationError(f"--mcp {text}: cannot list the server's tools: {exc}") from None


def parse_tool_choice(text: str) -> Any:
    """``--tool-choice``: ``auto``, ``none``, ``required`` or a tool name, as a ``ToolChoice``;
    several, comma-separated (``read_file,none``: force the call, then force an answer), as the
    list :meth:`AgentSession.run_turn` applies to a turn's first generations in order.

    Raises:
        ConfigurationError: an empty item (``read_file,``).
    """
    from ..types import ToolChoice

    fixed = {"auto": ToolChoice.Auto, "none": ToolChoice.None_, "required": ToolChoice.Required}
    choices: list[Any] = []
    for item in text.split(","):
        key = item.strip()
        if not key:
            raise ConfigurationError(
                f"--tool-choice {text!r}: an empty choice (use auto, none, required or a tool name)"
            )
        choices.append(fixed[key.lower()]() if key.lower() in fixed else ToolChoice.Function(key))
    return choices[0] if len(choices) == 1 else choices


# ---------------------------------------------------------------------------------------------
# run


def _turn_input(args: argparse.Namespace) -> str | list[Any]:
    """The prompt (with piped stdin) and the ``-a`` attachments, checked before any loading."""
    prompt = read_prompt(args.prompt, sys.stdin)
    attached = attachment_messages(args.attachment)
    return [*attached, prompt] if attached else prompt


def cmd_run(args: argparse.Namespace) -> int:
    """``foundation-ai run PROMPT``: one turn. Prints the answer on stdout (on a terminal
    streamed and shown as Markdown, see :mod:`foundation_ai._cli.run_output`; piped, once
    complete so retracted output never shows), tool activity and the usage line on stderr
    (``-q``: neither; a turn interrupted by Ctrl-C is marked ``(turn interrupted)`` there); ``--json`` prints every ``TurnEvent`` as one JSON line on stdout.
    Exit 0 on success, 1 when the turn failed, 130 when interrupted, 141 (quietly) when stdout's
    reader went away (``| head -1``): the running turn is then aborted, so the store holds it
    as an ``Aborted`` turn with what it produced."""
    from ..agentic import TurnEvent, TurnOutcome

    turn_input = _turn_input(args)
    setup = setup_session(args)
    mode = answer_mode(
        terminal=sys.stdout.isatty(), plain=args.plain, no_stream=args.no_stream, structured=bool(args.schema)
    )
    err = None
    console = None
    if not args.quiet or mode in ("live", "markdown"):  # rich is loaded only to render
        from .render import TurnRenderer, make_console

        err = None if args.quiet else TurnRenderer(make_console(stderr=True))
        console = make_console() if mode in ("live", "markdown") else None
    out = RunOutput(args.json, mode, err, setup.session.abort, console)
    runner = TurnRunner(setup.session, out.handle, questions=setup.questions)
    try:
        runner.run(lambda: setup.session.run_turn_stream(turn_input).events())
    finally:
        setup.session.close()
    if out.stdout_closed:  # `run --json | head -1`: the reader left; the turn was aborted
        return EXIT_BROKEN_PIPE
    if runner.error is not None:
        print(error_line(f"{type(runner.error).__name__}: {runner.error}"), file=sys.stderr)
        return EXIT_FAILED
    end = out.terminal
    if not args.json:
        out.finish()
        if out.stdout_closed:
            return EXIT_BROKEN_PIPE
        shows_usage = end is not None and (end.summary.usage.total_tokens or isinstance(end, TurnEvent.Done))
        if err is not None and isinstance(end, TurnEvent.Done) and end.summary.outcome is TurnOutcome.Aborted:
            from .render import INTERRUPTED

            err.notice(INTERRUPTED, style="yellow")  # as `show` marks it in the transcript
        if err is not None and shows_usage:
            from .report import usage_line

            err.usage(usage_line(end.summary, setup.choice, setup.session.model))
    if isinstance(end, TurnEvent.Failed):
        from .report import failure_message

        print(error_line(failure_message(end.error, setup.choice)), file=sys.stderr)
        return EXIT_FAILED
    if runner.interrupted or (end is not None and end.summary.outcome is TurnOutcome.Aborted):
        return EXIT_INTERRUPTED
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# sessions / show


def cmd_sessions(args: argparse.Namespace) -> int:
    """``foundation-ai sessions``: stored sessions, newest first (id, updated, messages, first
    prompt). The store is opened read-only."""
    from .render import make_console
    from .session_index import describe_sessions, search_sessions

    store = open_store(args.db, read_only=True)
    try:
        if args.query:
            rows = search_sessions(store, args.query, limit=args.limit)
        else:
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
        console.print(f"no stored session mentions {args.query!r}" if args.query else "no stored sessions")
        return EXIT_OK
    for line in session_table(rows, console.width if console.is_terminal else 10_000):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return EXIT_OK


def session_table(rows: list[SessionInfo], width: int = 100) -> list[str]:
    """The ``sessions`` listing as plain lines: a header, then one line per session (the first
    prompt cut to fit ``width`` characters; ids and prompts with control characters escaped)."""
    head = f"{'ID':<25}  {'UPDATED (UTC)':<19}  {'MSGS':>4}  FIRST PROMPT"
    lines = [head]
    room = max(30, width - 56)
    for r in rows:
        prompt = r.first_prompt if len(r.first_prompt) <= room else r.first_prompt[: room - 1] + "…"
        sid = visible_line(r.session_id)
        lines.append(f"{sid:<25}  {r.updated_text:<19}  {r.message_count:>4}  {visible_line(prompt)}")
    return lines


def cmd_show(args: argparse.Namespace) -> int:
    """``foundation-ai show ID``: a stored session's transcript (``--json``: its records as JSON
    lines). The store is opened read-only."""
    from rich.text import Text

    from .render import make_console, render_records
    from .session_index import resolve_session_id

    store = open_store(args.db, read_only=True)
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
    console.print(Text(f"session {visible_line(session_id)}", style="bold"), soft_wrap=True)
    render_records(console, records)
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# chat


def cmd_chat(args: argparse.Namespace) -> int:
    """``foundation-ai chat``: the interactive loop (see :mod:`foundation_ai._cli.chat`)."""
    from .chat import ChatApp

    apply_config(args, load_config(args.config))
    if args.base_url:
        check_reachable(parse_model_spec(args.model, args.base_url).base_url or args.base_url)
    setup = setup_session(args)
    try:
        return ChatApp(setup).run()
    finally:
        setup.session.close()
