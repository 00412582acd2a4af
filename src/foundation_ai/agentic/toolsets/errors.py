"""The refusal types of the built-in toolsets.

A toolset method that will not (or cannot) do what a call asks raises :class:`ToolRefused`; every
refusal of a path by a file system's confinement (``..`` or an absolute path leaving the root, a
symbolic link pointing out or looping, a hard-linked file opened for writing, a path changed
while it was being opened) is a :class:`PathRefused`. The agent loop turns either into a
``Messages.ToolResult`` with ``error_detail``, so the turn goes on (see ``docs/tools.md``).
"""

from __future__ import annotations

from ...errors import FoundationAIError

__all__ = ["PathRefused", "ToolRefused"]


class ToolRefused(FoundationAIError):
    """A built-in tool refused the call: a missing file, a non-UTF-8 file, a bad edit, a file
    above the size cap, a declined command. The message says why, for the model."""


class PathRefused(ToolRefused):
    """A path was refused by a file system's confinement: it leaves the root (``..``, an
    absolute path elsewhere, a symbolic link pointing out), loops (symbolic links), or names a
    file with more than one hard link for writing. The one refusal type of confinement."""
