"""The file toolset (``read``, ``write``, ``edit``, ``list``, ``search_file``) over a real
directory confined to its root and over an in-memory file system; confinement against every
path trick (``..``, absolute paths, symbolic links out and in loops, hard links, a parent swapped
for a link while writing), size caps and non-UTF-8 content; the tools through a real session."""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from foundation_ai.agentic import AgentSession, InMemorySessionStore, ScriptedModel, call, say
from foundation_ai.agentic.toolsets import (
    FileToolset,
    LocalFileSystem,
    MemoryFileSystem,
    PathRefused,
    ToolRefused,
)
from foundation_ai.errors import FoundationAIError
from foundation_ai.types import TextContent

FILES = {
    "notes.txt": "alpha\nbeta\ngamma\n",
    "sub/deep.txt": "deep\n",
    "sub/code.py": "def f():\n    return 1\n",
}


def _local(tmp_path: Path) -> FileToolset:
    root = tmp_path / "root"
    root.mkdir()
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    (tmp_path / "secret.txt").write_text("top secret", encoding="utf-8")
    return FileToolset(root)


@pytest.fixture(params=["local", "memory"])
def files(request: pytest.FixtureRequest, tmp_path: Path) -> FileToolset:
    if request.param == "local":
        return _local(tmp_path)
    return FileToolset(MemoryFileSystem(dict(FILES)))


# -- behaviour common to both file systems --------------------------------------------------------


def test_read_write_edit_list_round_trip(files: FileToolset) -> None:
    assert files.read("notes.txt") == "alpha\nbeta\ngamma\n"
    assert files.read("sub/../notes.txt") == "alpha\nbeta\ngamma\n"
    assert files.write("new/dir/file.txt", "hello") == "wrote 5 bytes to new/dir/file.txt"
    assert files.read("new/dir/file.txt") == "hello"
    assert files.edit("notes.txt", "beta", "BETA") == "edited notes.txt"
    assert files.read("notes.txt") == "alpha\nBETA\ngamma\n"
    assert files.list(".").splitlines() == ["new/", "notes.txt", "sub/"]
    assert files.list("new/dir") == "file.txt"


def test_read_pages_by_lines_with_offset_and_limit(files: FileToolset) -> None:
    assert files.read("notes.txt", offset=2, limit=1) == "beta\n[... 1 more lines; continue with offset=3]"
    assert files.read("notes.txt", offset=2) == "beta\ngamma\n"
    assert files.read("notes.txt", limit=1) == "alpha\n[... 2 more lines; continue with offset=2]"
    with pytest.raises(ToolRefused, match="past the end"):
        files.read("notes.txt", offset=10)
    with pytest.raises(ToolRefused, match="offset must be a line number"):
        files.read("notes.txt", offset=0)


def test_edit_requires_a_unique_old_string_unless_replace_all(files: FileToolset) -> None:
    files.write("twice.txt", "x and x")
    with pytest.raises(ToolRefused, match="occurs 2 times"):
        files.edit("twice.txt", "x", "y")
    assert files.read("twice.txt") == "x and x"
    assert files.edit("twice.txt", "x", "y", replace_all=True) == "edited twice.txt (2 replacements)"
    assert files.read("twice.txt") == "y and y"
    with pytest.raises(ToolRefused, match="not found"):
        files.edit("twice.txt", "zeta", "eta")
    with pytest.raises(ToolRefused, match="must not be empty"):
        files.edit("twice.txt", "", "eta")


def test_non_utf8_content_is_a_clear_error(files: FileToolset) -> None:
    files.fs.write("bin.dat", b"\xff\xfe bad")
    for attempt in (
        lambda: files.read("bin.dat"),
        lambda: files.read("bin.dat", offset=1),
        lambda: files.edit("bin.dat", "bad", "good"),
    ):
        with pytest.raises(ToolRefused, match=r"'bin\.dat' is not UTF-8 text"):
            attempt()
    assert files.fs.read("bin.dat", 100).data == b"\xff\xfe bad"
    with pytest.raises(ToolRefused, match="lone surrogate"):
        files.write("s.txt", "a\ud800b")


def test_edit_refuses_files_above_the_size_cap(files: FileToolset) -> None:
    small = FileToolset(files.fs, max_file_bytes=10)
    with pytest.raises(ToolRefused, match=r"is 17 bytes; files larger than 10 bytes are not edited"):
        small.edit("notes.txt", "alpha", "omega")
    assert small.read("notes.txt") == "alpha\nbeta\ngamma\n"


