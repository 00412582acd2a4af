"""The argument parser of ``foundation-ai`` (the entry point is :mod:`foundation_ai.cli`).

Built with the standard library's ``argparse``. A prompt given without a command runs it
(``foundation-ai "Hi"`` is ``foundation-ai run "Hi"``, as with ``llm``): see
:func:`with_default_command`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

from ..errors import ConfigurationError
from . import option_values
from .status import EXIT_USAGE, PROG, error_line

T = TypeVar("T")

__all__ = ["COMMANDS", "build_parser", "command_of", "with_default_command"]

COMMANDS = (
    "chat", "run", "sessions", "show", "models", "keys", "serve",
    "worker", "submit", "status", "follow", "steer", "abort", "approvals", "approve", "deny",
    "recover", "aliases", "templates",
)  # fmt: skip
"""The subcommands; a first argument that is none of them is a prompt for ``run``."""

EPILOG = """examples:
  foundation-ai "What is 2 + 40?"                      one turn on the bundled model (= run)
  cat notes.txt | foundation-ai "Summarize"            piped text is sent before the prompt
  foundation-ai -s "Answer in French." "Hi"            a system prompt
  foundation-ai run --json "Hi"                        the turn's events as JSON lines
  foundation-ai run -a photo.png "What is this?"       attach an image or a text file
  foundation-ai run --schema "name: str, age: int" "Invent a person"   structured output
  foundation-ai chat                                   interactive; Ctrl-C interrupts a turn
  foundation-ai chat -c                                continue the most recent session
  foundation-ai chat -S ID                             resume a stored session (a prefix works)
  foundation-ai sessions                               list the stored sessions
  foundation-ai show ID                                print a stored session's transcript
  foundation-ai models                                 the models you can use, with prices
  foundation-ai keys set openai                        store an API key (asked without echo)
  foundation-ai aliases set mini openai:gpt-4o-mini    -m mini now means -m openai:gpt-4o-mini
  foundation-ai templates set fr "Answer in French."   -t fr now uses it as the system prompt
  foundation-ai sessions -q invoice                    sessions whose prompts or answers say it
  foundation-ai run -m openai:gpt-4o-mini "Hi"         needs OPENAI_API_KEY (or keys set openai)
  foundation-ai run -m anthropic:claude-sonnet-4-5 "Hi"  needs ANTHROPIC_API_KEY
  foundation-ai chat -m openai:llama --base-url http://127.0.0.1:8080/v1
  foundation-ai chat --tools files,shell --root ./project

where things are kept (on Linux; other systems use their own user directories):
  config.toml, keys.json   defaults for --model, --system, --tools (and more), and the keys
                           of `keys set`: in $XDG_CONFIG_HOME/foundation-ai
                           (default ~/.config/foundation-ai)
  sessions.sqlite3         the session store of run, chat, sessions and show (--db PATH
                           picks another file): in $FOUNDATION_AI_HOME when that variable is
                           set, else in $XDG_DATA_HOME/foundation-ai (default
                           ~/.local/share/foundation-ai). To move your sessions: quit
                           foundation-ai, move sessions.sqlite3 to a new directory DIR and
                           export FOUNDATION_AI_HOME=DIR. The durable commands' default
                           durable.sqlite3 and the default vector store vectors.sqlite3 live
                           beside it; serve keeps its data elsewhere (serve --data-dir).

exit status: 0 ok, 1 the turn failed, 2 bad usage or configuration, 130 interrupted,
  141 stdout closed early (e.g. `| head -1`): exits quietly; a running turn is aborted and stored
  as aborted"""


RUN_EPILOG = """input:
  PROMPT              the prompt; '-' reads it from stdin
  piped stdin         with a PROMPT, the piped text is sent first, then the PROMPT
                      (cat file | foundation-ai run "summarize"); without one it is the prompt.
                      Read as UTF-8: bytes that are not (Latin-1 'caf\\xe9') become U+FFFD

output:
  on a terminal the answer is streamed, then shown as Markdown (--plain: as plain text);
  piped or redirected, the plain answer is written once complete. Control characters from the
  model, tools or servers are shown escaped (\\x1b, ...); --json is byte-exact.

exit status:
  0    the turn completed
  1    the turn failed (provider error, unreachable server, ...)
  2    bad usage or configuration (invalid option value, missing API key, unknown session)
  130  interrupted (Ctrl-C): the turn is aborted and stored as aborted
  141  stdout was closed early (e.g. `run --json ... | head -1`): exits quietly, no message;
       the running turn is aborted and stored as aborted"""


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr, like every other error
    (``foundation-ai: error: ...``), exit status 2."""

    def error(self, message: str) -> NoReturn:
        hint = f" (see: {self.prog} --help)"
        self.exit(EXIT_USAGE, error_line(message + hint) + "\n")


