"""The ``foundation-ai`` command line (also ``python -m foundation_ai``).

Commands::

    foundation-ai chat [--session ID]          interactive, streamed, resumable
    foundation-ai run "PROMPT" [--json]        one turn; prints the answer (or JSON lines)
    foundation-ai sessions                     stored sessions, newest first
    foundation-ai show ID                      a stored session's transcript

Model and tool options (``chat`` and ``run``): ``--model`` (``local`` = the bundled SmolLM2,
the default; ``openai:NAME``, ``responses:NAME``, ``anthropic:NAME``, ``gguf:PATH``),
``--base-url``, ``--system``, ``--max-tokens``, ``--temperature``, ``--seed``, ``--tools files,shell``,
``--root DIR``, ``--yes``, ``--shell-timeout``, ``--tool-choice``. ``--db PATH`` selects the SQLite
session store (default: ``sessions.sqlite3`` in the user data directory, see
``foundation_ai.agentic.stores.default_store_path``; missing parent directories are created).
Keys come from ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``; with ``--base-url`` a key is optional.
The ``files`` tools are confined to ``--root``; the ``shell`` tool only *runs in* it (a command
can reach any file the user can).

Exit status: 0 success; 1 the turn failed (provider error, unreachable server, …); 2 bad usage or
configuration (unknown or invalid option value, a --base-url that is not an http(s) URL, missing
API key, unknown session); 130 interrupted; 141 stdout was closed by its reader (``| head``): the
command stops quietly and a running turn is aborted (stored as ``Aborted``). Every error is one
line on stderr: ``foundation-ai: error: ...``.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from .errors import ConfigurationError, FoundationAIError

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "build_parser",
    "main",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
"""stdout closed by its reader: 128 + SIGPIPE, as a shell reports for ``yes | head -1``."""

PROG = "foundation-ai"

EPILOG = """examples:
  foundation-ai run "What is 2 + 40?"                  one turn on the bundled model
  foundation-ai run --json "Hi"                        the turn's events as JSON lines
  foundation-ai chat                                   interactive; Ctrl-C interrupts a turn
  foundation-ai chat --session ID                      resume a stored session
  foundation-ai sessions / foundation-ai show ID       list sessions / print a transcript
  foundation-ai run -m openai:gpt-4o-mini "Hi"         needs OPENAI_API_KEY
  foundation-ai run -m anthropic:claude-sonnet-4-5 "Hi"  needs ANTHROPIC_API_KEY
  foundation-ai chat -m openai:llama --base-url http://127.0.0.1:8080/v1
  foundation-ai chat --tools files,shell --root ./project

exit status: 0 ok, 1 the turn failed, 2 bad usage or configuration, 130 interrupted,
  141 stdout closed early (e.g. `| head -1`): exits quietly; a running turn is aborted and stored
  as aborted"""


RUN_EPILOG = """exit status:
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


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _float(text: str, *, minimum: float, inclusive: bool, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if not math.isfinite(value) or value < minimum or (value == minimum and not inclusive):
        raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
    return value


def _temperature(text: str) -> float:
    return _float(text, minimum=0.0, inclusive=True, what="a number >= 0")


def _seconds(text: str) -> float:
    return _float(text, minimum=0.0, inclusive=False, what="a number of seconds > 0")


def _base_url(text: str) -> str:
    from ._cli.model_choice import check_base_url

    try:
        return check_base_url(text)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--base-url ")) from None


def _tool_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    for n in names:
        if n not in ("files", "shell"):
            raise argparse.ArgumentTypeError(f"unknown tool set {n!r} (choose from: files, shell)")
    return names


def _add_store_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        metavar="PATH",
        help="SQLite session store (default: sessions.sqlite3 in the user data directory); "
        "missing parent directories are created",
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
    g.add_argument("--system", metavar="TEXT", help="system prompt")
    g.add_argument("--max-tokens", type=_positive_int, metavar="N", help="max output tokens per generation")
    g.add_argument("--temperature", type=_temperature, metavar="T", help="sampling temperature (>= 0)")
    g.add_argument("--seed", type=int, metavar="N", help="sampling seed (local models, OpenAI Chat)")
    t = p.add_argument_group("tools")
    t.add_argument(
        "--tools",
        type=_tool_list,
        action="extend",
        default=[],
        metavar="SET[,SET]",
        help="built-in tools to offer: files (read/write/edit inside --root), shell (asks before each command)",
    )
    t.add_argument(
        "--tool-choice",
        metavar="CHOICE",
        help="auto (default), none, required, or a tool name: forces the first model call of each turn",
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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``foundation-ai`` (subcommands chat, run, sessions, show)."""
    parser = _Parser(
        prog=PROG,
        description="LLM agents on one normalized message model. Runs the bundled SmolLM2 by default.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    chat = sub.add_parser(
        "chat",
        help="interactive chat (streams tokens; /steer TEXT, /exit; Ctrl-C interrupts a turn)",
        description="Interactive chat. While a turn runs, type '/steer TEXT' to redirect it, "
        "Ctrl-C to interrupt it (the session is kept). '/exit' or Ctrl-D quits; Ctrl-D during a "
        "turn quits once the turn has finished ('/exit' during a turn aborts it first).",
    )
    chat.add_argument("--session", "-s", metavar="ID", help="resume a stored session")
    _add_agent_options(chat)

    run = sub.add_parser(
        "run",
        help="run one turn and print the answer",
        description="Run one turn.",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("prompt", metavar="PROMPT", help="the prompt ('-' reads it from stdin)")
    run.add_argument("--json", action="store_true", help="print every TurnEvent as a JSON line")
    run.add_argument("--session", "-s", metavar="ID", help="continue a stored session")
    _add_agent_options(run)

    sessions = sub.add_parser("sessions", help="list stored sessions", description="List stored sessions.")
    sessions.add_argument("--limit", type=_positive_int, default=50, metavar="N", help="show at most N")
    sessions.add_argument("--json", action="store_true", help="one JSON object per session")
    _add_store_option(sessions)

    show = sub.add_parser(
        "show", help="print a stored session's transcript", description="Print a transcript."
    )
    show.add_argument("session_id", metavar="ID", help="the session id (a unique prefix works)")
    show.add_argument("--json", action="store_true", help="print the stored records as JSON lines")
    _add_store_option(show)
    from ._cli.serve_cmd import add_serve_parser

    add_serve_parser(sub)
    from ._cli.durable_cmds import add_durable_commands

    add_durable_commands(sub)
    return parser


def error_line(message: str) -> str:
    """``message`` as the CLI's one-line error: ``foundation-ai: error: <first line>``."""
    first = " ".join(str(message).split()) or "unknown error"
    return f"{PROG}: error: {first}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (see the module docstring)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    from ._cli.commands import cmd_chat, cmd_run, cmd_sessions, cmd_show
    from ._cli.serve_cmd import cmd_serve

    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "chat": cmd_chat,
        "run": cmd_run,
        "sessions": cmd_sessions,
        "show": cmd_show,
        "serve": cmd_serve,
    }
    from ._cli.durable_cmds import DURABLE_COMMANDS

    handlers.update(DURABLE_COMMANDS)
    try:
        return handlers[args.command](args)
    except ConfigurationError as exc:
        print(error_line(str(exc)), file=sys.stderr)
        return EXIT_USAGE
    except FoundationAIError as exc:
        print(error_line(str(exc)), file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `foundation-ai sessions | head -1`: the reader left; stop quietly
        from ._cli.commands import silence_stdout

        silence_stdout()
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
