"""``foundation-ai chat``: the interactive loop.

Between turns the main thread reads a line with ``input()`` (GNU readline editing when
available). A prompt starts a turn: its events are consumed and rendered by a worker thread
(:class:`~foundation_ai._cli.turns.TurnRunner`) while the main thread keeps reading the terminal:

- ``/steer TEXT`` during a turn calls ``session.steer(Messages.user(TEXT))`` (the user's
  words, so ``/history`` and ``show`` print them as ``you>``): the loop stops at its next safe
  point (output already shown is marked retracted) and continues with TEXT;
- any other line typed during a turn is queued with ``session.follow_up(line)``;
- ``/abort`` or Ctrl-C calls ``session.abort()``: the turn ends at the next safe point, keeping
  what it produced, and the chat goes on in the same session;
- ``/exit`` (also ``/quit``) during a turn aborts it and ends the chat;
- Ctrl-D (end of input) during a turn lets the turn finish, then ends the chat (to stop the
  turn at once as well, press Ctrl-C first); between turns, Ctrl-D or ``/exit`` ends the chat.

Between turns: ``/help``, ``/session`` (the id), ``/history`` (the transcript so far). Every turn
is persisted by the session's store; the id printed at start and exit resumes it with
``foundation-ai chat --session ID``.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from rich.console import Console
from rich.text import Text

from .render import TurnRenderer, make_console, render_records
from .report import failure_message, usage_line
from .safe_text import visible_line
from .turns import TurnRunner, is_terminal

__all__ = ["HELP", "ChatApp"]

HELP = """commands:
  /steer TEXT   (during a turn) redirect the running turn with TEXT
  /abort        (during a turn) stop the turn, same as Ctrl-C; the session is kept
  Ctrl-D        (during a turn) quit once the turn has finished
  TEXT          (during a turn) queue TEXT as a follow-up after the current answer
  /session      show the session id
  /history      show the conversation so far
  /help         this help
  /exit         quit (also /quit or Ctrl-D); during a turn /exit aborts it first"""


class ChatApp:
    """The interactive chat over a built session (a ``SessionSetup`` from ``commands``)."""

    def __init__(self, setup: Any, console: Console | None = None) -> None:
        self.setup = setup
        self.session = setup.session
        self.console = console if console is not None else make_console()
        self.renderer = TurnRenderer(self.console)
        self.exit_requested = False

    # -- between turns -------------------------------------------------------------------------

    def banner(self) -> None:
        s = self.setup
        state = "resumed" if s.resumed else "new"
        self.console.print(
            Text.assemble(
                ("foundation-ai chat", "bold"),
                f" · model {visible_line(s.choice.label)} · session {visible_line(self.session.session_id)} ({state})",
            ),
            soft_wrap=True,
        )
        if s.tools:
            self.console.print(Text(f"tools: {s.tools}", style="dim"), soft_wrap=True)
        self.console.print(
            Text(
                "Type a message. /steer TEXT during a turn, Ctrl-C interrupts it, /help, /exit.", style="dim"
            )
        )
        if s.resumed:
            self.console.rule("history", style="dim")
            render_records(self.console, self.session.history())
            self.console.rule(style="dim")

    def _read_prompt(self) -> str | None:
        """The next line typed after the ``you>`` prompt; ``None`` at end of input. When stdin
        is not a terminal (``foundation-ai chat < script.txt``) nothing echoes the line, so it
        is written after the prompt here: the output reads as on a terminal (``you> TEXT``, then
        the answer on its own line) instead of running the answer into the prompt."""
        try:
            line = input("you> ")
        except EOFError:
            self.console.print()
            return None
        if not is_terminal(sys.stdin):
            self.console.print(Text(visible_line(line)), soft_wrap=True)
        return line

    def run(self) -> int:
        """Run the loop until ``/exit`` or end of input; returns the exit status (0)."""
        try:
            import readline  # noqa: F401  (line editing for input())
        except ImportError:
            pass
        self.banner()
        while not self.exit_requested:
            try:
                line = self._read_prompt()
            except KeyboardInterrupt:
                self.console.print()
                self.console.print(Text("(no turn is running: /exit or Ctrl-D quits)", style="dim"))
                continue
            if line is None:
                break
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                self.command(text)
                continue
            try:
                self.turn(text)
            except KeyboardInterrupt:  # a Ctrl-C outside the runner's watch: the turn never started
                self.renderer.end_line()
                self.console.print(Text("(interrupted)", style="yellow"))
        sid = self.session.session_id
        if self.session.messages:
            said = f"session {sid} saved; resume with: foundation-ai chat --session {sid}"
        else:  # a session is stored with its first message: there is nothing to resume
            said = "no turn was run: nothing was saved"
        self.console.print(Text(said, style="dim"), soft_wrap=True)
        return 0

    def command(self, text: str) -> None:
        """A slash command typed between turns."""
        name = text.partition(" ")[0].lower()
        if name in ("/exit", "/quit"):
            self.exit_requested = True
        elif name == "/help":
            self.console.print(HELP, markup=False, highlight=False)
        elif name == "/session":
            self.console.print(self.session.session_id)
        elif name == "/history":
            render_records(self.console, self.session.history())
        elif name in ("/steer", "/abort"):
            self.console.print(Text(f"{name}: no turn is running", style="dim"))
        else:
            self.console.print(Text(f"unknown command {name} (/help lists them)", style="yellow"))

    # -- during a turn ---------------------------------------------------------------------------

    def handle_event(self, event: Any) -> None:
        """Render one ``TurnEvent`` (runs in the turn's worker thread)."""
        from ..agentic import TurnEvent, TurnOutcome

        r = self.renderer
        if isinstance(event, TurnEvent.Text):
            r.text(event.text, event.message_id)
        elif isinstance(event, TurnEvent.Thinking):
            r.thinking(event.text, event.message_id)
        elif isinstance(event, TurnEvent.ToolCall):
            r.tool_call(event.call)
        elif isinstance(event, TurnEvent.ToolResult):
            r.tool_result(event.result)
        elif isinstance(event, TurnEvent.Retract):
            r.retract(event.reason)
        elif isinstance(event, TurnEvent.Failed):
            r.failed(failure_message(event.error, self.setup.choice))
            r.usage(usage_line(event.summary, self.setup.choice, getattr(self.session, "model", None)))
        elif isinstance(event, TurnEvent.Done):
            if event.summary.outcome is TurnOutcome.Aborted:
                r.notice("(turn interrupted; the session is kept)", style="yellow")
            r.usage(usage_line(event.summary, self.setup.choice, getattr(self.session, "model", None)))

    def on_line(self, line: str) -> None:
        """A line typed while a turn runs (main thread)."""
        text = line.strip()
        name, _, rest = text.partition(" ")
        lname = name.lower()
        if lname == "/steer":
            if rest.strip():
                from ..types import Messages

                self.session.steer(Messages.user(rest.strip()))  # typed by the user: role user
                self.renderer.notice(f"→ steering: {rest.strip()}", style="magenta")
            else:
                self.renderer.notice("usage: /steer TEXT", style="yellow")
        elif lname == "/abort":
            self.session.abort()
            self.renderer.notice("→ interrupting…", style="yellow")
        elif lname in ("/exit", "/quit"):
            self.exit_requested = True
            self.session.abort()
            self.renderer.notice("→ interrupting, then exiting…", style="yellow")
        elif text.startswith("/"):
            self.renderer.notice(f"during a turn: /steer TEXT, /abort, /exit (not {name})", style="yellow")
        else:
            self.session.follow_up(text)
            self.renderer.notice(f"→ queued as a follow-up: {text}", style="magenta")

    def on_eof(self) -> None:
        """End of input (Ctrl-D) while a turn runs (main thread): the chat ends after the turn."""
        self.exit_requested = True
        self.renderer.notice(
            "→ Ctrl-D: the chat ends when this turn is done (Ctrl-C stops the turn now)", style="yellow"
        )

    def on_interrupt(self) -> None:
        self.renderer.notice("→ interrupting… (the session is kept)", style="yellow")

    def turn(self, prompt: Any) -> None:
        """Run one turn (``prompt``: a text, or messages), rendering as it streams; returns
        when it has ended. A ``/steer`` or follow-up typed so late that the turn ended before
        taking it (after its answer was complete) is sent at once as the next turn's prompt,
        not left waiting for the next message typed; after a Ctrl-C it waits for the next
        message, and when the chat is ending it is reported as not sent."""
        while True:
            runner = TurnRunner(
                self.session,
                self.handle_event,
                questions=self.setup.questions,
                on_line=self.on_line,
                on_interrupt=self.on_interrupt,
                on_eof=self.on_eof,
                stdin=sys.stdin,
                prompt_out=sys.stdout,
            )
            runner.run(functools.partial(self._events, prompt))
            self.renderer.end_line()
            if runner.error is not None:
                self.renderer.failed(f"{type(runner.error).__name__}: {runner.error}")
                return
            steering = getattr(self.session, "steering", None)
            if steering is None or steering.idle():
                return
            if runner.interrupted:  # stopped on purpose: keep them for the next message
                self.renderer.notice(
                    "→ what you typed during the turn is sent with your next message", style="dim"
                )
                return
            late = [*steering.take_follow_ups(), *steering.take_steers()]
            if self.exit_requested:
                self.renderer.notice(f"→ not sent (the turn ended first): {_texts(late)}", style="yellow")
                return
            self.renderer.notice(f"→ the turn ended first; sending now: {_texts(late)}", style="magenta")
            prompt = late

    def _events(self, prompt: Any) -> Any:
        return self.session.run_turn_stream(prompt).events()


def _texts(messages: list[Any]) -> str:
    return visible_line(" / ".join(m.text() or "" for m in messages))