def test_paths_leaving_the_root_are_path_refusals(files: FileToolset) -> None:
    for path in ("../secret.txt", "sub/../../secret.txt", "..", "./../root/../secret.txt"):
        for attempt in (
            lambda p=path: files.read(p),
            lambda p=path: files.write(p, "pwned"),
            lambda p=path: files.edit(p, "a", "b"),
            lambda p=path: files.list(p),
            lambda p=path: files.search("x", p),
        ):
            with pytest.raises(PathRefused, match="outside the root"):
                attempt()


def test_search_file_reports_matching_lines_bounded(files: FileToolset) -> None:
    out = files.search(r"^(alpha|deep)$")
    assert out.splitlines()[:2] == ["notes.txt:1: alpha", "sub/deep.txt:1: deep"]
    assert out.endswith("[searched 3 files]")
    assert files.search("return", "sub", glob="*.py").splitlines()[0] == "sub/code.py:2:     return 1"
    assert files.search("nothing-here").startswith("no matches")
    bounded = FileToolset(files.fs, max_matches=2)
    files.write("many.txt", "hit\n" * 50)
    out = bounded.search("hit")
    assert out.count("hit") == 2 and "stopped after 2 matches" in out
    with pytest.raises(ToolRefused, match="invalid regular expression"):
        files.search("(")
    files.fs.write("bin.dat", b"\xff hit")
    assert "skipped 1 (binary or too large)" in files.search("hit")


def test_tools_subset_and_names(files: FileToolset) -> None:
    assert [t.definition.name for t in files.tools()] == ["read", "write", "edit", "list", "search_file"]
    assert [t.definition.name for t in files.tools(["read", "list"])] == ["read", "list"]
    with pytest.raises(ToolRefused, match="unknown file tools"):
        files.tools(["delete"])
    schema = files.tools(["edit"])[0].definition.arguments.schema
    assert schema["required"] == ["path", "old_string", "new_string"]


def test_writes_and_edits_run_alone_in_call_order_after_the_other_calls(files: FileToolset) -> None:
    assert {t.definition.name: t.sequential for t in files.tools()} == {
        "read": False, "write": True, "edit": True, "list": False, "search_file": False,
    }  # fmt: skip
    model = ScriptedModel(
        [
            [  # one response: the second edit needs the first one's text
                call("edit", {"path": "notes.txt", "old_string": "alpha", "new_string": "A1"}),
                call("edit", {"path": "notes.txt", "old_string": "A1", "new_string": "A2"}),
                call("read", {"path": "notes.txt"}),
                call("write", {"path": "log.txt", "content": "one"}),
                call("edit", {"path": "log.txt", "old_string": "one", "new_string": "two"}),
            ],
            say("done"),
        ]
    )
    session = AgentSession.builder(model).with_tools(files.tools()).with_store(InMemorySessionStore()).build()
    turn = session.run_turn("go")
    first, second, read, write, edit = turn.tool_results()
    assert [r.error_detail for r in (first, second, write, edit)] == [None] * 4
    assert read.content == TextContent("alpha\nbeta\ngamma\n")  # the read ran first, beside no write
    assert files.read("notes.txt") == "A2\nbeta\ngamma\n"
    assert files.read("log.txt") == "two"


