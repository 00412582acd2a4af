"""What ``foundation-ai run`` writes: the answer on stdout, tool activity and usage on stderr.

Four ways to show the answer (:func:`answer_mode`):

- ``"stream"``: each piece written as it arrives (a terminal with ``--plain``);
- ``"live"``: streamed as plain text, then the final answer redrawn as Markdown in its place
  (a terminal): the streamed rows are erased with the CLI's own cursor-up and erase-below
  sequences, only when they all still fit on the screen (else the plain text stays);
- ``"markdown"``: the whole answer shown as Markdown once complete (a terminal, ``--no-stream``);
- ``"final"``: the plain answer written once complete (stdout piped or redirected, or
  ``--no-stream --plain``, or ``--schema``): retracted output never reaches a file.

Every piece of model text is written through :func:`~foundation_ai._cli.safe_text.visible`
(control characters shown escaped), and Markdown links are shown with their URL, never as
terminal hyperlinks; ``--json`` lines are written byte-exact.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..types import to_json
from .safe_text import visible

if TYPE_CHECKING:  # rich is imported where it draws: a piped ``run`` never loads it
    from rich.console import Console
    from rich.markdown import Markdown

    from .render import TurnRenderer

__all__ = ["RunOutput", "answer_mode", "markdown", "rows_of", "silence_stdout"]


def markdown(text: str) -> Markdown:
    """``text`` (escaped) as rich Markdown; links are shown as text with their URL, not as
    terminal hyperlinks that could hide where they lead."""
    from rich.markdown import Markdown  # markdown-it and rich's renderers: only on a terminal

    return Markdown(visible(text), hyperlinks=False)


def rows_of(text: str, width: int) -> int:
    """Terminal rows ``text`` occupies when written from column 0 on a ``width``-column
    terminal that wraps long lines (tabs every 8 columns)."""
    from rich.cells import cell_len

    rows = 0
    for line in text.split("\n"):
        cells = cell_len(line.expandtabs(8))
        rows += max(1, -(-cells // max(width, 1)))
    return rows


def silence_stdout() -> None:
    """Point stdout's file descriptor at ``/dev/null`` after its reader went away, so output
    still buffered (and the interpreter's final flush) goes nowhere instead of raising
    ``BrokenPipeError`` again."""
    import os

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def answer_mode(*, terminal: bool, plain: bool, no_stream: bool, structured: bool) -> str:
    """How ``run`` shows the answer (see the module docstring)."""
    if not terminal or structured:
        return "final"
    if plain:
        return "final" if no_stream else "stream"
    return "markdown" if no_stream else "live"


class RunOutput:
    """Collects and shows a ``run`` turn: the answer text per output (retractions drop outputs)
    and the terminal event.

    When stdout's reader goes away (``run --json | head -1``), the first failed write calls
    ``abort`` so the turn ends as ``Aborted`` (stored as such), and the rest of the turn is
    consumed without output.

    Args:
        json_lines: write every event as a JSON line (nothing else on stdout).
        mode: see :func:`answer_mode`.
        err: the stderr renderer for thinking, tool panels and retractions; ``None`` (``-q``)
            shows none of them.
        abort: called once when stdout's reader went away.
        console: the stdout console for ``live`` and ``markdown`` modes.
    """

    def __init__(
        self,
        json_lines: bool,
        mode: str,
        err: TurnRenderer | None,
        abort: Callable[[], None] = lambda: None,
        console: Console | None = None,
    ) -> None:
        self.json_lines = json_lines
        self.mode = mode
        self.err = err
        self.abort = abort
        self.console = console
        self.pieces: dict[str, list[str]] = {}
        self.terminal: Any = None
        self.stdout_closed = False
        """stdout's reader went away: nothing more is printed, the turn was aborted."""
        self._segment: list[str] = []
        """What was streamed since the last tool panel (the rows ``live`` may redraw)."""
        self._segment_ids: list[str] = []

    @property
    def streams(self) -> bool:
        """The answer is shown while it arrives (``stream`` or ``live``)."""
        return not self.json_lines and self.mode in ("stream", "live")

    def write(self, text: str) -> None:
        """Write ``text`` to stdout as is (callers escape model text first)."""
        if self.stdout_closed:
            return
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            self.stdout_closed = True
            silence_stdout()
            self.abort()

    def _stream(self, piece: str) -> None:
        text = visible(piece)
        self._segment.append(text)
        self.write(text)

    def _side(self, show: Callable[[TurnRenderer], None]) -> None:
        if self.err is None:
            return
        if self._segment:
            self.write("\n")
        self._segment, self._segment_ids = [], []
        show(self.err)

    def handle(self, event: Any) -> None:
        """Take one ``TurnEvent`` (called in the turn's worker thread)."""
        from ..agentic import TurnEvent

        if isinstance(event, TurnEvent.Failed | TurnEvent.Done):
            self.terminal = event
        if self.json_lines:
            self.write(to_json(event).decode("utf-8") + "\n")
            return
        if self.stdout_closed:
            return
        if isinstance(event, TurnEvent.Text):
            self.pieces.setdefault(event.message_id, []).append(event.text)
            if self.streams:
                if not self._segment and self.err is not None:
                    self.err.end_line()  # after streamed thinking (stderr), start on a new line
                if event.message_id not in self._segment_ids:
                    if self._segment_ids:
                        self._stream("\n")
                    self._segment_ids.append(event.message_id)
                self._stream(event.text)
        elif isinstance(event, TurnEvent.Retract):
            for mid in event.message_ids:
                self.pieces.pop(mid, None)
            if self.streams:
                self._side(lambda r: r.retract(event.reason))
        elif isinstance(event, TurnEvent.Thinking):
            self._side(lambda r: r.thinking(event.text, event.message_id))
        elif isinstance(event, TurnEvent.ToolCall):
            self._side(lambda r: r.tool_call(event.call))
        elif isinstance(event, TurnEvent.ToolResult):
            self._side(lambda r: r.tool_result(event.result))

    def answer(self) -> str:
        """The turn's text, one output per paragraph (retracted outputs left out)."""
        texts = ("".join(p).strip("\n") for p in self.pieces.values())
        return "\n".join(t for t in texts if t)

    def finish(self) -> None:
        """Show the rest of the answer once the turn has ended."""
        if self.json_lines or self.stdout_closed:
            return
        if self.mode == "live" and self._segment and self.console is not None:
            self._redraw_as_markdown()
        elif self.streams:
            if self._segment:
                self.write("\n")
        elif (text := self.answer()) and self.mode == "markdown" and self.console is not None:
            self.console.print(markdown(text))
        elif text:
            self.write(visible(text) + "\n")

    def _redraw_as_markdown(self) -> None:
        """Replace the streamed final answer by its Markdown rendering, when every row of it is
        still on the screen; otherwise end the plain text's line."""
        assert self.console is not None
        streamed = "".join(self._segment)
        rows = rows_of(streamed, self.console.width)
        final = [m for m in self._segment_ids if m in self.pieces]
        text = "\n".join("".join(self.pieces[m]).strip("\n") for m in final)
        if not text.strip() or rows >= self.console.height:
            self.write("\n")
            return
        up = f"\x1b[{rows - 1}A" if rows > 1 else ""
        self.write(f"\r{up}\x1b[J")  # to the first streamed row, erase from there down
        self.console.print(markdown(text))
