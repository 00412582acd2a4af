"""The shell toolset: run a command with ``/bin/sh`` in a working directory, with a timeout that
bounds the whole call and bounded output.

    from foundation_ai.agentic.toolsets import shell_tools

    tools = shell_tools("/path/to/project")            # requires approval by default
    tools = shell_tools(".", confirm=ask_user)         # or ask inline, before each command

Opt-in: nothing runs commands unless you add these tools. By default the ``shell`` tool is marked
``requires_approval``: the agent loop asks the session's approval hook (or pauses the turn
until ``approve``/``deny``) before each call; see ``docs/tools.md``. The command runs *in* the
directory but is not confined to it: a shell command can reach any file the user can.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import ToolRefused
from .files import DEFAULT_MAX_CHARS, truncate

__all__ = ["DEFAULT_SHELL_TIMEOUT", "KILL_GRACE", "Confirm", "ShellTool", "shell_tools"]

DEFAULT_SHELL_TIMEOUT = 30.0
"""Seconds a shell command may run before it is killed."""


Confirm = Callable[[str], bool]
"""Asks the user whether to run a command; True means yes."""


KILL_GRACE = 0.5
"""Seconds :class:`ShellTool` keeps reading after killing a timed-out command (to collect what it
wrote) and waits for the killed shell to be reaped; the call returns within
``timeout + 2 * KILL_GRACE`` seconds plus scheduling noise, whatever the command does."""


class _Capture:
    """One output pipe of a command: the first ``cap`` bytes kept, the rest counted and dropped
    (so ``yes`` running for the whole timeout costs no memory)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.cap - len(self.kept)
        self.kept += chunk[: max(room, 0)]
        self.dropped += max(len(chunk) - max(room, 0), 0)

    def text(self) -> str:
        s = self.kept.decode("utf-8", "replace")
        return s + (f"\n[... {self.dropped:,} more bytes not kept]\n" if self.dropped else "")


def _pump(captures: dict[int, _Capture], open_fds: set[int], deadline: float) -> None:
    """Read the pipes in ``open_fds`` into ``captures`` until all reach end of file or
    ``deadline`` (``time.monotonic()`` seconds) passes. Never blocks past the deadline."""
    with selectors.DefaultSelector() as sel:
        for fd in open_fds:
            sel.register(fd, selectors.EVENT_READ)
        while open_fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            for key, _ in sel.select(min(remaining, 0.25)):
                fd = int(key.fd)
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if chunk:
                    captures[fd].add(chunk)
                else:
                    sel.unregister(fd)
                    open_fds.discard(fd)


