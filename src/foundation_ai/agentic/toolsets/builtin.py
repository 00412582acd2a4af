"""The opt-in built-in tools of the CLI and of ``foundation-ai serve`` (an agent's ``tools:``): ``files``
(read, write, edit, list inside a root directory) and ``shell`` (run a command after the user
confirms it) — thin uses of the library's toolsets (:mod:`foundation_ai.agentic.toolsets`), under
the CLI's own tool names.

A function that refuses or fails raises :class:`ToolRefused` (or another exception); the agent
loop turns any exception into a ``Messages.ToolResult`` with ``error_detail``, so the turn goes
on (docs/concepts.md: Tools).

Confinement (``files``): a :class:`~foundation_ai.agentic.toolsets.LocalFileSystem` opens every
path by walking from a descriptor of the root directory with ``O_NOFOLLOW`` on each component;
symbolic links are followed by the walk only while they stay inside the root; ``..`` never
leaves it; a file with more than one hard link is never written. Every confinement refusal is a
:class:`~foundation_ai.agentic.toolsets.PathRefused` (a :class:`ToolRefused`). Only regular
files are read, written or edited: a FIFO, socket or device is refused without blocking.

Shell (``shell``): the command runs *in* the root directory but is not confined to it; its
timeout bounds the whole call (see :class:`ShellTool`).
"""

from __future__ import annotations

import os
from typing import Any

from .errors import PathRefused, ToolRefused
from .files import DEFAULT_MAX_CHARS, FileToolset, truncate
from .fs import LocalFileSystem
from .shell import DEFAULT_SHELL_TIMEOUT, KILL_GRACE, Confirm, ShellTool
from .shell import shell_tools as _library_shell_tools

__all__ = [
    "DEFAULT_MAX_CHARS",
    "DEFAULT_SHELL_TIMEOUT",
    "KILL_GRACE",
    "FileTools",
    "PathRefused",
    "ShellTool",
    "ToolRefused",
    "files_tools",
    "shell_tools",
    "truncate",
]


class FileTools:
    """File access confined to ``root`` (default: the current directory), under the CLI's
    method names: :meth:`read_file`, :meth:`write_file`, :meth:`edit_file`, :meth:`list_dir`.

    Raises:
        ToolRefused: ``root`` is not a directory.
    """

    def __init__(
        self, root: str | os.PathLike[str] | None = None, max_chars: int = DEFAULT_MAX_CHARS
    ) -> None:
        self.fs = LocalFileSystem(root)
        self.root = self.fs.root
        self.max_chars = max_chars
        self.toolset = FileToolset(self.fs, max_chars=max_chars)

    def read_file(self, path: str) -> str:
        """A UTF-8 text file, cut to ``max_chars`` characters (see ``FileToolset.read``)."""
        return self.toolset.read(path)

    def write_file(self, path: str, content: str) -> str:
        """Create or overwrite a text file (see ``FileToolset.write``)."""
        return self.toolset.write(path, content)

    def edit_file(self, path: str, old: str, new: str) -> str:
        """Replace the one occurrence of ``old`` by ``new`` (see ``FileToolset.edit``)."""
        return self.toolset.edit(path, old, new)

    def list_dir(self, path: str = ".") -> str:
        """A directory's entries, one a line (see ``FileToolset.list``)."""
        return self.toolset.list(path)


def files_tools(root: str | os.PathLike[str] | None = None) -> list[Any]:
    """The ``files`` tools for an agent: ``read_file``, ``write_file``, ``edit_file``, ``list_dir``,
    confined to ``root`` (default: the current directory)."""
    from ..tools import tool

    ft = FileTools(root)

    @tool(category="files")
    def read_file(path: str) -> str:
        """Read a UTF-8 text file.

        Args:
            path: file path relative to the working directory.
        """
        return ft.read_file(path)

    @tool(category="files")
    def write_file(path: str, content: str) -> str:
        """Create or overwrite a text file.

        Args:
            path: file path relative to the working directory.
            content: the complete new file content.
        """
        return ft.write_file(path, content)

    @tool(category="files")
    def edit_file(path: str, old: str, new: str) -> str:
        """Replace one exact occurrence of some text in a file.

        Args:
            path: file path relative to the working directory.
            old: the exact text to replace; it must occur exactly once.
            new: the replacement text.
        """
        return ft.edit_file(path, old, new)

    @tool(category="files")
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
    (``None``: never ask, as with ``--yes``)."""
    return _library_shell_tools(cwd, confirm, timeout, name="run_command", requires_approval=False)
