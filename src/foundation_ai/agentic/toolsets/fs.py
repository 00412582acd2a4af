"""File systems for the file tools: a real directory confined to its root, or one in memory.

:class:`FileSystem` is what the file tools (:mod:`.files`) need: read a bounded prefix, write,
update in place, list a directory and walk its files. Two implementations:

- :class:`LocalFileSystem` — a real directory. Every path is opened by walking from a descriptor
  of the root directory, one component at a time, each opened relative to its parent's
  descriptor with ``O_NOFOLLOW`` (``openat``-style). A symbolic link met on the way is read and
  followed *by the walk itself*: its target must stay inside the root, and more than
  :data:`MAX_SYMLINKS` links in one path is refused as a loop. ``..`` goes up the descriptor
  stack and may never leave the root. Because each step holds the descriptor of the directory it
  came from, swapping a parent directory for a symbolic link between a check and the open cannot
  redirect a write outside the root. A file with more than one hard link is refused for writing
  (its other name may be outside the root). Only regular files are read or written: a FIFO,
  socket, device or directory is refused after ``lstat`` and again on the open descriptor
  (opened ``O_NONBLOCK``, so nothing blocks). Files are written in place; within one
  ``LocalFileSystem``, reading, writing and editing a file's contents take turns (a lock), so a
  read never sees a file cut short by a write of another thread, and an edit reads, changes and
  writes the file as one step. Other processes (or another ``LocalFileSystem`` on the same
  directory) are not coordinated with.
- :class:`MemoryFileSystem` — files in a dict, for tests and sandboxes; ``..`` cannot leave it.

Every confinement refusal is a :class:`~.errors.PathRefused`; other refusals (missing file, not a
regular file, an OS error) are :class:`~.errors.ToolRefused`. See ``docs/tools.md``.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

import msgspec

from .errors import PathRefused, ToolRefused

__all__ = [
    "MAX_SYMLINKS",
    "DirEntry",
    "FileData",
    "FileSystem",
    "LocalFileSystem",
    "MemoryFileSystem",
]

MAX_SYMLINKS = 40
"""Symbolic links followed while resolving one path before it is refused as a loop (the
``MAXSYMLINKS`` of Linux)."""

EntryKind = Literal["file", "dir", "symlink", "other"]


class DirEntry(msgspec.Struct, frozen=True):
    """One directory entry: ``name`` and ``kind`` (``"file"``, ``"dir"``, ``"symlink"``,
    ``"other"``); symbolic links are not followed."""

    name: str
    kind: EntryKind


class FileData(msgspec.Struct, frozen=True):
    """A bounded read: ``data`` (at most the requested number of bytes from the start),
    ``size`` (the file's size in bytes), ``whole`` (True when ``data`` is the whole file) and
    ``shown`` (the path relative to the root, as reported to the model)."""

    data: bytes
    size: int
    whole: bool
    shown: str


@runtime_checkable
class FileSystem(Protocol):
    """What the file tools run over. Paths are ``str``, relative to the file system's root
    (``/``-separated); implementations decide whether absolute paths are accepted.

    Every method raises :class:`~.errors.ToolRefused` (a :class:`~.errors.PathRefused` for a
    confinement refusal) rather than ``OSError``.
    """

    def read(self, path: str, limit: int) -> FileData:
        """At most ``limit`` bytes from the start of the regular file ``path``."""
        ...

    def write(self, path: str, data: bytes) -> str:
        """Create or replace the regular file ``path`` (parents created); the shown path."""
        ...

    def update(self, path: str, change: Callable[[bytes], bytes], max_bytes: int) -> str:
        """Replace the content of the existing regular file ``path`` by ``change(content)``
        (read and written through one open file); refused when larger than ``max_bytes``."""
        ...

    def list(self, path: str) -> list[DirEntry]:
        """The entries of directory ``path``, sorted by name."""
        ...

    def walk_files(self, path: str, max_bytes: int) -> Iterator[tuple[str, bytes | None]]:
        """``(shown path, content)`` of every regular file under ``path`` (or ``path`` itself
        when it is a file), in sorted order; content is ``None`` for files larger than
        ``max_bytes`` or unreadable. Symbolic links are not followed."""
        ...


_KIND_NAMES = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symbolic link"),
)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words (``"a FIFO (named pipe)"``, ``"a directory"``...)."""
    for test, name in _KIND_NAMES:
        if test(mode):
            return name
    return "not a regular file"


def _not_regular(path: str, mode: int) -> ToolRefused:
    return ToolRefused(
        f"refused: {path!r} is {kind_of(mode)}; only regular files can be read, written or edited"
    )


def _os_error(what: str, path: str, exc: OSError) -> ToolRefused:
    return ToolRefused(f"cannot {what} {path!r}: {exc.strerror or exc}")


def _check_path(path: str) -> None:
    if not isinstance(path, str) or not path or "\x00" in path:
        raise ToolRefused(f"invalid path {path!r}")


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _Walk:
    """The state of one path resolution: a stack of directory descriptors from the root (the
    root's own descriptor at the bottom is borrowed, never closed) and their names."""

    __slots__ = ("fds", "names")

    def __init__(self, root_fd: int) -> None:
        self.fds = [root_fd]
        self.names: list[str] = []

    @property
    def top(self) -> int:
        return self.fds[-1]

    def push(self, fd: int, name: str) -> None:
        self.fds.append(fd)
        self.names.append(name)

    def pop(self) -> None:
        os.close(self.fds.pop())
        self.names.pop()

    def reset(self) -> None:
        while len(self.fds) > 1:
            self.pop()

    def close(self) -> None:
        self.reset()

    def shown(self, leaf: str | None) -> str:
        parts = [*self.names, leaf] if leaf else self.names
        return "/".join(parts) or "."


class LocalFileSystem:
    """A real directory, every access confined to it (see the module docstring).

    Args:
        root: the directory (default: the current directory); resolved once, at construction.

    Raises:
        ToolRefused: ``root`` is not a directory.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        given = Path(root if root is not None else os.getcwd())
        self.root = given.resolve()
        self._aliases = tuple({str(self.root), str(given.absolute())})
        try:
            fd = os.open(self.root, _DIR_FLAGS)
        except OSError:
            raise ToolRefused(f"root {str(self.root)!r} is not a directory") from None
        self._fd = fd
        self._finalizer = weakref.finalize(self, os.close, fd)
        # reads, writes and edits of file contents hold it: a file is written in place, so
        # without it a read (or an edit's read) running beside a write in another thread could
        # see the file cut short, and two edits of one file could both start from its old text
        # (one of them lost)
        self._io = threading.Lock()

    def close(self) -> None:
        """Close the root directory's descriptor (idempotent)."""
        self._finalizer()

    def __repr__(self) -> str:
        return f"LocalFileSystem({str(self.root)!r})"

    # -- resolution ------------------------------------------------------------------------------

    def _outside(self, path: str) -> PathRefused:
        return PathRefused(f"refused: {path!r} resolves outside the root directory {str(self.root)!r}")

    def _relative(self, path: str, absolute: str) -> list[str]:
        """The components of an absolute ``absolute`` below the root (refused when elsewhere)."""
        for alias in self._aliases:
            if absolute == alias:
                return []
            prefix = alias.rstrip("/") + "/"
            if absolute.startswith(prefix):
                return absolute[len(prefix) :].split("/")
        raise self._outside(path)

    def _resolve(self, path: str, *, create_dirs: bool = False) -> tuple[_Walk, str | None]:
        """Walk ``path`` from the root: the walk (its top is the parent directory) and the leaf
        name (``None`` when the path names a directory reached by the walk, e.g. ``"."``).

        The leaf itself is not opened; a symbolic link as the leaf is followed (within the
        root). Missing intermediate directories are created when ``create_dirs``.

        Raises:
            PathRefused: the path leaves the root or loops.
            ToolRefused: an intermediate component is missing or not a directory; an OS error.
        """
        _check_path(path)
        comps = self._relative(path, path) if path.startswith("/") else path.split("/")
        pending = deque(comps)
        walk = _Walk(self._fd)
        links = 0
        try:
            while pending:
                name = pending.popleft()
                if name in ("", "."):
                    continue
                if name == "..":
                    if len(walk.fds) == 1:
                        raise self._outside(path)
                    walk.pop()
                    continue
                last = all(p in ("", ".") for p in pending)
                try:
                    st = os.stat(name, dir_fd=walk.top, follow_symlinks=False)
                except FileNotFoundError:
                    if last:
                        return walk, name
                    if not create_dirs:
                        raise ToolRefused(f"no such file or directory: {path!r}") from None
                    try:
                        os.mkdir(name, 0o777, dir_fd=walk.top)
                    except FileExistsError:
                        pass
                    except OSError as exc:
                        raise _os_error("create a directory for", path, exc) from None
                    pending.appendleft(name)
                    continue
                except OSError as exc:
                    raise _os_error("access", path, exc) from None
                if stat.S_ISLNK(st.st_mode):
                    links += 1
                    if links > MAX_SYMLINKS:
                        raise PathRefused(f"refused: {path!r}: too many levels of symbolic links (a loop)")
                    try:
                        target = os.readlink(name, dir_fd=walk.top)
                    except OSError as exc:
                        raise _os_error("read the symbolic link in", path, exc) from None
                    if target.startswith("/"):
                        rel = self._relative(path, target)
                        walk.reset()
                        pending.extendleft(reversed(rel))
                    else:
                        pending.extendleft(reversed(target.split("/")))
                    continue
                if last and not stat.S_ISDIR(st.st_mode):
                    return walk, name
                try:
                    fd = os.open(name, _DIR_FLAGS, dir_fd=walk.top)
                except OSError as exc:
                    if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                        if not last:
                            # a file where a directory is needed, or a link swapped in since the
                            # lstat: look again (a link is then read and followed, never opened)
                            pending.appendleft(name)
                            links += 1
                            if links > MAX_SYMLINKS:
                                raise PathRefused(
                                    f"refused: {path!r} keeps changing while being opened"
                                ) from None
                            try:
                                mode = os.stat(name, dir_fd=walk.top, follow_symlinks=False).st_mode
                            except FileNotFoundError:
                                continue  # gone since: the next look decides (create or refuse)
                            except OSError as err:
                                raise _os_error("access", path, err) from None
                            if not stat.S_ISLNK(mode):
                                raise ToolRefused(
                                    f"not a directory: {walk.shown(name)!r} in {path!r}"
                                ) from None
                            continue
                        return walk, name
                    if exc.errno == errno.ENOENT:
                        links += 1
                        if links > MAX_SYMLINKS:
                            raise PathRefused(
                                f"refused: {path!r} keeps changing while being opened"
                            ) from None
                        pending.appendleft(name)
                        continue
                    raise _os_error("open a directory of", path, exc) from None
                walk.push(fd, name)
            return walk, None
        except BaseException:
            walk.close()
            raise

    def _open_leaf(
        self, path: str, flags: int, *, create: bool = False, for_write: bool = False
    ) -> tuple[int, str]:
        """A descriptor on the regular file ``path`` and its shown path.

        Raises:
            PathRefused: confinement (see :meth:`_resolve`); a hard-linked file ``for_write``;
                the leaf became a symbolic link while it was being opened.
            ToolRefused: missing (unless ``create``), not a regular file, an OS error.
        """
        walk, leaf = self._resolve(path, create_dirs=create)
        try:
            shown = walk.shown(leaf)
            if leaf is None:
                raise ToolRefused(
                    f"refused: {path!r} is a directory; only regular files can be read, written or edited"
                )
            try:
                mode = os.stat(leaf, dir_fd=walk.top, follow_symlinks=False).st_mode
            except FileNotFoundError:
                if not create:
                    raise ToolRefused(f"no such file: {path!r}") from None
            except OSError as exc:
                raise _os_error("access", path, exc) from None
            else:
                if not stat.S_ISREG(mode):
                    raise _not_regular(path, mode)
            extra = os.O_CREAT if create else 0
            try:
                fd = os.open(
                    leaf, flags | extra | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=walk.top
                )
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise PathRefused(
                        f"refused: {path!r} became a symbolic link while being opened"
                    ) from None
                if exc.errno in (errno.ENXIO, errno.EISDIR, errno.EOPNOTSUPP):
                    raise ToolRefused(f"refused: {path!r} is not a regular file") from None
                if exc.errno == errno.ENOENT:
                    raise ToolRefused(f"no such file: {path!r}") from None
                raise _os_error("open", path, exc) from None
        finally:
            walk.close()
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise _not_regular(path, st.st_mode)
            if for_write and st.st_nlink > 1:
                raise PathRefused(
                    f"refused: {path!r} has {st.st_nlink} hard links; a file with more than one link "
                    "is never written (another name of it may be outside the root)"
                )
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd, shown

    # -- operations ------------------------------------------------------------------------------

    @staticmethod
    def _read_fd(fd: int, limit: int) -> bytes:
        chunks: list[bytes] = []
        got = 0
        while got < limit:
            chunk = os.read(fd, min(1 << 16, limit - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    @staticmethod
    def _write_fd(fd: int, data: bytes) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    def read(self, path: str, limit: int) -> FileData:
        """See :meth:`FileSystem.read`. Reading a file with several hard links is allowed."""
        fd, shown = self._open_leaf(path, os.O_RDONLY)
        try:
            with self._io:
                size = os.fstat(fd).st_size
                data = self._read_fd(fd, limit)
                whole = len(data) < limit or not os.read(fd, 1)
        except OSError as exc:
            raise _os_error("read", path, exc) from None
        finally:
            os.close(fd)
        return FileData(data, size, whole, shown)

    def write(self, path: str, data: bytes) -> str:
        """See :meth:`FileSystem.write`."""
        fd, shown = self._open_leaf(path, os.O_WRONLY, create=True, for_write=True)
        try:
            with self._io:
                self._write_fd(fd, data)
        except OSError as exc:
            raise _os_error("write", path, exc) from None
        finally:
            os.close(fd)
        return shown

    def update(self, path: str, change: Callable[[bytes], bytes], max_bytes: int) -> str:
        """See :meth:`FileSystem.update`.

        Raises:
            ToolRefused: the file is larger than ``max_bytes`` (nothing is read), or what
                ``change`` raises.
        """
        fd, shown = self._open_leaf(path, os.O_RDWR, for_write=True)
        try:
            with self._io:  # read, change and write as one step
                size = os.fstat(fd).st_size
                if size > max_bytes:
                    raise ToolRefused(
                        f"refused: {path!r} is {size:,} bytes; files larger than {max_bytes:,} bytes are not edited"
                    )
                try:
                    raw = self._read_fd(fd, max_bytes + 1)
                except OSError as exc:
                    raise _os_error("read", path, exc) from None
                if len(raw) > max_bytes:
                    raise ToolRefused(f"refused: {path!r} grew past {max_bytes:,} bytes while being read")
                new = change(raw)
                try:
                    self._write_fd(fd, new)
                except OSError as exc:
                    raise _os_error("write", path, exc) from None
        finally:
            os.close(fd)
        return shown

    def _open_dir(self, path: str) -> tuple[int, str]:
        walk, leaf = self._resolve(path)
        try:
            if leaf is not None:
                try:
                    mode = os.stat(leaf, dir_fd=walk.top, follow_symlinks=False).st_mode
                except FileNotFoundError:
                    raise ToolRefused(f"no such directory: {path!r}") from None
                raise ToolRefused(f"not a directory: {path!r} is {kind_of(mode)}")
            return os.dup(walk.top), walk.shown(None)
        finally:
            walk.close()

    def list(self, path: str) -> list[DirEntry]:
        """See :meth:`FileSystem.list`."""
        fd, _ = self._open_dir(path)
        try:
            entries = []
            with os.scandir(fd) as it:
                for e in it:
                    if e.is_symlink():
                        kind: EntryKind = "symlink"
                    elif e.is_dir(follow_symlinks=False):
                        kind = "dir"
                    elif e.is_file(follow_symlinks=False):
                        kind = "file"
                    else:
                        kind = "other"
                    entries.append(DirEntry(e.name, kind))
        except OSError as exc:
            raise _os_error("list", path, exc) from None
        finally:
            os.close(fd)
        return sorted(entries, key=lambda e: e.name)

    def walk_files(self, path: str, max_bytes: int) -> Iterator[tuple[str, bytes | None]]:
        """See :meth:`FileSystem.walk_files` (``os.fwalk`` below the resolved directory)."""
        walk, leaf = self._resolve(path)
        try:
            if leaf is not None:
                mode = os.stat(leaf, dir_fd=walk.top, follow_symlinks=False).st_mode
                if not stat.S_ISREG(mode):
                    raise _not_regular(path, mode)
                with self._io:
                    data = self._read_small(walk.top, leaf, max_bytes)
                yield walk.shown(leaf), data
                return
            base = walk.shown(None)
            for dirpath, dirnames, filenames, dfd in os.fwalk(".", dir_fd=walk.top, follow_symlinks=False):
                dirnames.sort()
                for name in sorted(filenames):
                    rel = posixpath.normpath(posixpath.join(base, dirpath, name))
                    with self._io:
                        data = self._read_small(dfd, name, max_bytes)
                    yield rel, data
        finally:
            walk.close()

    @staticmethod
    def _read_small(dir_fd: int, name: str, max_bytes: int) -> bytes | None:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
                return None
            os.set_blocking(fd, True)
            data = LocalFileSystem._read_fd(fd, max_bytes + 1)
            return data if len(data) <= max_bytes else None
        except OSError:
            return None
        finally:
            os.close(fd)


class MemoryFileSystem:
    """Files held in memory (for tests and sandboxes): ``{path: bytes}`` plus directories.

    Paths are normalized (``a/./b``, ``a/../b``); a path leaving the root (``..`` above it) is a
    :class:`~.errors.PathRefused`; a leading ``/`` means the root. There are no links.

    Args:
        files: initial content, ``{"dir/name.txt": "text" or b"bytes"}`` (parents created).
    """

    def __init__(self, files: dict[str, str | bytes] | None = None) -> None:
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = {""}
        self._lock = threading.Lock()
        for name, content in (files or {}).items():
            self.write(name, content.encode() if isinstance(content, str) else content)

    def __repr__(self) -> str:
        return f"MemoryFileSystem({len(self.files)} files)"

    def _norm(self, path: str) -> str:
        _check_path(path)
        parts: list[str] = []
        for c in path.split("/"):
            if c in ("", "."):
                continue
            if c == "..":
                if not parts:
                    raise PathRefused(f"refused: {path!r} resolves outside the root directory")
                parts.pop()
            else:
                parts.append(c)
        return "/".join(parts)

    def _parent_ok(self, key: str, path: str) -> None:
        parent = posixpath.dirname(key)
        while parent:
            if parent in self.files:
                raise ToolRefused(f"not a directory: {parent!r} in {path!r}")
            parent = posixpath.dirname(parent)

    def read(self, path: str, limit: int) -> FileData:
        """See :meth:`FileSystem.read`."""
        key = self._norm(path)
        with self._lock:
            if key in self.dirs:
                raise ToolRefused(
                    f"refused: {path!r} is a directory; only regular files can be read, written or edited"
                )
            data = self.files.get(key)
        if data is None:
            raise ToolRefused(f"no such file: {path!r}")
        return FileData(data[:limit], len(data), len(data) <= limit, key)

    def write(self, path: str, data: bytes) -> str:
        """See :meth:`FileSystem.write`."""
        key = self._norm(path)
        with self._lock:
            if key in self.dirs:
                raise ToolRefused(
                    f"refused: {path!r} is a directory; only regular files can be read, written or edited"
                )
            self._parent_ok(key, path)
            parent = posixpath.dirname(key)
            while parent and parent not in self.dirs:
                self.dirs.add(parent)
                parent = posixpath.dirname(parent)
            self.files[key] = bytes(data)
        return key

    def update(self, path: str, change: Callable[[bytes], bytes], max_bytes: int) -> str:
        """See :meth:`FileSystem.update`."""
        key = self._norm(path)
        with self._lock:
            if key in self.dirs:
                raise ToolRefused(
                    f"refused: {path!r} is a directory; only regular files can be read, written or edited"
                )
            data = self.files.get(key)
            if data is None:
                raise ToolRefused(f"no such file: {path!r}")
            if len(data) > max_bytes:
                raise ToolRefused(
                    f"refused: {path!r} is {len(data):,} bytes; files larger than {max_bytes:,} bytes are not edited"
                )
            self.files[key] = bytes(change(data))
        return key

    def list(self, path: str) -> list[DirEntry]:
        """See :meth:`FileSystem.list`."""
        key = self._norm(path)
        with self._lock:
            if key not in self.dirs:
                if key in self.files:
                    raise ToolRefused(f"not a directory: {path!r} is a regular file")
                raise ToolRefused(f"no such directory: {path!r}")
            entries = [
                DirEntry(posixpath.basename(d), "dir") for d in self.dirs if d and posixpath.dirname(d) == key
            ]
            entries += [
                DirEntry(posixpath.basename(f), "file") for f in self.files if posixpath.dirname(f) == key
            ]
        return sorted(entries, key=lambda e: e.name)

    def walk_files(self, path: str, max_bytes: int) -> Iterator[tuple[str, bytes | None]]:
        """See :meth:`FileSystem.walk_files`."""
        key = self._norm(path)
        with self._lock:
            if key in self.files:
                items = [(key, self.files[key])]
            elif key in self.dirs:
                prefix = key + "/" if key else ""
                items = sorted((k, v) for k, v in self.files.items() if k.startswith(prefix))
            else:
                raise ToolRefused(f"no such file or directory: {path!r}")
        for k, v in items:
            yield k, (v if len(v) <= max_bytes else None)
