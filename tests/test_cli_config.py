"""``config.toml`` and ``keys.json`` through the real command line: a value the matching option
would refuse is refused in the file too (exit 2, naming the file and the key, nothing sent), and
``keys set`` stores keys only for the providers the CLI knows.

Turns go to the loopback fixture server (canned OpenAI Chat streams), which records whether a
request was sent; every subprocess gets its config and data dirs under ``tmp_path``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from foundation_ai._cli.config import load_config
from foundation_ai.errors import ConfigurationError
from tests._cli_helpers import CLI, cli_env, text_stream
from tests._fixture_server import FixtureServer


def fa(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], input=stdin, capture_output=True, text=True, timeout=120, env=cli_env(home)
    )


def write_config(home: Path, text: str) -> Path:
    """``config.toml`` in the default user config directory of a CLI run under ``home``."""
    cfg = home / "config" / "foundation-ai"
    cfg.mkdir(parents=True, exist_ok=True)
    path = cfg / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("setting", "flag", "message"),
    [
        ("temperature = -3", ["--temperature", "-3"], "temperature must be a number >= 0, got -3"),
        ("temperature = nan", ["--temperature", "nan"], "temperature must be a number >= 0, got nan"),
        ("temperature = inf", ["--temperature", "inf"], "temperature must be a number >= 0, got inf"),
        ("max_tokens = -7", ["--max-tokens", "-7"], "max_tokens must be a positive integer, got -7"),
        ("max_tokens = 0", ["--max-tokens", "0"], "max_tokens must be a positive integer, got 0"),
    ],
)
def test_out_of_range_config_values_are_refused_like_the_flags(
    tmp_path: Path, setting: str, flag: list[str], message: str
) -> None:
    path = write_config(tmp_path, f'model = "openai:m"\n{setting}\n')
    with FixtureServer() as srv:
        srv.queue(text_stream("never sent"))
        base = ["run", "--base-url", srv.base_url, "--db", str(tmp_path / "s.db")]
        from_file = fa(tmp_path, *base, "hi")
        path.unlink()
        from_flag = fa(tmp_path, *base, "-m", "openai:m", *flag, "hi")
        assert srv.requests == []  # neither value reached the server
    assert from_flag.returncode == 2, from_flag.stderr
    assert from_file.returncode == 2, from_file.stderr
    assert from_file.stderr == f"foundation-ai: error: {path}: {message}\n"
    # the flag's message says the same about the value
    assert message.split(" ", 1)[1] in from_flag.stderr


def test_in_range_config_values_are_sent(tmp_path: Path) -> None:
    write_config(tmp_path, 'model = "openai:m"\ntemperature = 0\nmax_tokens = 9\n')
    with FixtureServer() as srv:
        srv.queue(text_stream("Sent."))
        r = fa(tmp_path, "run", "--base-url", srv.base_url, "--db", str(tmp_path / "s.db"), "hi")
        assert r.returncode == 0, r.stderr
        body = srv.requests[0].json()
    assert body["temperature"] == 0
    assert 9 in (body.get("max_tokens"), body.get("max_completion_tokens"))


def test_load_config_names_the_file_and_key_of_a_bad_value(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("max_tokens = -1\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"c\.toml: max_tokens must be a positive integer, got -1"):
        load_config(path)
    path.write_text("temperature = 1\nmax_tokens = 3\n", encoding="utf-8")
    config = load_config(path)
    assert (config.temperature, config.max_tokens) == (1.0, 3)
    assert isinstance(config.temperature, float)


def test_config_errors_in_models_and_chat_are_usage_errors_too(tmp_path: Path) -> None:
    path = write_config(tmp_path, "temperature = -0.5\n")
    for argv in (["models"], ["chat", "--db", str(tmp_path / "s.db")]):
        r = fa(tmp_path, *argv)
        assert r.returncode == 2, (argv, r.stderr)
        assert r.stderr == f"foundation-ai: error: {path}: temperature must be a number >= 0, got -0.5\n"


# ---------------------------------------------------------------------------------------------
# keys set: known providers only


def test_keys_set_refuses_an_unknown_provider_and_stores_nothing(tmp_path: Path) -> None:
    r = fa(tmp_path, "keys", "set", "bogusprov", "--value", "sk-x")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1
    assert "unknown provider 'bogusprov'" in r.stderr and "anthropic, openai" in r.stderr
    assert not (tmp_path / "config" / "foundation-ai" / "keys.json").exists()


def test_keys_set_stores_a_known_providers_key(tmp_path: Path) -> None:
    r = fa(tmp_path, "keys", "set", "anthropic", stdin="sk-ant-1\n")
    assert r.returncode == 0, r.stderr
    keys = json.loads((tmp_path / "config" / "foundation-ai" / "keys.json").read_text(encoding="utf-8"))
    assert keys == {"anthropic": "sk-ant-1"}
