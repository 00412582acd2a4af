"""What ``foundation-ai --help`` tells a newcomer: one example per line, the description in
its own column; where the configuration and the sessions are kept, and that
``FOUNDATION_AI_HOME`` moves the session store (checked against where a real run writes it)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests._cli_helpers import CLI, cli_env, text_stream
from tests._fixture_server import FixtureServer


def main_help(capsys: pytest.CaptureFixture[str]) -> str:
    from foundation_ai.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def _section(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(title)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start + 1 : end]


def test_each_help_example_is_one_command_with_its_description(capsys: pytest.CaptureFixture[str]) -> None:
    examples = _section(main_help(capsys), "examples:")
    assert len(examples) >= 10
    for line in examples:
        assert line.startswith("  ") and "foundation-ai" in line, line
        assert line.count("foundation-ai ") == 1, f"two commands on one line: {line!r}"
    parsed = [m for ln in examples if (m := re.match(r"^  (\S.*?)\s{2,}(\S.*)$", ln))]
    described = {m.group(1): m.group(2) for m in parsed}
    assert described["foundation-ai models"] == "the models you can use, with prices"
    assert described["foundation-ai keys set openai"] == "store an API key (asked without echo)"
    assert described["foundation-ai sessions"] == "list the stored sessions"
    assert described["foundation-ai show ID"] == "print a stored session's transcript"
    # the descriptions of the shorter commands start in one column
    assert len({m.start(2) for m in parsed if len(m.group(1)) < 50}) == 1


def test_help_says_where_data_lives_and_how_to_move_it(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(main_help(capsys).split())
    assert "FOUNDATION_AI_HOME" in text
    assert "sessions.sqlite3 the session store of run, chat, sessions and show" in text
    assert "in $FOUNDATION_AI_HOME when that variable is set, else in $XDG_DATA_HOME/foundation-ai" in text
    assert "config.toml, keys.json" in text and "$XDG_CONFIG_HOME/foundation-ai" in text
    assert "export FOUNDATION_AI_HOME=" in text


def test_foundation_ai_home_is_where_run_stores_the_session_as_the_help_says(tmp_path: Path) -> None:
    home = tmp_path / "moved"
    env = cli_env(tmp_path, FOUNDATION_AI_HOME=str(home))
    with FixtureServer() as srv:
        srv.queue(text_stream("Stored."))
        r = subprocess.run(
            [*CLI, "run", "-m", "openai:m", "--base-url", srv.base_url, "hi"],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (home / "sessions.sqlite3").is_file()
    assert not (tmp_path / "data" / "foundation-ai" / "sessions.sqlite3").exists()  # not the XDG dir
    listing = subprocess.run([*CLI, "sessions"], capture_output=True, text=True, timeout=60, env=env)
    assert "hi" in listing.stdout.splitlines()[1]
    # without the variable, the XDG data dir is used (and is empty)
    plain = subprocess.run(
        [*CLI, "sessions"], capture_output=True, text=True, timeout=60, env=cli_env(tmp_path)
    )
    assert plain.stdout == "no stored sessions\n"