def _checked(rule: Callable[[object], T]) -> Callable[[str], T]:
    """An argparse ``type`` applying one of the shared range rules
    (:mod:`foundation_ai._cli.option_values`, also applied to ``config.toml``)."""

    def convert(text: str) -> T:
        try:
            return rule(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


_positive_int = _checked(option_values.positive_int)
_max_tokens = _checked(option_values.max_tokens)
_temperature = _checked(option_values.temperature)
_seconds = _checked(option_values.seconds)


def _base_url(text: str) -> str:
    from .model_choice import check_base_url

    try:
        return check_base_url(text)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--base-url ")) from None


TOOL_SETS = ("files", "shell")


def tool_list(text: str) -> list[str]:
    """``--tools files,shell`` as a list of tool-set names.

    Raises:
        argparse.ArgumentTypeError: an unknown set.
    """
    names = [n.strip() for n in text.split(",") if n.strip()]
    for n in names:
        if n not in TOOL_SETS:
            raise argparse.ArgumentTypeError(f"unknown tool set {n!r} (choose from: files, shell)")
    return names


def _add_store_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        metavar="PATH",
        help="SQLite session store (default: sessions.sqlite3 in the user data directory); "
        "missing parent directories are created",
    )


def _add_config_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        metavar="PATH",
        help="TOML file of defaults (default: config.toml in the user config directory)",
    )


def _add_session_options(p: argparse.ArgumentParser, verb: str) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--session", "-S", metavar="ID", help=f"{verb} a stored session (a unique id prefix works)"
    )
    g.add_argument(
        "--continue", "-c", dest="continue_", action="store_true", help="continue the most recent session"
    )


def _add_agent_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument(
        "--model",
        "-m",
        metavar="SPEC",
        default=None,
        help="local (bundled SmolLM2, default), openai:NAME, responses:NAME, anthropic:NAME, gguf:PATH",
    )
    g.add_argument(
        "--base-url",
        type=_base_url,
        metavar="URL",
        help="base URL of an OpenAI-compatible (or Anthropic-compatible) server; the key is then optional",
    )
    g.add_argument(
        "--key",
        metavar="KEY",
        help="API key for this call (default: the provider's environment variable, then `keys set`)",
    )
    g.add_argument("--system", "-s", metavar="TEXT", help="system prompt")
    g.add_argument(
        "--template", "-t", metavar="NAME", help="a saved system prompt (`templates set NAME TEXT`); -s wins"
    )
    g.add_argument("--max-tokens", type=_max_tokens, metavar="N", help="max output tokens per generation")
    g.add_argument("--temperature", type=_temperature, metavar="T", help="sampling temperature (>= 0)")
    g.add_argument("--seed", type=int, metavar="N", help="sampling seed (local models, OpenAI Chat)")
    t = p.add_argument_group("tools")
    t.add_argument(
        "--tools",
        type=tool_list,
        action="extend",
        default=[],
        metavar="SET[,SET]",
        help="built-in tools to offer: files (read/write/edit inside --root), shell (asks before each command)",
    )
    t.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="SERVER",
        help="an MCP server whose tools to offer (repeatable): a command run over stdio "
        '("python server.py", split like a shell) or an http(s) URL (streamable HTTP)',
    )
    t.add_argument(
        "--tool-choice",
        metavar="CHOICE",
        help="auto (default), none, required, or a tool name: forces the first model call of each turn; "
        "several, comma-separated, apply to the first calls in order (read_file,none: call, then answer)",
    )
    t.add_argument(
        "--root",
        metavar="DIR",
        help="directory the files tools are confined to and the shell tool runs in; shell commands "
        "are not confined to it (default: cwd)",
    )
    t.add_argument("--yes", "-y", action="store_true", help="run shell commands without asking")
    t.add_argument(
        "--shell-timeout",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="kill a shell command (and its process group) after this many seconds (default: 30)",
    )
    _add_store_option(p)
    _add_config_option(p)
    _add_verbose_option(p, argparse.SUPPRESS)


