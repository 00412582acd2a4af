"""The shell tool's y/N question: the whole command, in a form that cannot hide a part of it.

A model-written command may try to show the user something other than what will run: cursor-up
and erase-line sequences, dozens of blank lines pushing the real command off the screen, or a
long run of spaces pushing it past the visible width. :func:`shell_question` defeats each kind:

- control characters are shown escaped (:func:`~foundation_ai._cli.safe_text.visible_line`);
- each line of the command is shown on its own numbered row, so a line cannot overwrite another;
- a run of more than :data:`MAX_BLANK_RUN` spaces/tabs is shown as ``⟨N spaces⟩`` and a run of
  more than :data:`MAX_EMPTY_LINES` empty lines as one ``⟨N empty lines⟩`` row, so nothing is
  pushed out of sight;
- the question itself, the last line (the one the user sees next to the cursor), states the
  command's line count and length, so a one-line-looking command that is really 41 lines long
  says so where the user answers.
"""

from __future__ import annotations

import re

from .safe_text import count_controls, visible_line

__all__ = ["MAX_BLANK_RUN", "MAX_EMPTY_LINES", "shell_question"]

MAX_BLANK_RUN = 8
"""Longer runs of spaces/tabs inside a line are shown as ``⟨N spaces⟩``."""

MAX_EMPTY_LINES = 2
"""Longer runs of empty (or blank) lines are shown as one ``⟨N empty lines⟩`` row."""

_BLANKS = re.compile(f"[ \\t]{{{MAX_BLANK_RUN + 1},}}")


def _line(text: str) -> str:
    shown = _BLANKS.sub(lambda m: f"⟨{len(m.group())} spaces⟩", text)
    return visible_line(shown)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def shell_question(command: str) -> str:
    """The question asked before the shell tool runs ``command`` (several lines; the last one
    ends with ``?``, the caller appends ``[y/N]``).

    Example for ``"ls\\n\\n\\n\\n\\ntouch pwned"``::

        the model wants to run a shell command (6 lines, 18 characters):
          1 │ ls
            │ ⟨4 empty lines⟩
          6 │ touch pwned
        run this command (6 lines, 18 characters)?
    """
    lines = command.replace("\r\n", "\n").split("\n")
    size = f"{_plural(len(lines), 'line')}, {_plural(len(command), 'character')}"
    controls = count_controls(command.replace("\n", ""))
    note = f"; {_plural(controls, 'control character')} shown escaped as \\xNN" if controls else ""
    rows = [f"the model wants to run a shell command ({size}{note}):"]
    width = len(str(len(lines)))
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and not lines[j].strip(" \t"):
            j += 1
        if j - i > MAX_EMPTY_LINES:
            rows.append(f"  {'':>{width}} │ ⟨{j - i} empty lines⟩")
            i = j
            continue
        rows.append(f"  {i + 1:>{width}} │ {_line(lines[i])}")
        i += 1
    rows.append(f"run this command ({size})?")
    return "\n".join(rows)
