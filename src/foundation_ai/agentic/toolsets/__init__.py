"""Built-in toolsets, tool sources, discovery and tool-call policies (see ``docs/tools.md``).

- :mod:`.fs`: file systems — :class:`LocalFileSystem` (a real directory, confined to its root)
  and :class:`MemoryFileSystem`.
- :mod:`.files`: :class:`FileToolset` — ``read``, ``write``, ``edit``, ``list``, ``search_file``.
- :mod:`.shell`: :func:`shell_tools` — ``shell`` (opt-in, requires approval by default).
- :mod:`.shed`: :class:`ToolShed` — ``shed`` discovery over any number of tools.
- :mod:`.mcp`: :class:`MCPServerTools` — MCP servers (stdio, streamable HTTP) as tool sources.
- :mod:`.agent`: :class:`SubAgents`, :class:`SubAgent` — the ``agent`` tool (child sessions).
- :mod:`.policy`: :class:`ToolPolicy` — retries, error policy, loop detection.
- :mod:`.approval`: ``can_use_tool`` context, :func:`mark_requires_approval`, spend checks.
- :mod:`.errors`: :class:`ToolRefused`, :class:`PathRefused`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .agent import SubAgent, SubAgents
    from .approval import ToolContext, estimated_spend_check, mark_requires_approval
    from .errors import PathRefused, ToolRefused
    from .files import FileToolset
    from .fs import DirEntry, FileData, FileSystem, LocalFileSystem, MemoryFileSystem
    from .mcp import MCPServerTools, MCPTool, MCPToolError
    from .policy import ToolPolicy
    from .shed import ShedRegistry, ToolShed
    from .shell import ShellTool, shell_tools

_WHERE = {
    "SubAgent": "agent",
    "SubAgents": "agent",
    "ToolContext": "approval",
    "estimated_spend_check": "approval",
    "mark_requires_approval": "approval",
    "PathRefused": "errors",
    "ToolRefused": "errors",
    "FileToolset": "files",
    "DirEntry": "fs",
    "FileData": "fs",
    "FileSystem": "fs",
    "LocalFileSystem": "fs",
    "MemoryFileSystem": "fs",
    "MCPServerTools": "mcp",
    "MCPTool": "mcp",
    "MCPToolError": "mcp",
    "ToolPolicy": "policy",
    "ShedRegistry": "shed",
    "ToolShed": "shed",
    "ShellTool": "shell",
    "shell_tools": "shell",
}
"""Where each public name lives: imported on first use, so that importing one module of the
package (the turn loop imports :mod:`.policy`) does not load the others."""


__getattr__ = lazy_exports(globals(), _WHERE, __name__)


__all__ = [
    "DirEntry",
    "FileData",
    "FileSystem",
    "FileToolset",
    "LocalFileSystem",
    "MCPServerTools",
    "MCPTool",
    "MCPToolError",
    "MemoryFileSystem",
    "PathRefused",
    "ShedRegistry",
    "ShellTool",
    "SubAgent",
    "SubAgents",
    "ToolContext",
    "ToolPolicy",
    "ToolRefused",
    "ToolShed",
    "estimated_spend_check",
    "mark_requires_approval",
    "shell_tools",
]