class ShellTool:
    """Runs shell commands in ``cwd`` after ``confirm(command)`` says yes.

    ``confirm`` is ``None`` for ``--yes`` (run without asking). Output (exit code, stdout,
    stderr) is truncated to ``max_chars``.

    The ``timeout`` (seconds) bounds the whole call: the command's output is read until both
    pipes close or the deadline passes, never with an unbounded wait. At the deadline the
    command's process group is killed (SIGKILL), what it wrote is collected for at most
    :data:`KILL_GRACE` seconds, the pipes are closed and the tool returns. A process that left
    the group (``setsid cmd &``) is not killed and not waited for. The command runs *in* ``cwd``
    but is not confined to it: a shell command can reach any file the user can.
    """

    def __init__(
        self,
        cwd: str | os.PathLike[str] | None = None,
        confirm: Confirm | None = None,
        timeout: float = DEFAULT_SHELL_TIMEOUT,
        max_chars: int = DEFAULT_MAX_CHARS,
    ) -> None:
        self.cwd = Path(cwd if cwd is not None else os.getcwd()).resolve()
        self.confirm = confirm
        self.timeout = timeout
        self.max_chars = max_chars

    def _kill_group(self, proc: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def run_command(self, command: str) -> str:
        """Run ``command`` with ``/bin/sh`` and return its exit code and output.

        Returns within ``timeout + 2 * KILL_GRACE`` seconds whatever the command does. When the
        shell exited in time but a background process it started kept the output open until the
        deadline, the exit code and output so far are returned with a note saying so (background
        processes still in the command's group are killed).

        Raises:
            ToolRefused: the user declined, the command is empty, it could not be started, or
                it was still running at the timeout (it is then killed).
        """
        if not command.strip():
            raise ToolRefused("empty command")
        if self.confirm is not None and not self.confirm(command):
            raise ToolRefused("the user declined to run this command")
        deadline = time.monotonic() + self.timeout
        try:
            proc = subprocess.Popen(
                command,
                shell=True,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise ToolRefused(f"cannot start the command: {exc.strerror or exc}") from None
        assert proc.stdout is not None and proc.stderr is not None
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        cap = 4 * self.max_chars + 4
        captures = {out_fd: _Capture(cap), err_fd: _Capture(cap)}
        open_fds = {out_fd, err_fd}
        timed_out = held_open = False
        try:
            _pump(captures, open_fds, deadline)
            if not open_fds:  # both pipes closed: wait for the shell within what is left
                try:
                    proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
                except subprocess.TimeoutExpired:
                    pass
            timed_out = proc.poll() is None
            held_open = not timed_out and bool(open_fds)  # the shell is done, a background job is not
            if timed_out or held_open:
                self._kill_group(proc)
                _pump(captures, open_fds, time.monotonic() + KILL_GRACE)
        finally:
            proc.stdout.close()
            proc.stderr.close()
            if proc.poll() is None:
                self._kill_group(proc)
                try:
                    proc.wait(timeout=KILL_GRACE)
                except subprocess.TimeoutExpired:  # unkillable (D state): stop waiting anyway
                    pass
        text = ""
        stdout = captures[out_fd].text()
        stderr = captures[err_fd].text()
        if stdout:
            text += f"--- stdout ---\n{stdout}"
        if stderr:
            text += f"{'' if not text or text.endswith(chr(10)) else chr(10)}--- stderr ---\n{stderr}"
        if timed_out:
            message = f"command timed out after {self.timeout:g} s and was killed"
            if text:
                message += f"; its output until then:\n{text}"
            raise ToolRefused(truncate(message, self.max_chars))
        text = f"exit code {proc.returncode}\n{text}"
        if held_open:
            text += (
                f"{'' if text.endswith(chr(10)) else chr(10)}[stopped reading after {self.timeout:g} s: "
                "a background process kept the output open; those left in the command's process "
                "group were killed]\n"
            )
        return truncate(text, self.max_chars)


def shell_tools(
    cwd: str | os.PathLike[str] | None = None,
    confirm: Confirm | None = None,
    timeout: float = DEFAULT_SHELL_TIMEOUT,
    *,
    name: str = "shell",
    requires_approval: bool | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> list[Any]:
    """The shell tool for an agent (one ``FunctionTool`` named ``name``).

    Args:
        cwd: the working directory (default: the current directory).
        confirm: asked before each command (``confirm(command) -> bool``); ``None``: not asked.
        timeout: seconds a command may run (the whole call; see :class:`ShellTool`).
        name: the function name the model sees.
        requires_approval: mark the tool so the agent loop's approval gate asks before each
            call (default: True when no ``confirm`` is given, so commands never run unasked).
        max_chars: characters of output returned.
    """
    from ..tools import tool

    sh = ShellTool(cwd, confirm, timeout, max_chars)

    @tool(name=name, category="shell")
    def run_command(command: str) -> str:
        """Run a shell command in the working directory and return its exit code and output.

        Args:
            command: the command line, run with /bin/sh.
        """
        return sh.run_command(command)

    run_command.requires_approval = confirm is None if requires_approval is None else requires_approval  # type: ignore[attr-defined]
    return [run_command]
