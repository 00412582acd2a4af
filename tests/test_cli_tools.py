"""Unit tests of the CLI's built-in tools (``foundation_ai._cli.builtin_tools``): the ``files``
tools stay inside their root whatever the path says, and the ``shell`` tool asks first, times out
and truncates."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from foundation_ai.agentic.toolsets.builtin import FileTools, ShellTool, ToolRefused, truncate
from foundation_ai.errors import FoundationAIError


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    (r / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    (r / "sub").mkdir()
    (r / "sub" / "deep.txt").write_text("deep", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("top secret", encoding="utf-8")
    return r


def test_tool_refused_is_a_foundation_error() -> None:
    assert issubclass(ToolRefused, FoundationAIError)


def test_read_write_edit_inside_root(root: Path) -> None:
    ft = FileTools(root)
    assert ft.read_file("notes.txt") == "alpha\nbeta\n"
    assert ft.read_file("sub/deep.txt") == "deep"
    assert ft.read_file("sub/../notes.txt") == "alpha\nbeta\n"  # '..' that stays inside is fine
    assert "wrote 5 bytes" in ft.write_file("new/dir/file.txt", "hello")
    assert (root / "new" / "dir" / "file.txt").read_text() == "hello"
    assert ft.edit_file("notes.txt", "beta", "gamma") == "edited notes.txt"
    assert (root / "notes.txt").read_text() == "alpha\ngamma\n"
    listing = ft.list_dir(".")
    assert listing.splitlines() == ["new/", "notes.txt", "sub/"]


def test_absolute_path_inside_root_is_accepted(root: Path) -> None:
    ft = FileTools(root)
    assert ft.read_file(str(root / "notes.txt")) == "alpha\nbeta\n"


@pytest.mark.parametrize(
    "path",
    ["../secret.txt", "sub/../../secret.txt", "..", "/etc/passwd", "/", "./../root/../secret.txt"],
)
def test_paths_outside_root_are_refused(root: Path, path: str) -> None:
    ft = FileTools(root)
    with pytest.raises(ToolRefused, match="outside the root"):
        ft.read_file(path)
    with pytest.raises(ToolRefused, match="outside the root"):
        ft.write_file(path, "pwned")
    with pytest.raises(ToolRefused, match="outside the root"):
        ft.edit_file(path, "a", "b")
    assert (root.parent / "secret.txt").read_text() == "top secret"


def test_symlink_pointing_outside_is_refused(root: Path) -> None:
    os.symlink(root.parent / "secret.txt", root / "link.txt")
    os.symlink(root.parent, root / "escape")
    ft = FileTools(root)
    with pytest.raises(ToolRefused, match="outside the root"):
        ft.read_file("link.txt")
    with pytest.raises(ToolRefused, match="outside the root"):
        ft.write_file("link.txt", "pwned")
    with pytest.raises(ToolRefused, match="outside the root"):
        ft.read_file("escape/secret.txt")
    with pytest.raises(ToolRefused, match="outside the root"):
        ft.write_file("escape/new.txt", "pwned")
    assert not (root.parent / "new.txt").exists()
    assert (root.parent / "secret.txt").read_text() == "top secret"


def test_dangling_symlink_pointing_outside_is_refused(root: Path) -> None:
    os.symlink(root.parent / "does-not-exist-yet.txt", root / "dangling")
    ft = FileTools(root)
    with pytest.raises(ToolRefused, match="outside the root"):
        ft.write_file("dangling", "pwned")
    assert not (root.parent / "does-not-exist-yet.txt").exists()


def test_symlink_inside_root_is_followed(root: Path) -> None:
    os.symlink(root / "sub" / "deep.txt", root / "shortcut")
    assert FileTools(root).read_file("shortcut") == "deep"


def test_bad_paths_and_edits_are_refused(root: Path) -> None:
    ft = FileTools(root)
    with pytest.raises(ToolRefused, match="invalid path"):
        ft.read_file("")
    with pytest.raises(ToolRefused, match="invalid path"):
        ft.read_file("a\x00b")
    with pytest.raises(ToolRefused, match="no such file"):
        ft.read_file("missing.txt")
    with pytest.raises(ToolRefused, match="not found"):
        ft.edit_file("notes.txt", "zeta", "eta")
    (root / "twice.txt").write_text("x x", encoding="utf-8")
    with pytest.raises(ToolRefused, match="occurs 2 times"):
        ft.edit_file("twice.txt", "x", "y")
    assert (root / "twice.txt").read_text() == "x x"
    with pytest.raises(ToolRefused, match="is a directory"):
        ft.write_file("sub", "no")
    (root / "bin.dat").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ToolRefused, match="not UTF-8"):
        ft.read_file("bin.dat")


def test_long_file_is_truncated(root: Path) -> None:
    (root / "big.txt").write_text("x" * 300, encoding="utf-8")
    out = FileTools(root, max_chars=100).read_file("big.txt")
    assert out.startswith("x" * 100 + "\n")
    assert "200 more characters truncated" in out
    (root / "bigger.txt").write_text("x" * 1000, encoding="utf-8")
    out = FileTools(root, max_chars=100).read_file("bigger.txt")
    assert out.startswith("x" * 100 + "\n")
    assert "the file is 1,000 bytes; only the first 100 characters are shown" in out


def test_read_file_reads_only_a_bounded_prefix(root: Path) -> None:
    """Tester defect 3: read_file loaded the whole file before truncating. A sparse 64 GiB file
    (NUL bytes are valid UTF-8) can only be answered by reading a bounded prefix."""
    with open(root / "huge.bin", "wb") as f:
        f.truncate(64 << 30)
    out = FileTools(root, max_chars=50).read_file("huge.bin")
    assert out.startswith("\x00" * 50 + "\n")
    assert "the file is 68,719,476,736 bytes" in out


def test_read_file_cut_inside_a_multibyte_character(root: Path) -> None:
    """The bounded read may end inside a UTF-8 sequence: that is not "not UTF-8"."""
    (root / "accents.txt").write_text("é" * 500, encoding="utf-8")  # 1000 bytes, 2 per character
    out = FileTools(root, max_chars=101).read_file("accents.txt")  # reads 408 bytes
    assert out.startswith("é" * 101 + "\n")


def test_edit_file_on_non_utf8_is_refused(root: Path) -> None:
    """Tester defect 3: edit_file raised UnicodeDecodeError; its docstring promises ToolRefused."""
    (root / "bin.dat").write_bytes(b"\xff\xfe bad")
    with pytest.raises(ToolRefused, match="not UTF-8"):
        FileTools(root).edit_file("bin.dat", "bad", "good")
    assert (root / "bin.dat").read_bytes() == b"\xff\xfe bad"


def test_fifo_is_refused_without_blocking(root: Path) -> None:
    """Tester defect 1: write_file on a FIFO blocked forever (no reader) and read_file called it
    "no such file". Only regular files are read, written or edited; a FIFO is refused at once.
    (A regression would hang here, so the check runs in a thread the test can give up on.)"""
    import threading

    os.mkfifo(root / "pipe")
    ft = FileTools(root)
    errors: list[str] = []

    def attempts() -> None:
        for call in (
            lambda: ft.write_file("pipe", "x"),
            lambda: ft.read_file("pipe"),
            lambda: ft.edit_file("pipe", "a", "b"),
        ):
            try:
                call()
            except ToolRefused as exc:
                errors.append(str(exc))

    worker = threading.Thread(target=attempts, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "a FIFO blocked the files tool"
    assert len(errors) == 3
    assert all("'pipe' is a FIFO (named pipe)" in e and "only regular files" in e for e in errors)
    assert stat.S_ISFIFO(os.lstat(root / "pipe").st_mode)  # still a FIFO: nothing replaced it


def test_socket_device_and_directory_are_refused(root: Path) -> None:
    """Tester defect 1: anything but a regular file is refused with a clear message."""
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(root / "sock"))
        ft = FileTools(root)
        for path, kind in [("sock", "a socket"), ("sub", "a directory")]:
            with pytest.raises(ToolRefused, match=f"is {kind}; only regular files"):
                ft.read_file(path)
            with pytest.raises(ToolRefused, match=f"is {kind}; only regular files"):
                ft.write_file(path, "x")
            with pytest.raises(ToolRefused, match=f"is {kind}; only regular files"):
                ft.edit_file(path, "a", "b")
    finally:
        sock.close()
    os.symlink("/dev/null", root / "null")  # resolves outside the root: refused before any kind check
    with pytest.raises(ToolRefused, match="outside the root"):
        FileTools(root).write_file("null", "x")
    dev = FileTools("/dev")
    with pytest.raises(ToolRefused, match="is a character device"):
        dev.read_file("zero")
    with pytest.raises(ToolRefused, match="is a character device"):
        dev.write_file("null", "x")


def test_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ToolRefused, match="not a directory"):
        FileTools(tmp_path / "nope")


def test_truncate() -> None:
    assert truncate("abc", 5) == "abc"
    assert truncate("abcdef", 3) == "abc\n[... 3 more characters truncated]"


def test_shell_runs_after_confirmation(tmp_path: Path) -> None:
    asked: list[str] = []

    def confirm(cmd: str) -> bool:
        asked.append(cmd)
        return True

    sh = ShellTool(tmp_path, confirm=confirm)
    out = sh.run_command("echo hello; echo oops >&2; exit 3")
    assert asked == ["echo hello; echo oops >&2; exit 3"]
    assert out.startswith("exit code 3\n")
    assert "--- stdout ---\nhello\n" in out
    assert "--- stderr ---\noops\n" in out


def test_shell_runs_in_its_directory(tmp_path: Path) -> None:
    out = ShellTool(tmp_path, confirm=None).run_command("pwd")
    assert str(tmp_path.resolve()) in out


def test_shell_declined_command_does_not_run(tmp_path: Path) -> None:
    sh = ShellTool(tmp_path, confirm=lambda cmd: False)
    with pytest.raises(ToolRefused, match="declined"):
        sh.run_command("touch created.txt")
    assert not (tmp_path / "created.txt").exists()


def test_shell_timeout_kills_the_command(tmp_path: Path) -> None:
    sh = ShellTool(tmp_path, confirm=None, timeout=0.5)
    with pytest.raises(ToolRefused, match=r"timed out after 0\.5 s"):
        sh.run_command("sleep 30; touch late.txt")
    assert not (tmp_path / "late.txt").exists()


def test_shell_timeout_is_a_bound_even_when_a_grandchild_holds_the_pipes(tmp_path: Path) -> None:
    """Tester defect 2: ``setsid sleep 8 &`` made a 2 s timeout last 8 s (an unbounded
    ``communicate()`` waited for the grandchild, in another session, to close the pipes);
    ``setsid sleep infinity &`` hung forever. The call now stops reading at the deadline and
    reports the shell's exit code with a note. (A regression would hang: run in a thread.)"""
    import threading

    pid_file = tmp_path / "grandchild.pid"
    sh = ShellTool(tmp_path, confirm=None, timeout=0.5)
    results: list[str] = []
    worker = threading.Thread(
        target=lambda: results.append(
            sh.run_command(f"echo started; setsid sh -c 'echo $$ > {pid_file}; exec sleep 600' &")
        ),
        daemon=True,
    )
    try:
        worker.start()
        worker.join(60)
        assert not worker.is_alive(), "the shell tool waited for a grandchild in another session"
        (out,) = results
        assert out.startswith("exit code 0\n--- stdout ---\nstarted\n")
        assert "a background process kept the output open" in out
    finally:
        for _ in range(100):
            if pid_file.exists() and pid_file.read_text().strip():
                os.kill(int(pid_file.read_text()), 9)  # the grandchild escaped the group: ours to end
                break
            threading.Event().wait(0.1)


def test_shell_timeout_keeps_the_output_so_far(tmp_path: Path) -> None:
    sh = ShellTool(tmp_path, confirm=None, timeout=0.5)
    with pytest.raises(
        ToolRefused,
        match=r"timed out after 0\.5 s and was killed; its output until then:\n--- stdout ---\nfirst\n",
    ):
        sh.run_command("echo first; sleep 30")


def test_shell_output_kept_is_bounded(tmp_path: Path) -> None:
    sh = ShellTool(tmp_path, confirm=None, max_chars=100)
    out = sh.run_command("head -c 100000 /dev/zero | tr '\\0' x")
    assert out.startswith("exit code 0\n--- stdout ---\n" + "x" * 50)
    assert "more characters truncated" in out


def test_shell_output_is_truncated(tmp_path: Path) -> None:
    sh = ShellTool(tmp_path, confirm=None, max_chars=200)
    out = sh.run_command("yes | head -c 5000")
    assert len(out) < 300
    assert "more characters truncated" in out


def test_shell_empty_command_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolRefused, match="empty command"):
        ShellTool(tmp_path).run_command("   ")
