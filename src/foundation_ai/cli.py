"""The ``foundation-ai`` command line (also ``python -m foundation_ai``).

Commands::

    foundation-ai "PROMPT"                     the same as: foundation-ai run "PROMPT"
    foundation-ai run "PROMPT" [--json]        one turn; prints the answer (or JSON lines)
    foundation-ai chat [-S ID | -c]            interactive, streamed, resumable
    foundation-ai sessions                     stored sessions, newest first
    foundation-ai show ID                      a stored session's transcript
    foundation-ai models                       the bundled and configured models, with prices
    foundation-ai keys set PROVIDER|list|path  API keys kept in the user config directory
    foundation-ai serve                        agents over an OpenAI-compatible HTTP API (docs/serve.md)
    foundation-ai worker | submit | status | follow | steer | abort | recover    durable turns

Model and tool options (``chat`` and ``run``): ``--model`` (``local`` = the bundled SmolLM2,
the default; ``openai:NAME``, ``responses:NAME``, ``anthropic:NAME``, ``gguf:PATH``),
``--base-url``, ``--key``, ``-s/--system``, ``--max-tokens``, ``--temperature``, ``--seed``,
``--tools files,shell``, ``--root DIR``, ``--yes``, ``--shell-timeout``, ``--tool-choice``;
``-S/--session ID`` or ``-c/--continue`` resume a session. ``run`` also takes piped stdin (sent
before the prompt), ``-a/--attachment PATH|URL``, ``--schema``, ``--no-stream``, ``-q/--quiet``
and ``--plain``. ``--db PATH`` selects the SQLite session store (default: ``sessions.sqlite3`` in
the user data directory, see ``foundation_ai.agentic.stores.default_store_path``; missing parent
directories are created). Defaults come from ``config.toml`` in the user config directory (see
:mod:`foundation_ai._cli.config`). Keys: ``--key``, else ``OPENAI_API_KEY`` /
``ANTHROPIC_API_KEY``, else ``keys set``; with ``--base-url`` a key is optional. The ``files``
tools are confined to ``--root``; the ``shell`` tool only *runs in* it (a command can reach any
file the user can).

Nothing the model, a tool or a server writes can control the terminal: control characters are
shown escaped (:mod:`foundation_ai._cli.safe_text`); ``--json`` output is byte-exact.

Exit status: 0 success; 1 the turn failed (provider error, unreachable server, …); 2 bad usage or
configuration (unknown or invalid option value, a --base-url that is not an http(s) URL, missing
API key, unknown session); 130 interrupted; 141 stdout was closed by its reader (``| head``): the
command stops quietly and a running turn is aborted (stored as ``Aborted``). Every error is one
line on stderr: ``foundation-ai: error: ...``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from ._cli.parser import build_parser, command_of, with_default_command
from ._cli.status import (
    EXIT_BROKEN_PIPE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    error_line,
)
from .errors import ConfigurationError, FoundationAIError

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "PROG",
    "build_parser",
    "error_line",
    "main",
]


def _handler(command: str) -> Callable[[argparse.Namespace], int]:
    """The ``cmd_<command>`` function, imported on use so ``--help`` and ``--version`` stay fast."""
    if command in ("run", "chat", "sessions", "show"):
        from ._cli import commands as module
    elif command in ("models", "keys"):
        from ._cli import setup_commands as module  # type: ignore[no-redef]
    elif command in ("aliases", "templates"):
        from ._cli import saved as module  # type: ignore[no-redef]
    elif command == "serve":
        from ._cli import serve_cmd as module  # type: ignore[no-redef]
    else:
        from ._cli.durable_cmds import DURABLE_COMMANDS

        return DURABLE_COMMANDS[command]
    handler: Callable[[argparse.Namespace], int] = getattr(module, f"cmd_{command}")
    return handler


def _log_http() -> None:
    """``-v``: the backends' request log (logger ``foundation_ai.http``) on stderr."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    log = logging.getLogger("foundation_ai.http")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (see the module docstring). A first argument that
    is not a command runs it as a prompt (``foundation-ai "Hi"``)."""
    words = with_default_command(sys.argv[1:] if argv is None else argv)
    parser = build_parser(command_of(words))  # `run ...`: only run's options are built
    args = parser.parse_args(words)
    if args.command is None:
        parser.print_help()
        print(
            error_line(
                'no command and no prompt: give one (foundation-ai "Hi"); piped text is read by'
                ' run (echo "Hi" | foundation-ai run)'
            ),
            file=sys.stderr,
        )
        return EXIT_USAGE
    if getattr(args, "verbose", 0):
        _log_http()
    from ._cli.prompt_input import tolerant_stdio

    tolerant_stdio()  # typed or piped bytes that are not valid text become U+FFFD, never a crash
    try:
        return _handler(args.command)(args)
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
        from ._cli.run_output import silence_stdout

        silence_stdout()
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
