"""Running one turn in the background while the main thread stays free for the user.

Why a worker thread: ``steer``, ``follow_up`` and ``abort`` must be callable *while* a turn
streams (docs/concepts.md: Turns), and Python delivers Ctrl-C (SIGINT) only to
the main thread. So :class:`TurnRunner` consumes ``TurnStream.events()`` in a daemon worker thread
(rendering each event as it arrives) and the main thread waits in short ``select()`` slices on
stdin: a line typed during the turn is handled by ``on_line`` (``/steer TEXT`` and friends), end
of input (Ctrl-D) calls ``on_eof`` (the chat then ends once the turn is done), a
Ctrl-C calls ``session.abort()`` and keeps waiting until the turn ends with its summary (a third
Ctrl-C, for a turn stuck in a slow tool, exits the process with status 130), and
questions from tools (the shell tool's y/N) are asked and answered here, on the main thread, so
two readers never compete for the terminal.
"""

from __future__ import annotations

import os
import queue
import select
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = ["Question", "QuestionBox", "TurnRunner", "is_terminal"]


@dataclass
class Question:
    """A yes/no question a tool (in a worker thread) asks the user; :meth:`QuestionBox.ask` waits
    for :attr:`answer`."""

    text: str
    answer: bool = False
    reply: str = ""
    """The line typed (``""`` when none was): a reason or ``a`` for :func:`shell_decision`."""
    done: threading.Event = field(default_factory=threading.Event)


class QuestionBox:
    """Hands questions from tool threads to the thread that owns the terminal.

    ``ask(text)`` (any thread) blocks until the owner answers; the owner polls :meth:`pending`.
    When no owner is waiting (``owner_active`` False), ``fallback(text)`` answers directly.
    """

    def __init__(self, fallback: Callable[[str], bool]) -> None:
        self._q: queue.Queue[Question] = queue.Queue()
        self.fallback = fallback
        self.owner_active = False

    def ask(self, text: str) -> bool:
        """Ask ``text``; True for yes. Blocks the calling (tool) thread until answered."""
        if not self.owner_active:
            return self.fallback(text)
        q = Question(text)
        self._q.put(q)
        q.done.wait()
        return q.answer

    def ask_reply(self, text: str) -> str:
        """Ask ``text``; the line typed (``"y"`` / ``""`` from the fallback when no owner waits)."""
        if not self.owner_active:
            return "y" if self.fallback(text) else ""
        q = Question(text)
        self._q.put(q)
        q.done.wait()
        return q.reply

    def pending(self) -> Question | None:
        """The next unanswered question, if any."""
        try:
            return self._q.get_nowait()
        except queue.Empty:
            return None

    def cancel_all(self) -> None:
        """Answer every pending question with no (used when the turn is interrupted)."""
        while (q := self.pending()) is not None:
            q.answer = False
            q.done.set()


def is_yes(text: str) -> bool:
    """``y`` / ``yes`` (any case) is yes; anything else, including an empty line, is no."""
    return text.strip().lower() in ("y", "yes")


def shell_decision(reply: str) -> tuple[str, str]:
    """A typed answer to the shell tool's question: ``("yes", "")`` for ``y``/``yes``,
    ``("always", "")`` for ``a``/``always`` (allow the tool for the rest of the session),
    else ``("no", REASON)`` where REASON is what follows ``n``/``no`` (``"n: too risky"``,
    ``"no, use ls"``) or the whole line when it is not a bare no (``""``: no reason given)."""
    text = reply.strip()
    word = text.lower()
    if word in ("y", "yes"):
        return "yes", ""
    if word in ("a", "always"):
        return "always", ""
    head, _, rest = text.partition(" ")
    if head.lower().rstrip(",:;.") in ("n", "no"):
        return "no", rest.strip(" ,:;")
    return "no", text.strip(" ,:;") if word.rstrip(",:;.") not in ("n", "no") else ""


