"""The durable commands as a newcomer runs them on one machine (``docs/scaling.md``): a worker
started with the installed ``foundation-ai`` script and ``--agent mymod:agent`` from a module
in the current directory, a plain file path as ``--db``, ``status`` in words, ``follow`` in
the lines ``show`` prints; and the one-line error without the ``durable`` extra."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("dbos")

from tests._cli_helpers import CLI, SRC, cli_env
from tests._durable_app import FakeModelServer

ROOT = str(Path(SRC).parent)
SCRIPT = str(Path(sys.executable).with_name("foundation-ai"))  # not `python -m`: no cwd on sys.path
MYMOD = "from tests._durable_app import agent  # noqa: F401\n"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = cli_env(home, **extra)
    env["PYTHONPATH"] = os.pathsep.join([SRC, ROOT])  # `tests._durable_app`, imported by mymod
    return env


@contextlib.contextmanager
def _worker(home: Path, env: dict[str, str], agent: str, db: str) -> Iterator[None]:
    """A worker process (the installed script, ``--agent agent``) on the database file ``db``
    in ``home``, ready when entered; stopped with SIGTERM on exit."""
    log_path = home / f"worker-{db}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [SCRIPT, "worker", "--agent", agent, "--db", db, "--poll", "0.05"],
        cwd=home, env=env, stdout=log, stderr=log,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while b"worker ready" not in log_path.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(log_path.read_text())
            time.sleep(0.05)
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        log.close()


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    home = tmp_path_factory.mktemp("durable-cli")
    (home / "mymod.py").write_text(MYMOD)
    with FakeModelServer(token_delay=0.001) as model:
        env = _env(home, FA_MODEL_URL=model.base_url, FA_EFFECTS_DB=str(home / "effects.sqlite3"))
        from tests._durable_app import effects_table

        effects_table(env["FA_EFFECTS_DB"]).close()
        with _worker(home, env, "mymod:agent", "durable.sqlite3"):
            yield home, env


def _cli(home: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, cwd=home, timeout=120)


def test_worker_imports_the_agent_module_from_the_current_directory(worker) -> None:  # type: ignore[no-untyped-def]
    home, env = worker
    out = _cli(home, env, "submit", "s1", "hello", "--wait", "--db", "durable.sqlite3")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "done: hello"


def test_status_prints_a_readable_state_not_the_raw_dbos_status(worker) -> None:  # type: ignore[no-untyped-def]
    home, env = worker
    turn = _cli(home, env, "submit", "s2", "hi", "--wait", "--db", "durable.sqlite3").stdout.split()[0]
    out = _cli(home, env, "status", turn, "--db", "durable.sqlite3")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{turn}: finished (session s2)\n"
    out = _cli(home, env, "status", turn, "--db", f"sqlite:///{home / 'durable.sqlite3'}", "--json")
    assert '"status": "SUCCESS"' in out.stdout  # --json keeps DBOS's value for scripts


def test_follow_prints_you_and_assistant_lines_as_show_does(worker) -> None:  # type: ignore[no-untyped-def]
    home, env = worker
    turn = _cli(home, env, "submit", "s3", "ping", "--wait", "--db", "durable.sqlite3").stdout.split()[0]
    out = _cli(home, env, "follow", turn, "--db", "durable.sqlite3")
    assert out.returncode == 0, out.stderr
    assert "you> ping" in out.stdout and "assistant> done: ping" in out.stdout, out.stdout
    assert "UserMessage" not in out.stdout and "AssistantMessage" not in out.stdout


def test_follow_prints_the_usage_line_show_prints_for_a_local_model(tmp_path: Path) -> None:
    """A turn on the bundled in-process model: ``follow`` says ``$0 (local)`` as ``show`` does
    (it printed ``n/a``: each record was printed without the turn's earlier ones)."""
    pytest.importorskip("xllamacpp")
    (tmp_path / "localmod.py").write_text("from tests._durable_app import local_agent  # noqa: F401\n")
    env = _env(tmp_path)
    with _worker(tmp_path, env, "localmod:local_agent", "local.sqlite3"):
        sub = _cli(tmp_path, env, "submit", "s-local", "Hi", "--wait", "--db", "local.sqlite3")
        assert sub.returncode == 0, sub.stderr
        followed = _cli(tmp_path, env, "follow", sub.stdout.split()[0], "--db", "local.sqlite3")
    shown = _cli(tmp_path, env, "show", "s-local", "--db", "local.sqlite3")
    assert followed.returncode == 0 and shown.returncode == 0, (followed.stderr, shown.stderr)
    usage = [[ln for ln in out.stdout.splitlines() if ln.startswith("tokens:")] for out in (followed, shown)]
    assert len(usage[0]) == 1 and usage[0] == usage[1], (followed.stdout, shown.stdout)
    assert usage[0][0].endswith("cost $0 (local)"), usage


def test_status_and_follow_with_a_db_file_that_does_not_exist_are_one_line_exit_2(tmp_path: Path) -> None:
    for cmd in ("status", "follow"):
        out = _cli(tmp_path, _env(tmp_path), cmd, "t-1", "--db", "nope.sqlite3")
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and "no such file" in out.stderr, out
    assert not (tmp_path / "nope.sqlite3").exists()


def test_durable_commands_without_the_durable_extra_are_one_line_naming_it(tmp_path: Path) -> None:
    hide = tmp_path / "no_dbos" / "dbos"  # shadows the installed package: `import dbos` fails
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'dbos'\", name='dbos')\n")
    env = cli_env(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(hide.parent), SRC])
    for args in (["worker", "--agent", "m:f"], ["submit", "s", "hi"], ["status", "t"]):
        out = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
        assert out.returncode == 2, out
        assert out.stderr == (
            f"foundation-ai: error: {args[0]} needs the 'durable' extra "
            "(pip install 'foundation-ai[durable]')\n"
        )
