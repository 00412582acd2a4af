"""Bad inputs to the CLI end in one line naming the problem and exit status 2, never a Python
traceback (issue 28, section 5): a blank ``submit --turn-id``, a DBOS database file that is not a
database, a ``config.toml`` nested 5,000 levels deep. Each runs the real CLI in a subprocess."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests._cli_helpers import CLI, cli_env


def run_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        env=cli_env(home),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def one_line_exit_2(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("turn_id", [" ", "", "\t", "a\nb"])
def test_submit_with_a_blank_turn_id_is_one_line_and_exit_2(tmp_path: Path, turn_id: str) -> None:
    pytest.importorskip("dbos")
    db = tmp_path / "durable.sqlite3"
    proc = run_cli(tmp_path, "submit", "s1", "hello", "--turn-id", turn_id, "--db", f"sqlite:///{db}")
    one_line_exit_2(proc, "turn id")
    assert proc.stdout == ""  # no id printed: nothing was enqueued


def test_a_garbage_dbos_database_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    pytest.importorskip("dbos")
    db = tmp_path / "durable.sqlite3"
    Path(f"{db}.dbos").write_bytes(b"this is not a database, just some bytes\x00\x01\x02" * 200)
    db.touch()  # the durable database itself exists (read-only commands refuse a missing one)
    for args in (["submit", "s1", "hello"], ["status", "turn-1"]):
        proc = run_cli(tmp_path, *args, "--db", f"sqlite:///{db}")
        one_line_exit_2(proc, "durable.sqlite3.dbos")


def test_a_config_toml_with_a_5000_deep_array_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "config" / "foundation-ai"
    config.mkdir(parents=True)
    (config / "config.toml").write_text("model = " + "[" * 5000 + "]" * 5000 + "\n")
    proc = run_cli(tmp_path, "run", "hello")
    one_line_exit_2(proc, "config.toml", "nested too deeply")
