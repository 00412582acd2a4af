"""The CLI's opt-in built-in tools: ``files`` (read, write, edit, list inside a root directory)
and ``shell`` (run a command after the user confirms it).

The tool *functions* here are plain Python and are unit-tested directly; :func:`files_tools`
and :func:`shell_tools` wrap them with the agent layer's ``@tool`` decorator so the model sees
them. A function that refuses or fails raises :class:`ToolRefused` (or another exception); the
agent loop turns any exception into a ``Messages.ToolResult`` with ``error_detail`` (seed 000,
section 1: "a failed tool is a ToolResult with error_detail"), so the turn goes on.

Confinement (``files``): every path is resolved with :meth:`pathlib.Path.resolve` (``..``
collapsed, symlinks followed, dangling ones too) and must stay inside the resolved root; an
absolute path is accepted only when it resolves inside the root. The check is done at call
time; a symlink swapped in between the check and the open is not defended against (a race the
CLI's single user would have to stage against themselves).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import FoundationAIError

__all__ = [
    "DEFAULT_MAX_CHARS",
    "DEFAULT_SHELL_TIMEOUT",
    "FileTools",
    "ShellTool",
    "ToolRefused",
    "files_tools",
    "shell_tools",
    "truncate",
]

DEFAULT_MAX_CHARS = 20_000
"""Characters of file content or command output returned to the model before truncation."""
DEFAULT_SHELL_TIMEOUT = 30.0
"""Seconds a shell command may run before it is killed."""


class ToolRefused(FoundationAIError):
    """A built-in tool refused the call: a path outside the root, a declined command, a bad edit.

    The agent loop reports it to the model as a ``ToolResult`` with ``error_detail``.
    """


def truncate(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters, with a note saying how many were dropped."""
    if len(text) <= max_chars:
        return text
    dropped = len(text) - max_chars
    return f"{text[:max_chars]}\n[... {dropped} more characters truncated]"


class FileTools:
    """File access confined to ``root`` (default: the current directory).

    Every method takes paths relative to the root (absolute paths must resolve inside it) and
    raises :class:`ToolRefused` for any path that resolves outside it.
    """

    def __init__(
        self, root: str | os.PathLike[str] | None = None, max_chars: int = DEFAULT_MAX_CHARS
    ) -> None:
        self.root = Path(root if root is not None else os.getcwd()).resolve()
        if not self.root.is_dir():
            raise ToolRefused(f"root {str(self.root)!r} is not a directory")
        self.max_chars = max_chars

    def resolve(self, path: str) -> Path:
        """The absolute, symlink-free path of ``path`` inside the root.

        Raises:
            ToolRefused: empty path, a NUL byte, or a path resolving outside the root (``..``,
                an absolute path elsewhere, a symlink pointing out).
        """
        if not path or "\x00" in path:
            raise ToolRefused(f"invalid path {path!r}")
        resolved = (self.root / path).resolve()
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise ToolRefused(f"refused: {path!r} resolves outside the root directory {str(self.root)!r}")
        return resolved

    def _shown(self, p: Path) -> str:
        rel = p.relative_to(self.root)
        return str(rel) if str(rel) != "." else "."

    def read_file(self, path: str) -> str:
        """Read a UTF-8 text file inside the root; long files are truncated.

        Raises:
            ToolRefused: outside the root, missing, a directory, or not UTF-8 text.
        """
        p = self.resolve(path)
        if not p.is_file():
            raise ToolRefused(f"no such file: {path!r}")
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ToolRefused(f"{path!r} is not UTF-8 text") from None
        return truncate(text, self.max_chars)

    def write_file(self, path: str, content: str) -> str:
        """Create or overwrite a text file inside the root (parent directories are created).

        Returns a one-line confirmation. Raises ToolRefused for a path outside the root.
        """
        p = self.resolve(path)
        if p.is_dir():
            raise ToolRefused(f"{path!r} is a directory")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content, encoding="utf-8")
        return f"wrote {len(content.encode('utf-8'))} bytes to {self._shown(p)}"

    def edit_file(self, path: str, old: str, new: str) -> str:
        """Replace the one occurrence of ``old`` by ``new`` in a text file inside the root.

        Raises:
            ToolRefused: outside the root, missing file, ``old`` empty, absent or not unique.
        """
        p = self.resolve(path)
        if not p.is_file():
            raise ToolRefused(f"no such file: {path!r}")
        if not old:
            raise ToolRefused("'old' must not be empty")
        text = p.read_text(encoding="utf-8")
        count = text.count(old)
        if count == 0:
            raise ToolRefused(f"'old' text not found in {path!r}")
        if count > 1:
            raise ToolRefused(f"'old' text occurs {count} times in {path!r}; give more context")
        p.write_text(text.replace(old, new, 1), encoding="utf-8")
        return f"edited {self._shown(p)}"

    def list_dir(self, path: str = ".") -> str:
        """List a directory inside the root, one entry a line (directories end with ``/``)."""
        p = self.resolve(path)
        if not p.is_dir():
            raise ToolRefused(f"not a directory: {path!r}")
        names = sorted(c.name + ("/" if c.is_dir() else "") for c in p.iterdir())
        return truncate("\n".join(names), self.max_chars) if names else "(empty)"


