"""Unit tests of the CLI's built-in tools (``foundation_ai._cli.builtin_tools``): the ``files``
tools stay inside their root whatever the path says, and the ``shell`` tool asks first, times out
and truncates."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from foundation_ai._cli.builtin_tools import FileTools, ShellTool, ToolRefused, truncate
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
    (root / "big.txt").write_text("x" * 1000, encoding="utf-8")
    out = FileTools(root, max_chars=100).read_file("big.txt")
    assert out.startswith("x" * 100)
    assert "900 more characters truncated" in out


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


def test_shell_output_is_truncated(tmp_path: Path) -> None:
    sh = ShellTool(tmp_path, confirm=None, max_chars=200)
    out = sh.run_command("yes | head -c 5000")
    assert len(out) < 300
    assert "more characters truncated" in out


def test_shell_empty_command_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolRefused, match="empty command"):
        ShellTool(tmp_path).run_command("   ")
