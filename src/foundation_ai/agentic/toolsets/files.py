"""The file toolset: ``read``, ``write``, ``edit``, ``list`` and ``search_file`` over a
:class:`~.fs.FileSystem` (a real directory confined to its root, or one in memory).

    from foundation_ai.agentic.toolsets import FileToolset

    files = FileToolset("/path/to/project")            # or FileToolset(MemoryFileSystem({...}))
    agent = AgentSession.builder(model).with_tools(files.tools()).build()

Text is UTF-8: a file that is not is refused with a clear message (never decoded lossily).
Output returned to the model is bounded: ``max_chars`` characters of content or listing,
``max_matches`` search hits; a file larger than ``max_file_bytes`` is never edited or searched
(``read`` reads a bounded prefix of any file). Every refusal is a
:class:`~.errors.ToolRefused` (confinement: :class:`~.errors.PathRefused`), which the agent loop
reports to the model as an error result. See ``docs/tools.md``.
"""

from __future__ import annotations

import builtins
import codecs
import fnmatch
import os
import posixpath
import re
from collections.abc import Iterable
from typing import Any

from ..tools import FunctionTool, tool
from .errors import ToolRefused
from .fs import FileSystem, LocalFileSystem

__all__ = [
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_MATCHES",
    "FileToolset",
    "truncate",
]

DEFAULT_MAX_CHARS = 20_000
"""Characters of file content, listing or search output returned to the model."""
DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024
"""Bytes: files larger than this are not edited, searched or read past their first bytes."""
DEFAULT_MAX_MATCHES = 100
"""Lines ``search_file`` reports before it stops."""
_LINE_CHARS = 300