class TurnRunner:
    """Consume one turn's events in a worker thread; handle input and Ctrl-C on the caller's.

    Args:
        session: the ``AgentSession`` (for ``abort()``).
        handle_event: called in the worker for every ``TurnEvent`` (renders or prints it).
        questions: tool questions to ask on the main thread, or ``None``.
        on_line: called on the main thread with each line typed during the turn, or ``None``
            to not read stdin while a turn runs.
        on_interrupt: called on the main thread at the first Ctrl-C (after ``abort()``).
        on_eof: called on the main thread, once, when stdin reaches end of file during the turn
            (Ctrl-D on a terminal, typed on its own line or to answer a tool's question).
        stdin: the input stream (its file descriptor is polled with ``select``).
        prompt_out: where questions are written.
    """

    def __init__(
        self,
        session: Any,
        handle_event: Callable[[Any], None],
        *,
        questions: QuestionBox | None = None,
        on_line: Callable[[str], None] | None = None,
        on_interrupt: Callable[[], None] | None = None,
        on_eof: Callable[[], None] | None = None,
        stdin: TextIO | None = None,
        prompt_out: TextIO | None = None,
    ) -> None:
        self.session = session
        self.handle_event = handle_event
        self.questions = questions
        self.on_line = on_line
        self.on_interrupt = on_interrupt
        self.on_eof = on_eof
        self.eof = False
        """stdin reached end of file during the turn (Ctrl-D)."""
        self.stdin = stdin if stdin is not None else sys.stdin
        self.prompt_out = prompt_out if prompt_out is not None else sys.stderr
        self.interrupted = False
        self.interrupts = 0
        """Ctrl-C presses seen: the 1st aborts the turn, the 2nd warns, the 3rd exits the process."""
        self.error: BaseException | None = None
        self._stdin_open = True

    def _consume(self, start: Callable[[], Iterable[Any]], done: threading.Event) -> None:
        try:
            for event in start():
                self.handle_event(event)
        except BaseException as exc:  # reported on the main thread
            self.error = exc
        finally:
            done.set()

    def _readable(self, timeout: float) -> bool:
        if not self._stdin_open:
            return False
        try:
            ready, _, _ = select.select([self.stdin], [], [], timeout)
        except (OSError, ValueError):  # no selectable stdin (closed, or not a file)
            self._stdin_open = False
            return False
        return bool(ready)

    def _read_line(self) -> str | None:
        try:
            line = self.stdin.readline()
        except (OSError, ValueError):
            line = ""
        if line == "":
            self._stdin_open = False
            if not self.eof:
                self.eof = True
                if self.on_eof is not None:
                    self.on_eof()
            return None
        return line.rstrip("\n")

    def _ask(self, q: Question) -> None:
        self.prompt_out.write(f"{q.text} [y/N] ")
        self.prompt_out.flush()
        try:
            while True:
                if self._readable(0.1):
                    line = self._read_line()
                    q.answer = line is not None and is_yes(line)
                    q.reply = line or ""
                    break
                if not self._stdin_open:
                    self.prompt_out.write("\n(no input: answered no)\n")
                    self.prompt_out.flush()
                    break
        finally:  # a Ctrl-C while asking answers no
            q.done.set()

    def _interrupt(self) -> None:
        self.interrupts += 1
        if self.interrupted:
            if self.interrupts == 2:
                self.prompt_out.write(
                    "\n(still stopping at the next safe point; Ctrl-C again quits at once)\n"
                )
                self.prompt_out.flush()
            else:  # a third Ctrl-C: the user wants out now (committed records are already on disk)
                self.prompt_out.write("\n(quit)\n")
                self.prompt_out.flush()
                sys.stdout.flush()
                os._exit(130)
            return
        self.interrupted = True
        try:
            self.session.abort()
        finally:
            if self.questions is not None:
                self.questions.cancel_all()
            if self.on_interrupt is not None:
                self.on_interrupt()

    def run(self, start: Callable[[], Iterable[Any]]) -> None:
        """Start the turn with ``start()`` (returning its ``TurnEvent`` iterable, e.g.
        ``lambda: session.run_turn_stream(prompt).events()``) in the worker thread and consume
        it until the turn ends. Starting it there means a Ctrl-C can never fall between starting
        a turn and watching it.

        Ctrl-C (``KeyboardInterrupt`` on this thread) aborts the turn once and keeps waiting for
        its end, so the session stays usable. Exceptions raised while consuming are stored in
        :attr:`error`.
        """
        # The end is signalled with an Event, not ``Thread.is_alive()``: on CPython < 3.13 a
        # KeyboardInterrupt landing inside ``Thread.join()`` can leave a live thread marked stopped.
        done = threading.Event()
        worker = threading.Thread(
            target=self._consume, args=(start, done), name="foundation-ai-turn", daemon=True
        )
        if self.questions is not None:
            self.questions.owner_active = True
        read_stdin = self.on_line is not None and is_terminal(self.stdin)
        started = False
        echo = _Echo(self.stdin) if read_stdin else None
        if echo is not None:  # typed text is not echoed into the streamed answer; the chat
            echo.off()  # shows a line once it is complete (`→ queued ...`, `→ steering ...`)
        try:
            while not done.is_set():
                try:
                    if not started:  # inside the try: a Ctrl-C from here on aborts the turn
                        started = True
                        worker.start()
                        continue
                    q = self.questions.pending() if self.questions is not None else None
                    if q is not None:
                        if self.interrupted:
                            q.answer = False
                            q.done.set()
                        else:
                            if echo is not None:
                                echo.on()  # the answer to a question is seen as it is typed
                            try:
                                self._ask(q)
                            finally:
                                if echo is not None:
                                    echo.off()
                        continue
                    if read_stdin and self._readable(0.05):
                        line = self._read_line()
                        if line is not None and self.on_line is not None and line.strip():
                            self.on_line(line)
                    else:
                        done.wait(0.05)
                except KeyboardInterrupt:
                    self._interrupt()
        finally:
            if echo is not None:
                echo.on()
            if self.questions is not None:
                self.questions.owner_active = False
                self.questions.cancel_all()


class _Echo:
    """The terminal's ECHO flag (termios, POSIX): off while a turn streams, restored after;
    line editing (ICANON) is kept, so a line is still read whole."""

    def __init__(self, stream: TextIO) -> None:
        try:
            import termios

            self.fd: int | None = stream.fileno()
            self.saved = termios.tcgetattr(self.fd)
        except (ImportError, OSError, ValueError):
            self.fd = None

    def _set(self, echo: bool) -> None:
        if self.fd is None:
            return
        import termios

        attrs = list(self.saved)
        attrs[3] = attrs[3] | termios.ECHO if echo else attrs[3] & ~termios.ECHO
        try:
            termios.tcsetattr(self.fd, termios.TCSANOW, attrs)
        except OSError:
            self.fd = None

    def on(self) -> None:
        self._set(True)

    def off(self) -> None:
        self._set(False)


def is_terminal(stream: TextIO) -> bool:
    """``stream`` is connected to a terminal (``False`` when it has no file descriptor)."""
    try:
        return os.isatty(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
