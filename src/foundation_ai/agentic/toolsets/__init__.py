"""Built-in toolsets and tool sources for agents (see ``docs/tools.md``).

- :mod:`.fs`: file systems — :class:`LocalFileSystem` (a real directory, confined to its root)
  and :class:`MemoryFileSystem`.
- :mod:`.files`: :class:`FileToolset` — ``read``, ``write``, ``edit``, ``list``, ``search_file``.
- :mod:`.shell`: :func:`shell_tools` — ``shell`` (opt-in, requires approval by default).
- :mod:`.errors`: :class:`ToolRefused`, :class:`PathRefused`.
"""

from __future__ import annotations

from .errors import PathRefused, ToolRefused
from .files import FileToolset
from .fs import DirEntry, FileData, FileSystem, LocalFileSystem, MemoryFileSystem
from .shell import ShellTool, shell_tools

__all__ = [
    "DirEntry",
    "FileData",
    "FileSystem",
    "FileToolset",
    "LocalFileSystem",
    "MemoryFileSystem",
    "PathRefused",
    "ShellTool",
    "ToolRefused",
    "shell_tools",
]
