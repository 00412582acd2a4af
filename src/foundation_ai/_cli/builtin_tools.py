"""The CLI's opt-in built-in tools: ``files`` (read, write, edit, list inside a root directory)
and ``shell`` (run a command after the user confirms it).

The tool *functions* here are plain Python and are unit-tested directly; :func:`files_tools`
and :func:`shell_tools` wrap them with the agent layer's ``@tool`` decorator so the model sees
them. A function that refuses or fails raises :class:`ToolRefused` (or another exception); the
agent loop turns any exception into a ``Messages.ToolResult`` with ``error_detail``
(docs/concepts.md: Tools), so the turn goes on.

Confinement (``files``): every path is resolved with :meth:`pathlib.Path.resolve` (``..``
collapsed, symlinks followed, dangling ones too) and must stay inside the resolved root; an
absolute path is accepted only when it resolves inside the root. The check is done at call
time; a symlink swapped in between the check and the open is not defended against (a race the
CLI's single user would have to stage against themselves); the final open uses ``O_NOFOLLOW``.
Only regular files are read, written or edited: a directory, FIFO, socket or device is refused
up front (``stat``) and again on the open descriptor (opened ``O_NONBLOCK``), so nothing blocks.

Shell (``shell``): the command runs *in* the root directory but is not confined to it. Its
timeout bounds the whole call, whatever the command does (see :class:`ShellTool`).
"""

from __future__ import annotations

import codecs
import errno
import os
import selectors
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import FoundationAIError

__all__ = [
    "DEFAULT_MAX_CHARS",
    "DEFAULT_SHELL_TIMEOUT",
    "KILL_GRACE",
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


_KIND_NAMES = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _kind(mode: int) -> str:
    """What a non-regular file is, in words (``"a FIFO (named pipe)"``, ``"a directory"``, …)."""
    for test, name in _KIND_NAMES:
        if test(mode):
            return name
    return "not a regular file"


class FileTools:
    """File access confined to ``root`` (default: the current directory).

    Every method takes paths relative to the root (absolute paths must resolve inside it) and
    raises :class:`ToolRefused` for any path that resolves outside it. Only *regular* files are
    read, written or edited: a directory, FIFO (named pipe), socket or device is refused without
    being opened in blocking mode (checked with ``stat`` first, then opened with ``O_NONBLOCK``
    and checked again with ``fstat`` on the open descriptor), so a FIFO can never block the tool.
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

    @staticmethod
    def _refuse_kind(path: str, mode: int) -> ToolRefused:
        return ToolRefused(
            f"refused: {path!r} is {_kind(mode)}; only regular files can be read, written or edited"
        )

    def _open_regular(self, p: Path, path: str, flags: int, *, create: bool = False) -> int:
        """A descriptor on the regular file ``p`` (``flags``: ``O_RDONLY`` or ``O_RDWR``).

        ``stat`` first (missing or not regular: refused without opening), then ``open`` with
        ``O_NONBLOCK | O_NOFOLLOW`` (a FIFO or device swapped in meanwhile cannot block, a symlink
        swapped in is refused) and ``fstat`` on the descriptor. ``create``: a missing file is
        created (``O_CREAT``), never truncated here.

        Raises:
            ToolRefused: missing (unless ``create``), not a regular file, or an OS error.
        """
        try:
            mode = os.stat(p).st_mode
        except FileNotFoundError:
            if not create:
                raise ToolRefused(f"no such file: {path!r}") from None
        except OSError as exc:
            raise ToolRefused(f"cannot access {path!r}: {exc.strerror or exc}") from None
        else:
            if not stat.S_ISREG(mode):
                raise self._refuse_kind(path, mode)
        extra = os.O_CREAT if create else 0
        try:
            fd = os.open(p, flags | extra | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            if exc.errno in (errno.ENXIO, errno.EISDIR, errno.ELOOP, errno.EOPNOTSUPP):
                raise ToolRefused(f"refused: {path!r} is not a regular file") from None
            raise ToolRefused(f"cannot open {path!r}: {exc.strerror or exc}") from None
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise self._refuse_kind(path, mode)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    @staticmethod
    def _read_fd(fd: int, limit: int | None = None) -> bytes:
        """The file's bytes from the start; at most ``limit`` bytes when given."""
        chunks: list[bytes] = []
        got = 0
        while limit is None or got < limit:
            chunk = os.read(fd, 1 << 16 if limit is None else min(1 << 16, limit - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    @staticmethod
    def _write_fd(fd: int, data: bytes) -> None:
        """Replace the whole content of the file open on ``fd`` with ``data``."""
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    def read_file(self, path: str) -> str:
        """Read a UTF-8 text file inside the root; long files are truncated to ``max_chars``
        characters. At most ``4 * max_chars + 4`` bytes are read (a character is at most 4 UTF-8
        bytes), so a huge file costs no more memory than a long one.

        Raises:
            ToolRefused: outside the root, missing, not a regular file (directory, FIFO, socket,
                device), or not UTF-8 text.
        """
        p = self.resolve(path)
        limit = 4 * self.max_chars + 4
        fd = self._open_regular(p, path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            data = self._read_fd(fd, limit)
            whole = len(data) < limit or not os.read(fd, 1)
        except OSError as exc:
            raise ToolRefused(f"cannot read {path!r}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)
        try:
            # A cut-off read may end inside a character: decode the prefix, not the fragment.
            text = codecs.getincrementaldecoder("utf-8")().decode(data, final=whole)
        except UnicodeDecodeError:
            raise ToolRefused(f"{path!r} is not UTF-8 text") from None
        if whole:
            return truncate(text, self.max_chars)
        return f"{text[: self.max_chars]}\n[... truncated: the file is {size:,} bytes; only the first {self.max_chars} characters are shown]"

    def write_file(self, path: str, content: str) -> str:
        """Create or overwrite a text file inside the root (parent directories are created).

        Returns a one-line confirmation.

        Raises:
            ToolRefused: a path outside the root, or an existing path that is not a regular file
                (directory, FIFO, socket, device), or an OS error (e.g. a parent is a file).
        """
        p = self.resolve(path)
        data = content.encode("utf-8")
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ToolRefused(
                f"cannot create the parent directory of {path!r}: {exc.strerror or exc}"
            ) from None
        fd = self._open_regular(p, path, os.O_WRONLY, create=True)
        try:
            self._write_fd(fd, data)
        except OSError as exc:
            raise ToolRefused(f"cannot write {path!r}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)
        return f"wrote {len(data)} bytes to {self._shown(p)}"

    def edit_file(self, path: str, old: str, new: str) -> str:
        """Replace the one occurrence of ``old`` by ``new`` in a UTF-8 text file inside the root.

        Raises:
            ToolRefused: outside the root, missing file, not a regular file, not UTF-8 text,
                ``old`` empty, absent or not unique (the file is then unchanged).
        """
        p = self.resolve(path)
        if not old:
            raise ToolRefused("'old' must not be empty")
        fd = self._open_regular(p, path, os.O_RDWR)
        try:
            try:
                raw = self._read_fd(fd)
            except OSError as exc:
                raise ToolRefused(f"cannot read {path!r}: {exc.strerror or exc}") from None
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ToolRefused(f"{path!r} is not UTF-8 text") from None
            count = text.count(old)
            if count == 0:
                raise ToolRefused(f"'old' text not found in {path!r}")
            if count > 1:
                raise ToolRefused(f"'old' text occurs {count} times in {path!r}; give more context")
            try:
                self._write_fd(fd, text.replace(old, new, 1).encode("utf-8"))
            except OSError as exc:
                raise ToolRefused(f"cannot write {path!r}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)
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
