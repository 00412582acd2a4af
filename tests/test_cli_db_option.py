"""``--db`` takes a file path or a URL on every command (``_cli/locations.py``), and a ``--db``
file that does not exist is an error for the read-only commands. The CLI runs as a subprocess
with its config and data dirs under the test's tmp dir (``tests/_cli_helpers.cli_env``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests._cli_helpers import CLI, cli_env, text_stream
from tests._fixture_server import FixtureServer


def _run(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=cli_env(home), timeout=120, cwd=cwd or home
    )


def test_a_session_stored_with_a_sqlite_url_is_listed_and_shown_with_a_plain_path(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    with FixtureServer() as server:
        server.queue(text_stream("forty-two"))
        out = _run(
            tmp_path, "run", "-m", "openai:m", "--base-url", server.base_url, "--db", f"sqlite:///{db}", "Hi"
        )
    assert out.returncode == 0, out.stderr
    listed = _run(tmp_path, "sessions", "--db", str(db))
    assert listed.returncode == 0 and "Hi" in listed.stdout, listed
    sid = listed.stdout.splitlines()[1].split()[0]
    shown = _run(tmp_path, "show", sid, "--db", "s.sqlite3")  # relative to the cwd
    assert shown.returncode == 0 and "assistant> forty-two" in shown.stdout, shown
    shown = _run(tmp_path, "show", sid, "--db", f"sqlite:///{db}")
    assert shown.returncode == 0 and "you> Hi" in shown.stdout, shown


def test_a_db_path_that_does_not_exist_is_an_error_for_sessions_and_show(tmp_path: Path) -> None:
    for args in (["sessions"], ["show", "abc"]):
        for spelling in ("typo.sqlite3", f"sqlite:///{tmp_path / 'typo.sqlite3'}"):
            out = _run(tmp_path, *args, "--db", spelling)
            assert out.returncode == 2, out
            assert out.stdout == ""
            assert out.stderr.count("\n") == 1 and "no such file" in out.stderr, out.stderr
    assert not (tmp_path / "typo.sqlite3").exists()  # nothing was created


def test_the_default_store_missing_is_still_an_empty_listing(tmp_path: Path) -> None:
    out = _run(tmp_path, "sessions")
    assert out.returncode == 0 and "no stored sessions" in out.stdout, out


def test_a_db_url_of_another_scheme_is_one_line_exit_2(tmp_path: Path) -> None:
    out = _run(tmp_path, "sessions", "--db", "mysql://h/x")
    assert out.returncode == 2 and "expected a file path, sqlite:///PATH or postgresql://" in out.stderr
    assert out.stderr.count("\n") == 1