def truncate(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters, with a note saying how many were dropped."""
    if len(text) <= max_chars:
        return text
    dropped = len(text) - max_chars
    return f"{text[:max_chars]}\n[... {dropped} more characters truncated]"


def _decode(data: bytes, path: str, final: bool = True) -> str:
    try:
        # A cut-off read may end inside a character: decode the prefix, not the fragment.
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=final)
    except UnicodeDecodeError:
        raise ToolRefused(f"{path!r} is not UTF-8 text") from None


class FileToolset:
    """File tools over one file system.

    Args:
        fs: a :class:`~.fs.FileSystem`, or a directory path (a :class:`~.fs.LocalFileSystem`
            confined to it; default: the current directory).
        max_chars: characters returned per call (content, listing, search output).
        max_file_bytes: files larger than this are not edited or searched (bytes).
        max_matches: search hits reported per call.

    Raises:
        ToolRefused: a directory path that is not a directory.
    """

    def __init__(
        self,
        fs: FileSystem | str | os.PathLike[str] | None = None,
        *,
        max_chars: int = DEFAULT_MAX_CHARS,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_matches: int = DEFAULT_MAX_MATCHES,
    ) -> None:
        self.fs: FileSystem = fs if isinstance(fs, FileSystem) else LocalFileSystem(fs)
        self.max_chars = max_chars
        self.max_file_bytes = max_file_bytes
        self.max_matches = max_matches

    def __repr__(self) -> str:
        return f"FileToolset({self.fs!r})"

    # -- operations ------------------------------------------------------------------------------

    def read(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        """The text of ``path``. Without ``offset``/``limit``: from the start, cut to
        ``max_chars`` characters with a note (at most ``4 * max_chars + 4`` bytes are read, so a
        huge file costs no more than a long one). With them: ``limit`` lines from line
        ``offset`` (1-based; defaults 1 and "to the end"), still cut to ``max_chars``.

        Raises:
            ToolRefused: missing, not a regular file, not UTF-8 text, outside the root, a bad
                offset or limit.
        """
        if offset is None and limit is None:
            cap = 4 * self.max_chars + 4
            got = self.fs.read(path, cap)
            text = _decode(got.data, path, final=got.whole)
            if got.whole:
                return truncate(text, self.max_chars)
            return (
                f"{text[: self.max_chars]}\n[... truncated: the file is {got.size:,} bytes; "
                f"only the first {self.max_chars} characters are shown]"
            )
        start = 1 if offset is None else offset
        if start < 1:
            raise ToolRefused(f"offset must be a line number from 1, got {start}")
        if limit is not None and limit < 1:
            raise ToolRefused(f"limit must be at least 1 line, got {limit}")
        got = self.fs.read(path, self.max_file_bytes)
        text = _decode(got.data, path, final=got.whole)
        lines = text.splitlines(keepends=True)
        if start > len(lines) and (got.whole or not lines):
            raise ToolRefused(f"offset {start} is past the end of {path!r} ({len(lines)} lines)")
        end = len(lines) if limit is None else min(len(lines), start - 1 + limit)
        body = "".join(lines[start - 1 : end])
        notes = []
        if end < len(lines) or not got.whole:
            more = f"{len(lines) - end} more lines" if got.whole else "more lines"
            notes.append(f"[... {more}; continue with offset={end + 1}]")
        out = truncate(body, self.max_chars)
        return out + ("\n" if notes and not out.endswith("\n") else "") + "".join(notes)

    def write(self, path: str, content: str) -> str:
        """Create or overwrite ``path`` with ``content`` (UTF-8; parent directories created).

        Returns a one-line confirmation.

        Raises:
            ToolRefused: outside the root, an existing path that is not a regular file, a file
                with several hard links (real directories), an OS error.
        """
        if _has_surrogates(content):
            raise ToolRefused("the content is not valid Unicode text (it holds a lone surrogate)")
        data = content.encode()
        shown = self.fs.write(path, data)
        return f"wrote {len(data)} bytes to {shown}"

    def edit(self, path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
        """Replace ``old_string`` by ``new_string`` in ``path``: it must occur exactly once
        unless ``replace_all`` (then every occurrence). The file is unchanged on any refusal.

        Raises:
            ToolRefused: outside the root, missing, not a regular file, larger than
                ``max_file_bytes``, not UTF-8 text, ``old_string`` empty, absent or (without
                ``replace_all``) not unique.
        """
        if not old_string:
            raise ToolRefused("the old text must not be empty")
        if _has_surrogates(new_string) or _has_surrogates(old_string):
            raise ToolRefused("the text is not valid Unicode (it holds a lone surrogate)")
        count = 0

        def change(raw: bytes) -> bytes:
            nonlocal count
            text = _decode(raw, path)
            count = text.count(old_string)
            if count == 0:
                raise ToolRefused(f"the old text was not found in {path!r}")
            if count > 1 and not replace_all:
                raise ToolRefused(
                    f"the old text occurs {count} times in {path!r}; give more context to make it "
                    "unique, or set replace_all"
                )
            return text.replace(old_string, new_string, -1 if replace_all else 1).encode()

        shown = self.fs.update(path, change, self.max_file_bytes)
        return f"edited {shown}" + (f" ({count} replacements)" if count > 1 else "")

    def list(self, path: str = ".") -> str:
        """The entries of directory ``path``, one a line, sorted: directories end with ``/``,
        symbolic links with ``@``. ``(empty)`` for an empty directory.

        Raises:
            ToolRefused: outside the root, missing, not a directory.
        """
        suffix = {"dir": "/", "symlink": "@", "file": "", "other": ""}
        names = [e.name + suffix[e.kind] for e in self.fs.list(path)]
        return truncate("\n".join(names), self.max_chars) if names else "(empty)"

    def search(self, pattern: str, path: str = ".", glob: str | None = None) -> str:
        """Lines matching the regular expression ``pattern`` (Python ``re`` syntax) in the files
        under ``path``, as ``path:line: text``; files filtered by ``glob`` (``*.py``, matched
        against the path and the file name). Files that are not UTF-8 text or larger than
        ``max_file_bytes`` are skipped and counted; at most ``max_matches`` lines and
        ``max_chars`` characters are returned.

        Raises:
            ToolRefused: an invalid pattern, a path outside the root or missing.
        """
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            raise ToolRefused(f"invalid regular expression {pattern!r}: {exc}") from None
        hits: list[str] = []
        searched = skipped = 0
        stopped = False
        for shown, data in self.fs.walk_files(path, self.max_file_bytes):
            if glob and not (
                fnmatch.fnmatch(shown, glob) or fnmatch.fnmatch(posixpath.basename(shown), glob)
            ):
                continue
            if data is None:
                skipped += 1
                continue
            try:
                text = data.decode()
            except UnicodeDecodeError:
                skipped += 1
                continue
            searched += 1
            for n, line in enumerate(text.splitlines(), 1):
                if rx.search(line):
                    shown_line = line if len(line) <= _LINE_CHARS else line[:_LINE_CHARS] + "..."
                    hits.append(f"{shown}:{n}: {shown_line}")
                    if len(hits) >= self.max_matches:
                        stopped = True
                        break
            if stopped:
                break
        note = f"[searched {searched} files" + (
            f", skipped {skipped} (binary or too large)" if skipped else ""
        )
        note += f"; stopped after {self.max_matches} matches]" if stopped else "]"
        if not hits:
            return f"no matches {note}"
        return truncate("\n".join(hits), self.max_chars) + "\n" + note

    # -- as tools --------------------------------------------------------------------------------

    def tools(self, names: Iterable[str] | None = None) -> builtins.list[FunctionTool]:
        """The tools for an agent: ``read``, ``write``, ``edit``, ``list``, ``search_file`` (or
        the subset ``names``, e.g. ``("read", "list", "search_file")`` for read-only access).

        Raises:
            ToolRefused: an unknown name.
        """
        made = _make_tools(self)
        chosen = list(made) if names is None else list(names)
        unknown = [n for n in chosen if n not in made]
        if unknown:
            raise ToolRefused(f"unknown file tools {unknown}; choose from {sorted(made)}")
        return [made[n] for n in chosen]


def _has_surrogates(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def _make_tools(ft: FileToolset) -> dict[str, FunctionTool]:
    @tool(name="read", category="files")
    def read(path: str, offset: int | None = None, limit: int | None = None) -> str:
        """Read a UTF-8 text file (long files are cut; use offset/limit to page by lines).

        Args:
            path: file path relative to the working directory.
            offset: first line to return (1-based); omit to start at the beginning.
            limit: how many lines to return; omit for as many as fit.
        """
        return ft.read(path, offset, limit)

    @tool(name="write", category="files", sequential=True)
    def write(path: str, content: str) -> str:
        """Create or overwrite a text file (parent directories are created).

        Args:
            path: file path relative to the working directory.
            content: the complete new file content.
        """
        return ft.write(path, content)

    @tool(name="edit", category="files", sequential=True)
    def edit(path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
        """Replace exact text in a file; old_string must occur exactly once unless replace_all.

        Args:
            path: file path relative to the working directory.
            old_string: the exact text to replace.
            new_string: the replacement text.
            replace_all: replace every occurrence instead of exactly one.
        """
        return ft.edit(path, old_string, new_string, replace_all)

    @tool(name="list", category="files")
    def list_(path: str = ".") -> str:
        """List the entries of a directory (directories end with /).

        Args:
            path: directory path relative to the working directory.
        """
        return ft.list(path)

    @tool(name="search_file", category="files", timeout=60.0)
    def search_file(pattern: str, path: str = ".", glob: str | None = None) -> str:
        """Search files for lines matching a regular expression; returns path:line: text.

        Args:
            pattern: a Python regular expression.
            path: a directory (searched recursively) or a file, relative to the working directory.
            glob: only files whose path or name matches this pattern, e.g. "*.py".
        """
        return ft.search(pattern, path, glob)

    out: dict[str, Any] = {
        "read": read,
        "write": write,
        "edit": edit,
        "list": list_,
        "search_file": search_file,
    }
    return out