Confirm = Callable[[str], bool]
"""Asks the user whether to run a command; True means yes."""


class ShellTool:
    """Runs shell commands in ``cwd`` after ``confirm(command)`` says yes.

    ``confirm`` is ``None`` for ``--yes`` (run without asking). Output (exit code, stdout,
    stderr) is truncated to ``max_chars``; a command running longer than ``timeout`` seconds is
    killed with its whole process group.
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

    def run_command(self, command: str) -> str:
        """Run ``command`` with ``/bin/sh`` and return its exit code and output.

        Raises:
            ToolRefused: the user declined, the command is empty, or it timed out.
        """
        if not command.strip():
            raise ToolRefused("empty command")
        if self.confirm is not None and not self.confirm(command):
            raise ToolRefused("the user declined to run this command")
        proc = subprocess.Popen(
            command,
            shell=True,
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            raise ToolRefused(f"command timed out after {self.timeout:g} s and was killed") from None
        text = f"exit code {proc.returncode}\n"
        stdout = out.decode("utf-8", "replace")
        stderr = err.decode("utf-8", "replace")
        if stdout:
            text += f"--- stdout ---\n{stdout}"
        if stderr:
            text += f"{'' if text.endswith(chr(10)) else chr(10)}--- stderr ---\n{stderr}"
        return truncate(text, self.max_chars)


def files_tools(root: str | os.PathLike[str] | None = None) -> list[Any]:
    """The ``files`` tools for an agent: ``read_file``, ``write_file``, ``edit_file``, ``list_dir``,
    confined to ``root`` (default: the current directory)."""
    from ..agentic import tool

    ft = FileTools(root)

    @tool
    def read_file(path: str) -> str:
        """Read a UTF-8 text file.

        Args:
            path: file path relative to the working directory.
        """
        return ft.read_file(path)

    @tool
    def write_file(path: str, content: str) -> str:
        """Create or overwrite a text file.

        Args:
            path: file path relative to the working directory.
            content: the complete new file content.
        """
        return ft.write_file(path, content)

    @tool
    def edit_file(path: str, old: str, new: str) -> str:
        """Replace one exact occurrence of some text in a file.

        Args:
            path: file path relative to the working directory.
            old: the exact text to replace; it must occur exactly once.
            new: the replacement text.
        """
        return ft.edit_file(path, old, new)

    @tool
    def list_dir(path: str = ".") -> str:
        """List the entries of a directory.

        Args:
            path: directory path relative to the working directory.
        """
        return ft.list_dir(path)

    return [read_file, write_file, edit_file, list_dir]


def shell_tools(
    cwd: str | os.PathLike[str] | None = None,
    confirm: Confirm | None = None,
    timeout: float = DEFAULT_SHELL_TIMEOUT,
) -> list[Any]:
    """The ``shell`` tool for an agent: ``run_command``, asking ``confirm`` before each command
    (``None``: never ask)."""
    from ..agentic import tool

    sh = ShellTool(cwd, confirm, timeout)

    @tool
    def run_command(command: str) -> str:
        """Run a shell command in the working directory and return its exit code and output.

        Args:
            command: the command line, run with /bin/sh.
        """
        return sh.run_command(command)

    return [run_command]
