"""A session store that cannot be written: ``sessions`` and ``show`` only read, so they work on
a database file in a read-only place (a read-only mount, or a file and directory the user may
not write); ``run`` and ``chat``, which must write, fail with one clear line. Also
``SqliteSessionStore(read_only=True)`` itself.

The read-only place is real: for an ordinary user the file is mode 0444 in a 0555 directory; as
root (who may write anyway) the directory is bind-mounted read-only in a private mount
namespace (``unshare -m``), and the tests are skipped where neither is possible.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from foundation_ai.agentic import AgentSession, ScriptedModel, SqliteSessionStore, say
from foundation_ai.agentic.errors import StoreError
from foundation_ai.types import Messages, SessionRecord
from tests._cli_helpers import CLI, cli_env

ROOT = os.geteuid() == 0


def _can_remount() -> bool:
    if not ROOT or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount --bind /tmp /tmp && mount -o remount,ro,bind /tmp /tmp"],
        capture_output=True,
    )
    return probe.returncode == 0


needs_read_only_place = pytest.mark.skipif(
    ROOT and not _can_remount(), reason="root without a private mount namespace: no read-only place"
)


def stored_session(db: Path) -> str:
    """A store at ``db`` holding one finished turn; returns its session id."""
    store = SqliteSessionStore(db)
    session = (
        AgentSession.builder(ScriptedModel([say("Rome was not built in a day.")])).with_store(store).build()
    )
    session.run_turn("Tell me about Rome.")
    session.close()
    store.close()
    return str(session.session_id)


@pytest.fixture()
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory for the store, made read-only by :func:`fa_read_only` (restored after)."""
    d = tmp_path / "ro"
    d.mkdir()
    yield d
    d.chmod(0o755)
    for f in d.iterdir():
        f.chmod(0o644)


def run_read_only(home: Path, ro: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The command ``argv`` with ``ro`` (and every file in it) read-only for it."""
    if ROOT:
        script = f'mount --bind "{ro}" "{ro}" && mount -o remount,ro,bind "{ro}" "{ro}" && exec "$@"'
        full = ["unshare", "-m", "sh", "-c", script, "sh", *argv]
    else:
        for f in ro.iterdir():
            f.chmod(0o444)
        ro.chmod(0o555)
        full = list(argv)
    return subprocess.run(full, capture_output=True, text=True, timeout=120, env=cli_env(home))


def fa_read_only(home: Path, ro: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``foundation-ai ARGS`` with ``ro`` (and every file in it) read-only for the command."""
    return run_read_only(home, ro, *CLI, *args)


@needs_read_only_place
def test_sessions_and_show_read_a_store_in_a_read_only_place(tmp_path: Path, read_only_dir: Path) -> None:
    db = read_only_dir / "ro.db"
    session_id = stored_session(db)
    before = db.read_bytes()
    listing = fa_read_only(tmp_path, read_only_dir, "sessions", "--db", str(db))
    assert listing.returncode == 0, listing.stderr
    assert session_id in listing.stdout and "Tell me about Rome." in listing.stdout
    shown = fa_read_only(tmp_path, read_only_dir, "show", session_id[:10], "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    assert "you> Tell me about Rome." in shown.stdout
    assert "assistant> Rome was not built in a day." in shown.stdout
    assert db.read_bytes() == before
    assert sorted(p.name for p in read_only_dir.iterdir()) == ["ro.db"]


@needs_read_only_place
def test_run_on_a_read_only_store_is_one_clear_line(tmp_path: Path, read_only_dir: Path) -> None:
    db = read_only_dir / "ro.db"
    stored_session(db)
    r = fa_read_only(tmp_path, read_only_dir, "run", "-q", "--db", str(db), "hi")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"foundation-ai: error: cannot open the session store '{db}'")
    assert "read-only" in r.stderr and "--db" in r.stderr


@needs_read_only_place
def test_run_on_a_read_only_store_another_process_holds_open_is_one_clear_line(
    tmp_path: Path, read_only_dir: Path
) -> None:
    # while another process has the store open, its -wal and -shm files exist, and SQLite opens
    # the file read-only without a word (it can even read it): the refusal must come before the
    # turn, not as a failed write after the answer
    db = read_only_dir / "ro.db"
    stored_session(db)
    holder = sqlite3.connect(db)
    try:
        holder.execute("SELECT count(*) FROM records").fetchone()
        assert (read_only_dir / "ro.db-shm").exists()
        r = fa_read_only(tmp_path, read_only_dir, "run", "-q", "--db", str(db), "hi")
    finally:
        holder.close()
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"foundation-ai: error: cannot open the session store '{db}'")
    assert "read-only" in r.stderr and "--db" in r.stderr


@needs_read_only_place
def test_a_writable_store_in_a_read_only_place_is_refused_when_opened(
    tmp_path: Path, read_only_dir: Path
) -> None:
    db = read_only_dir / "ro.db"
    stored_session(db)
    code = (
        "import sys\n"
        "from foundation_ai.agentic import SqliteSessionStore\n"
        "from foundation_ai.agentic.errors import StoreError\n"
        "try:\n"
        "    SqliteSessionStore(sys.argv[1])\n"
        "except StoreError as exc:\n"
        "    print(exc)\n"
        "    sys.exit(3)\n"
    )
    r = run_read_only(tmp_path, read_only_dir, sys.executable, "-c", code, str(db))
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert r.stdout.startswith(
        f"cannot open the session store '{db}': the file or its directory is read-only"
    )


def test_sessions_and_show_create_no_store_where_there_is_none(tmp_path: Path) -> None:
    db = tmp_path / "data" / "foundation-ai" / "sessions.sqlite3"  # the default file, missing
    env = cli_env(tmp_path)
    listing = subprocess.run([*CLI, "sessions"], capture_output=True, text=True, env=env)
    assert (listing.returncode, listing.stdout) == (0, "no stored sessions\n")
    shown = subprocess.run([*CLI, "show", "03abc"], capture_output=True, text=True, env=env)
    assert shown.returncode == 2 and "no stored session '03abc'" in shown.stderr
    named = subprocess.run([*CLI, "sessions", "--db", str(db)], capture_output=True, text=True, env=env)
    assert named.returncode == 2 and "no such file" in named.stderr  # a named --db must exist
    assert not db.parent.exists()


def test_read_only_store_loads_and_lists_and_refuses_writes(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    session_id = stored_session(db)
    before = db.read_bytes()
    store = SqliteSessionStore(db, read_only=True)
    try:
        assert [m.session_id for m in store.list_sessions()] == [session_id]
        assert len(store.load(session_id)) == 3  # prompt, answer, summary
        with pytest.raises(StoreError, match="readonly"):
            store.append(session_id, [SessionRecord.Conversation(message=Messages.user("more"))])
    finally:
        store.close()
    assert db.read_bytes() == before


def test_read_only_store_refuses_a_file_that_is_not_a_session_store(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    sqlite3.connect(other).close()  # an empty database: no tables, user_version 0
    with pytest.raises(StoreError, match="holds no session store"):
        SqliteSessionStore(other, read_only=True)
    with pytest.raises(StoreError, match="cannot open"):
        SqliteSessionStore(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()