def _add_verbose_option(p: argparse.ArgumentParser, default: object) -> None:
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=default,
        help="show each HTTP request sent to a model (URL, headers, body; secrets masked) and the"
        " answer's status and time, on stderr (logger foundation_ai.http)",
    )


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of ``foundation-ai`` (commands chat, run, sessions, show, models,
    keys, serve). Parse ``with_default_command(argv)`` so a bare prompt runs it.

    ``command``: ``"run"`` or ``"chat"`` builds only that command's subparser (the entry point
    passes the command it found in ``argv``, see :func:`command_of`): the same parse of that
    command's arguments without building, or importing the modules of, the other commands
    (the cold run, `bench/cold_run.py`). Anything else builds them all.
    """
    only = command if command in ("run", "chat") else None
    parser = _Parser(
        prog=PROG,
        description="LLM agents on one normalized message model. Runs the bundled SmolLM2 by default. "
        'A prompt without a command runs it: foundation-ai "Hi".',
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    _add_verbose_option(parser, 0)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if only != "run":
        _add_chat_parser(sub)
    if only != "chat":
        _add_run_parser(sub)
    if only is None:
        _add_other_parsers(sub)
    return parser


def _add_chat_parser(sub: Any) -> None:
    chat = sub.add_parser(
        "chat",
        help="interactive chat (streams tokens; /steer TEXT, /exit; Ctrl-C interrupts a turn)",
        description="Interactive chat. While a turn runs, type '/steer TEXT' to redirect it, "
        "Ctrl-C to interrupt it (the session is kept). '/exit' or Ctrl-D quits; Ctrl-D during a "
        "turn quits once the turn has finished ('/exit' during a turn aborts it first).",
    )
    _add_session_options(chat, "resume")
    _add_agent_options(chat)


def _add_run_parser(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="run one turn and print the answer (the default command)",
        description="Run one turn.",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("prompt", metavar="PROMPT", nargs="?", help="the prompt ('-' reads it from stdin)")
    run.add_argument("--json", action="store_true", help="print every TurnEvent as a JSON line (byte-exact)")
    _add_session_options(run, "continue")
    o = run.add_argument_group("input and output")
    o.add_argument(
        "--attachment",
        "-a",
        action="append",
        default=[],
        metavar="PATH|URL",
        help="attach an image (png, jpeg, gif, webp) or a text file (UTF-8; invalid bytes become "
        "U+FFFD); a URL is passed on as is",
    )
    o.add_argument(
        "--schema",
        metavar="SCHEMA",
        help="answer as JSON matching SCHEMA: a JSON Schema object, or 'name: type, ...' "
        "(types: str, int, float, bool; default str)",
    )
    o.add_argument("--no-stream", action="store_true", help="print the answer once complete")
    o.add_argument(
        "--quiet", "-q", action="store_true", help="print only the answer (no tool panels, no usage)"
    )
    o.add_argument("--plain", action="store_true", help="plain text on a terminal too (no Markdown)")
    _add_agent_options(run)


def _add_other_parsers(sub: Any) -> None:
    sessions = sub.add_parser(
        "sessions",
        help="list stored sessions",
        description="List stored sessions, newest first. Only reads the store (a read-only file "
        "works; a missing one is empty and is not created).",
    )
    sessions.add_argument("--limit", type=_positive_int, default=50, metavar="N", help="show at most N")
    sessions.add_argument("--json", action="store_true", help="one JSON object per session")
    sessions.add_argument(
        "--query", "-q", metavar="TEXT", help="only sessions whose prompts or answers contain TEXT (any case)"
    )
    _add_store_option(sessions)

    show = sub.add_parser(
        "show",
        help="print a stored session's transcript",
        description="Print a stored session's transcript; a turn that was interrupted is marked "
        "'(turn interrupted)'. Only reads the store (a read-only file works).",
    )
    show.add_argument("session_id", metavar="ID", help="the session id (a unique prefix works)")
    show.add_argument("--json", action="store_true", help="print the stored records as JSON lines")
    _add_store_option(show)

    models = sub.add_parser(
        "models",
        help="list the bundled and configured models (provider, context window, prices)",
        description="List the models you can use now: the bundled one, the config file's default, "
        "and those of every provider with a key (environment or `keys set`). Prices are USD per "
        "million tokens, from the genai-prices table.",
    )
    models.add_argument("--all", action="store_true", help="every priced model, keys or not")
    models.add_argument("--json", action="store_true", help="one JSON object per model")
    _add_config_option(models)

    keys = sub.add_parser(
        "keys",
        help="store API keys (keys set PROVIDER, keys list, keys path)",
        description="API keys kept in keys.json in the user config directory, readable only by "
        "you (mode 0600). An environment variable (OPENAI_API_KEY, ANTHROPIC_API_KEY) wins over a "
        "stored key; --key wins over both.",
    )
    ksub = keys.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    kset = ksub.add_parser("set", help="store a key (read from the terminal, or stdin)")
    kset.add_argument("name", metavar="PROVIDER", help="openai (also used by responses:NAME) or anthropic")
    kset.add_argument(
        "--value", metavar="KEY", help="the key (default: asked without echo, or read from stdin)"
    )
    ksub.add_parser("list", help="the stored key names and where each provider's key comes from")
    ksub.add_parser("path", help="the path of the keys file")
    from .serve_cmd import add_serve_parser

    add_serve_parser(sub)
    from .durable_cmds import add_durable_commands

    add_durable_commands(sub)
    from .saved import add_saved_commands

    add_saved_commands(sub)


def command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` (as :func:`with_default_command` returns it) names: its first
    argument after ``-v`` flags, when that is a command; ``None`` otherwise (help, version)."""
    for arg in argv:
        if arg not in ("-v", "-vv", "--verbose"):
            return arg if arg in COMMANDS else None
    return None


def with_default_command(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``run`` inserted when it does not start with a command (or ``--help`` /
    ``--version``): ``foundation-ai "Hi"`` and ``foundation-ai -m openai:x "Hi"`` run a turn.
    An empty ``argv`` stays empty (the help is printed)."""
    args = list(argv)
    lead = 0  # -v before the command or prompt stays in front: `foundation-ai -v "Hi"`
    while lead < len(args) and args[lead] in ("-v", "-vv", "--verbose"):
        lead += 1
    rest = args[lead:]
    if not rest or rest[0] in COMMANDS or rest[0] in ("-h", "--help", "--version"):
        return args
    return [*args[:lead], "run", *rest]