def test_two_edits_of_one_local_file_from_two_threads_both_apply(tmp_path: Path) -> None:
    fs = _local(tmp_path).fs
    barrier = threading.Barrier(2)

    def edit(line: bytes) -> None:
        def change(old: bytes) -> bytes:
            threading.Event().wait(0.05)  # a slow edit: the other thread's edit starts meanwhile
            return old + line

        barrier.wait()
        fs.update("notes.txt", change, 1 << 20)

    threads = [threading.Thread(target=edit, args=(line,)) for line in (b"one\n", b"two\n")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    text = (tmp_path / "root" / "notes.txt").read_bytes()
    assert text.startswith(b"alpha\nbeta\ngamma\n")
    assert sorted(text.splitlines()[3:]) == [b"one", b"two"]  # neither edit lost


def test_a_local_read_beside_writes_never_sees_the_file_cut_short(tmp_path: Path) -> None:
    fs = _local(tmp_path).fs
    versions = [b"a" * 400_000, b"b" * 400_000]
    fs.write("big.txt", versions[0])
    done = threading.Event()

    def writer() -> None:
        for i in range(60):
            fs.write("big.txt", versions[i % 2])
        done.set()

    t = threading.Thread(target=writer)
    t.start()
    seen = set()
    while not done.is_set():
        data = fs.read("big.txt", 1 << 20).data
        seen.add(len(data))
        assert data in versions, f"a read saw {len(data):,} bytes"
    t.join()
    assert seen == {400_000}


def test_file_tools_run_through_a_session(files: FileToolset) -> None:
    model = ScriptedModel(
        [
            [
                call("read", {"path": "notes.txt", "offset": 1, "limit": 1}),
                call("edit", {"path": "notes.txt", "old_string": "gamma", "new_string": "delta"}),
                call("read", {"path": "../secret.txt"}),
            ],
            call("search_file", {"pattern": "delta"}),
            say("done"),
        ]
    )
    session = AgentSession.builder(model).with_tools(files.tools()).with_store(InMemorySessionStore()).build()
    turn = session.run_turn("go")
    assert turn.ok and turn.text() == "done"
    read, edit, refused, search = turn.tool_results()
    assert read.content == TextContent("alpha\n[... 2 more lines; continue with offset=2]")
    assert edit.error_detail is None and edit.content == TextContent("edited notes.txt")
    assert refused.error_detail is not None and "PathRefused" in refused.error_detail
    assert "outside the root" in refused.error_detail
    assert isinstance(search.content, TextContent) and search.content.content.startswith("notes.txt:3: delta")


# -- a real directory ----------------------------------------------------------------------------


def test_path_refused_is_the_one_confinement_type() -> None:
    assert issubclass(PathRefused, ToolRefused) and issubclass(ToolRefused, FoundationAIError)


def test_absolute_paths_inside_the_root_are_accepted_elsewhere_refused(tmp_path: Path) -> None:
    files = _local(tmp_path)
    root = tmp_path / "root"
    assert files.read(str(root / "notes.txt")).startswith("alpha")
    for path in ("/etc/passwd", "/", str(tmp_path / "secret.txt"), str(root) + "/../secret.txt"):
        with pytest.raises(PathRefused, match="outside the root"):
            files.read(path)


def test_hard_link_to_a_file_outside_is_never_written(tmp_path: Path) -> None:
    """Issue 10 item 2: a hard link inside the root to a file outside read and overwrote it."""
    files = _local(tmp_path)
    os.link(tmp_path / "secret.txt", tmp_path / "root" / "linked.txt")
    with pytest.raises(PathRefused, match="2 hard links"):
        files.write("linked.txt", "pwned")
    with pytest.raises(PathRefused, match="2 hard links"):
        files.edit("linked.txt", "top", "pwned")
    assert (tmp_path / "secret.txt").read_text() == "top secret"


def test_symlink_loops_are_path_refusals(tmp_path: Path) -> None:
    """Issue 10 item 2: a symlink loop raised RuntimeError instead of the refusal type."""
    files = _local(tmp_path)
    root = tmp_path / "root"
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    os.symlink("self", root / "self")
    for path in ("loop_a", "loop_b/x.txt", "self"):
        for attempt in (lambda p=path: files.read(p), lambda p=path: files.write(p, "x")):
            with pytest.raises(PathRefused, match="symbolic links"):
                attempt()


def test_symlinks_inside_the_root_are_followed_outside_refused(tmp_path: Path) -> None:
    files = _local(tmp_path)
    root = tmp_path / "root"
    os.symlink("sub", root / "rel_dir")
    os.symlink(root / "sub" / "deep.txt", root / "abs_file")
    os.symlink("../notes.txt", root / "sub" / "up")
    os.symlink(tmp_path, root / "escape")
    os.symlink(tmp_path / "new.txt", root / "dangling_out")
    assert files.read("rel_dir/deep.txt") == "deep\n"
    assert files.read("abs_file") == "deep\n"
    assert files.read("sub/up").startswith("alpha")
    assert files.read("rel_dir/../notes.txt").startswith("alpha")  # '..' after a link: physical parent
    for path in ("escape/secret.txt", "dangling_out", "escape/new.txt"):
        with pytest.raises(PathRefused, match="outside the root"):
            files.write(path, "pwned")
    assert not (tmp_path / "new.txt").exists()
    assert "escape@" in files.list(".").splitlines()


def test_files_kinds_and_sizes(tmp_path: Path) -> None:
    files = _local(tmp_path)
    root = tmp_path / "root"
    os.mkfifo(root / "pipe")
    with pytest.raises(ToolRefused, match="is a FIFO"):
        files.write("pipe", "x")
    with pytest.raises(ToolRefused, match="is a directory"):
        files.read("sub")
    with pytest.raises(ToolRefused, match="not a directory"):
        files.write("notes.txt/inner.txt", "x")
    with pytest.raises(ToolRefused, match="no such file"):
        files.read("missing.txt")
    with open(root / "huge.bin", "wb") as f:  # sparse: 8 GiB of NUL bytes, valid UTF-8
        f.truncate(8 << 30)
    small = FileToolset(files.fs, max_chars=10, max_file_bytes=1 << 20)
    assert "the file is 8,589,934,592 bytes" in small.read("huge.bin")
    with pytest.raises(ToolRefused, match="8,589,934,592 bytes; files larger than 1,048,576 bytes"):
        small.edit("huge.bin", "\x00", "x")
    assert "skipped 1" in small.search("x", ".", glob="huge.bin")


def test_a_parent_swapped_for_a_symlink_never_redirects_a_write(tmp_path: Path) -> None:
    """Issue 10 item 2: swapping a parent directory for a symlink between the check and the
    open put 2 of 20,000 writes outside the root. With the walk from the root descriptor: none."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "a").mkdir(parents=True)
    outside.mkdir()
    files = FileToolset(root)
    stop = threading.Event()
    swaps = 0

    made = itertools.count()
    errors: list[BaseException] = []

    def swapper() -> None:
        # The writer creates a missing parent: a directory "a" it made while the real one was
        # moved aside is moved away too (to "made_<n>"), then the real one comes back.
        nonlocal swaps
        try:
            while not stop.is_set():
                os.rename(root / "a", root / "a_real")
                try:
                    os.symlink(outside, root / "a")
                    os.unlink(root / "a")
                except FileExistsError:
                    pass
                while True:
                    try:
                        os.rename(root / "a_real", root / "a")
                        break
                    except OSError:
                        os.rename(root / "a", root / f"made_{next(made)}")
                swaps += 1
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    t = threading.Thread(target=swapper, daemon=True)
    t.start()
    written = refused = 0
    try:
        for i in range(4000):
            try:
                files.write(f"a/f{i % 50}.txt", "data")
                written += 1
            except ToolRefused:
                refused += 1
    finally:
        stop.set()
        t.join()
    assert errors == [] and swaps > 0 and written + refused == 4000
    assert list(outside.iterdir()) == []
    assert written > 0


ROOT_PARTS = ["a", "b", "..", ".", "", "link_in", "link_out", "loop", "hard", "a/../..", "/etc"]


@seed(20261130)
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.sampled_from(ROOT_PARTS), min_size=1, max_size=6), absolute=st.booleans())
def test_path_fuzzer_never_touches_anything_outside_the_root(
    tmp_path: Path, parts: list[str], absolute: bool
) -> None:
    """Any path built from tricky components either is refused with a ToolRefused or writes a
    file whose real location is inside the root; files outside never change."""
    base = tmp_path / "fuzz"
    if not base.exists():
        (base / "root" / "a" / "b").mkdir(parents=True)
        (base / "out").mkdir()
        (base / "out" / "target").write_text("outside")
        os.symlink("a", base / "root" / "link_in")
        os.symlink(base / "out", base / "root" / "link_out")
        os.symlink("loop", base / "root" / "loop")
        os.link(base / "out" / "target", base / "root" / "hard")
    root = base / "root"
    fs = LocalFileSystem(root)
    files = FileToolset(fs)
    path = "/".join(parts)
    if absolute:
        path = str(root) + "/" + path
    try:
        files.write(path, "fuzz")
        files.edit(path, "fuzz", "fuzzed")
    except ToolRefused:
        pass
    finally:
        fs.close()
    assert sorted(p.name for p in (base / "out").iterdir()) == ["target"]
    assert (base / "out" / "target").read_text() == "outside"
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            if not p.is_symlink():
                assert p.resolve().is_relative_to(root.resolve())
