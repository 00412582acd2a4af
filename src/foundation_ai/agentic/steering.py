"""Steering a running turn from another thread or task (``docs/turn-loop.md``).

- ``steer(msg)``: interrupt generation or tool execution at the next safe point and continue the
  turn with ``msg`` added to the conversation (a ``str`` becomes ``Messages.agent(text)``). With
  no turn running it is queued like a follow-up, for right after the next turn's prompt.
- ``follow_up(msg)``: queue ``msg`` (a ``str`` becomes ``Messages.user(text)``); it is sent once
  the current answer is complete (the turn then goes on: an outer iteration).
- ``abort()``: end the turn with ``StopReason.Aborted`` and a Summary, keeping what was produced.
  With no turn running it is a no-op (not remembered for the next turn).

How the interrupt works: the loop marks the few awaits where it may be interrupted (waiting for
the next model chunk, waiting for a tool stage) by publishing the waiting task. ``steer`` and
``abort`` schedule, thread-safely on the turn's event loop, a callback that cancels that task
with a private marker; the loop catches the cancellation there, ``uncancel()``s the task and
handles the interrupt. When the loop is elsewhere (e.g. the consumer is handling an item) the
request waits in the queue and is seen at the next check, which happens before every await.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from ..errors import EmptyPromptError
from ..types import ImageContent, MessageRole, Messages, TextContent, UserMessage
from .tools import calling_tool_loop

__all__ = ["STEER_MARKER", "Steering", "checked_message"]

STEER_MARKER = "foundation-ai:steering-interrupt"
"""The cancellation message used for steering interrupts."""


def checked_message(message: object, *, what: str = "prompt", agent: bool = False) -> Messages:
    """``message`` as a ``Messages``: a ``str`` becomes ``Messages.user(text)`` (with
    ``agent=True``: ``Messages.agent(text)``); a message is returned as is.

    Raises:
        TypeError: ``message`` is neither a ``str`` nor a ``Messages`` (or is a message whose
            text content is not a ``str``: it could be sent but never loaded back).
        ValueError: an empty (or whitespace-only) text.
    """
    if isinstance(message, str):
        if not message.strip():
            raise EmptyPromptError(f"the {what} is empty")
        return Messages.agent(message) if agent else Messages.user(message)
    if isinstance(message, ImageContent):  # an image in a prompt: a user message holding it
        return UserMessage(role=MessageRole.Agent if agent else MessageRole.User, content=message)
    if isinstance(message, Messages):
        content = getattr(message, "content", None)
        if isinstance(content, TextContent):
            if not isinstance(content.content, str):
                raise TypeError(
                    f"the {what}'s text content must be a str, got {type(content.content).__name__}"
                )
            if isinstance(message, UserMessage) and not content.content.strip():
                raise EmptyPromptError(f"the {what} is empty")
        return message
    raise TypeError(f"the {what} must be a str or a Messages, got {type(message).__name__}: {message!r:.60}")


_LOCK = threading.Lock()
"""Guards the queues of every session's :class:`Steering` (each use is a few operations, so
one lock for all costs no waiting worth counting, and no lock object per session)."""
_EMPTY: tuple[Messages, ...] = ()


class Steering:
    """The steering queues of one session (thread-safe). A queue is a list made on the first
    message (until then the shared empty tuple): an idle session holds no container."""

    __slots__ = ("_aborted", "_follow", "_interrupts", "_loop", "_steer", "waiting", "wanted")

    def __init__(self) -> None:
        self._steer: list[Messages] | tuple[Messages, ...] = _EMPTY
        self._follow: list[Messages] | tuple[Messages, ...] = _EMPTY
        self._aborted = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.waiting: asyncio.Task[Any] | None = None
        """The task now awaiting at an interruptible point (set by the loop), else ``None``."""
        self.wanted = False
        """True when a steer or an abort is pending (kept up to date under the lock)."""
        self._interrupts = 0

    # -- called by users, from any thread -------------------------------------------------------

    def steer(self, message: str | Messages) -> None:
        """Interrupt at the next safe point and continue with ``message``; a ``str`` becomes
        ``Messages.agent(text)`` (steering comes from the agent's side). With no
        turn running it behaves like :meth:`follow_up`: the message is queued and sent right
        after the next turn's prompt.

        Raises:
            TypeError: ``message`` is neither a ``str`` nor a ``Messages``.
            ValueError: an empty text.
        """
        msg = checked_message(message, what="steering message", agent=True)
        with _LOCK:
            if self._steer:
                self._steer.append(msg)  # type: ignore[union-attr]
            else:
                self._steer = [msg]
            self.wanted = True
        loop = self._loop
        if loop is not None and calling_tool_loop() is loop:
            return  # from a tool of this turn: taken after the tool stage, the tool's result kept
        self._poke()

    def follow_up(self, message: str | Messages) -> None:
        """Queue ``message`` (a ``str`` becomes ``Messages.user(text)``) for after the current
        answer; with no turn running, for right after the next turn's prompt.

        Raises:
            TypeError: ``message`` is neither a ``str`` nor a ``Messages``.
            ValueError: an empty text.
        """
        msg = checked_message(message, what="follow-up message")
        with _LOCK:
            if self._follow:
                self._follow.append(msg)  # type: ignore[union-attr]
            else:
                self._follow = [msg]

    def abort(self) -> None:
        """End the running turn as ``Aborted`` at the next safe point. With no turn running
        this is a no-op: nothing is remembered for the next turn (a turn is running from its
        stream's first step to its last)."""
        if self._loop is None:
            return
        with _LOCK:
            self._aborted = True
            self.wanted = True
        self._poke()

    # -- used by the loop -----------------------------------------------------------------------

    def bind(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Attach to the event loop running the turn (``None`` when the turn ends)."""
        self._loop = loop
        self.waiting = None

    def release(self) -> None:
        """The turn ended: :meth:`bind` to ``None`` and :meth:`clear_abort`, in one call."""
        self._loop = None
        self.waiting = None
        if self._aborted:
            self.clear_abort()

    @property
    def aborted(self) -> bool:
        return self._aborted

    def clear_abort(self) -> None:
        if self._aborted:
            with _LOCK:
                self._aborted = False
                self.wanted = bool(self._steer)

    def idle(self) -> bool:
        """True when no steering message, follow-up or abort is queued."""
        return not (self.wanted or self._steer or self._follow)

    def take_steers(self) -> list[Messages]:
        """Pop every pending steering message, in order."""
        if not self._steer:
            return []
        with _LOCK:
            out = self._steer
            self._steer = _EMPTY
            self.wanted = self._aborted
        return out  # type: ignore[return-value]  # a list: the queue had a message

    def take_follow_ups(self) -> list[Messages]:
        """Pop every queued follow-up, in order."""
        if not self._follow:
            return []
        with _LOCK:
            out = self._follow
            self._follow = _EMPTY
        return out  # type: ignore[return-value]  # a list: the queue had a message

    def wait_here(self, task: asyncio.Task[Any] | None) -> None:
        """Publish (or with ``None`` withdraw) the task now awaiting at an interruptible point
        (the same as setting :attr:`waiting`)."""
        self.waiting = task

    def is_interrupt(self, exc: BaseException) -> bool:
        """True when ``exc`` is our own steering cancellation (then the task was uncancelled)."""
        if not isinstance(exc, asyncio.CancelledError) or self._interrupts == 0:
            return False
        if not (exc.args and exc.args[0] == STEER_MARKER):
            return False
        self._interrupts -= 1
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        return True

    def _poke(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._interrupt()
        else:
            try:
                loop.call_soon_threadsafe(self._interrupt)
            except RuntimeError:
                pass

    def _interrupt(self) -> None:
        task = self.waiting
        if task is None or task.done() or not self.wanted:
            return
        if task is asyncio.current_task():
            return  # called from inside the awaiting code itself: it checks the flag later
        self.waiting = None
        self._interrupts += 1
        task.cancel(STEER_MARKER)
