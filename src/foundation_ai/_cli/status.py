"""Exit statuses and the one-line error format of the ``foundation-ai`` command.

A leaf module: every other CLI module imports from here, and it imports none of them.
"""

from __future__ import annotations

from .safe_text import visible_line

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "PROG",
    "error_line",
]

PROG = "foundation-ai"

EXIT_OK = 0
EXIT_FAILED = 1
"""The turn failed (provider error, unreachable server, ...)."""
EXIT_USAGE = 2
"""Bad usage or configuration."""
EXIT_INTERRUPTED = 130
"""Interrupted (Ctrl-C): 128 + SIGINT."""
EXIT_BROKEN_PIPE = 141
"""stdout closed by its reader: 128 + SIGPIPE, as a shell reports for ``yes | head -1``."""


def error_line(message: str) -> str:
    """``message`` as the CLI's one-line error: ``foundation-ai: error: <text>``.

    Whitespace runs (newlines included) become one space, and any other control character
    (ESC, C1, DEL, bidi overrides) is shown escaped (see
    :func:`foundation_ai._cli.safe_text.visible`): a server's error text cannot drive the
    terminal.
    """
    first = " ".join(str(message).split()) or "unknown error"
    return f"{PROG}: error: {visible_line(first)}"
