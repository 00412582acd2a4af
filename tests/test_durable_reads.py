"""What a durable turn reads from the system database (``tests/_durable_reads.py``: an
in-process worker on an embedded SQLite system database, a loopback model server): the
turn's start reads its owner, its recorded steps and a waiting steering message in one
statement, and a side-effect tool's claim is recorded without a read before it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dbos")

from ._durable_app import FakeModelServer, effects_table

ROOT = Path(__file__).resolve().parent.parent


def _counted_turn(tmp_path: Path, *extra: str) -> dict[str, object]:
    with FakeModelServer(token_delay=0.001) as model:
        env = {
            **os.environ,
            "FA_MODEL_URL": model.base_url,
            "FA_EFFECTS_DB": str(tmp_path / "effects.sqlite3"),
            "FA_SLOW": "0",
            "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
        }
        effects_table(env["FA_EFFECTS_DB"]).close()
        db = f"sqlite:///{tmp_path / 'durable.sqlite3'}"
        out = subprocess.run(
            [sys.executable, "-m", "tests._durable_reads", db, *extra],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert out.returncode == 0, out.stderr[-3000:]
    seen: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return seen


def test_a_durable_turn_reads_its_start_in_one_statement_and_claims_without_a_read(tmp_path: Path) -> None:
    seen = _counted_turn(tmp_path)
    assert seen["ok"] and seen["text"] == "done: counted"
    counts = seen["counts"]
    assert isinstance(counts, dict)
    assert counts.get("probe") == 1  # owner, recorded steps, a waiting message: one statement
    assert counts.get("listing", 0) == 0  # the recorded steps are not listed apart
    # 3 model calls: the first one's steering look is the probe's, the two others read
    assert counts.get("steer") == 2
    # DBOS's read of a recorded outcome: 3 model calls and 2 tool calls, none for the claim
    assert counts.get("check") == 5


def test_a_failed_start_probe_leaves_the_turn_to_read_its_start_one_by_one(tmp_path: Path) -> None:
    seen = _counted_turn(tmp_path, "--probe-fails")
    assert seen["ok"] and seen["text"] == "done: counted"
    counts = seen["counts"]
    assert isinstance(counts, dict)
    assert counts.get("probe", 0) == 0
    assert counts.get("listing") == 1  # what DBOS recorded, read at the first steering point
    assert counts.get("steer") == 3  # a look before each of the 3 model calls
    assert counts.get("owner", 0) >= 1  # the first session write checks the owner itself
    assert counts.get("check") == 5  # the claim is still one write (the listing says it is new)


def test_a_claim_is_an_ordinary_dbos_step_when_this_dbos_release_lacks_the_internals_it_writes_through(
    tmp_path: Path,
) -> None:
    seen = _counted_turn(tmp_path, "--claim-unsupported")
    assert seen["ok"] and seen["text"] == "done: counted"
    counts = seen["counts"]
    assert isinstance(counts, dict)
    assert counts.get("probe") == 1
    assert counts.get("check") == 6  # DBOS reads the claim's position first, as for any step
    effects = effects_table(str(tmp_path / "effects.sqlite3"))
    try:  # the warm turn's side effect and the counted one's: each once
        assert effects.execute("SELECT COUNT(*) FROM effects").fetchone()[0] == 2
    finally:
        effects.close()
