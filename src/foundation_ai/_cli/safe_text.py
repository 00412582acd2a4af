"""Text from the model, a tool or a server, made safe to write to a terminal.

Everything the CLI prints that it did not write itself (answers, reasoning, tool arguments and
results, server error messages, stored transcripts, session ids read from a store) goes through
:func:`visible` (or :func:`visible_line` for one-line contexts), so it cannot move the cursor,
erase or clear the screen, set the window title, write the clipboard (OSC 52), open hyperlinks,
or reorder what is shown (bidi overrides). Each such character is replaced by a printable escape:

- C0 controls (U+0000-U+001F) except newline and tab (and ``\\r\\n``, read as a newline),
  DEL (U+007F) and C1 controls (U+0080-U+009F): ``\\x1b``, ``\\r``, ``\\x07``, ``\\x9b``, ...
- bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A-U+202E,
  U+2066-U+2069) and the line/paragraph separators U+2028/U+2029: ``\\u202e``, ...

Escaping is per character, so it is correct on any chunk boundary of a stream. Machine-readable
output (``--json``) is never passed through here: it stays byte-exact. Background: the
"Trojan Source" bidi attacks (https://trojansource.codes/) and xterm's control sequences
(https://invisible-island.net/xterm/ctlseqs/ctlseqs.html).
"""

from __future__ import annotations

import re

__all__ = ["count_controls", "visible", "visible_line"]

_NAMED = {"\r": "\\r", "\n": "\\n", "\t": "\\t", "\x1b": "\\x1b", "\x7f": "\\x7f"}

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"

_UNSAFE = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_BIDI}]")
"""Characters escaped by :func:`visible` (newline and tab are kept)."""

_UNSAFE_LINE = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{_BIDI}]")
"""Characters escaped by :func:`visible_line` (every control, newline and tab included)."""


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every terminal-controlling character replaced by a printable escape
    (see the module docstring); newlines and tabs are kept, ``\\r\\n`` becomes ``\\n``.

    Text without such characters is returned as is (the common case costs one regex scan).
    """
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_escape, text.replace("\r\n", "\n"))


def visible_line(text: str) -> str:
    """Like :func:`visible`, but newlines and tabs are escaped too (``\\n``, ``\\t``): the
    result is one line, for titles, error lines and prompts."""
    if _UNSAFE_LINE.search(text) is None:
        return text
    return _UNSAFE_LINE.sub(_escape, text)


def count_controls(text: str) -> int:
    """How many characters of ``text`` :func:`visible` would escape (newlines and tabs are not
    counted)."""
    return len(_UNSAFE.findall(text))
