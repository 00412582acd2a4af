"""``llm`` habits through the real command line: model aliases (``aliases set``, used by
``-m``), the servers a user configured in ``models``, searching past sessions
(``sessions -q``), saved system-prompt templates (``templates set``, ``-t``). Config and data
dirs are under the test's tmp dir (``tests/_cli_helpers.cli_env``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests._cli_helpers import CLI, cli_env, text_stream
from tests._fixture_server import FixtureServer


def fa(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=cli_env(home), timeout=120, cwd=home
    )


def test_an_alias_set_for_a_model_and_server_is_used_by_dash_m(tmp_path: Path) -> None:
    with FixtureServer() as server:
        server.queue(text_stream("from the alias"))
        saved = fa(tmp_path, "aliases", "set", "mine", "openai:llama-x", "--base-url", server.base_url)
        assert saved.returncode == 0, saved.stderr
        assert (tmp_path / "config" / "foundation-ai" / "aliases.json").exists()  # beside config.toml
        out = fa(tmp_path, "run", "-m", "mine", "--db", str(tmp_path / "s.db"), "Hi")
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "from the alias"
        assert server.requests[-1].json()["model"] == "llama-x"
    listed = fa(tmp_path, "aliases", "list")
    assert listed.stdout == f"mine: openai:llama-x at {server.base_url}\n"
    assert fa(tmp_path, "aliases", "remove", "mine").returncode == 0
    assert fa(tmp_path, "aliases", "list").stdout == ""
    gone = fa(tmp_path, "aliases", "remove", "mine")
    assert gone.returncode == 2 and "no alias 'mine'" in gone.stderr


def test_models_lists_the_servers_configured_in_config_toml_and_aliases(tmp_path: Path) -> None:
    cfg = tmp_path / "config" / "foundation-ai"
    cfg.mkdir(parents=True)
    (cfg / "config.toml").write_text('model = "openai:qwen3"\nbase_url = "http://127.0.0.1:8080/v1"\n')
    fa(tmp_path, "aliases", "set", "box", "openai:gemma", "--base-url", "http://127.0.0.1:9000/v1")
    out = fa(tmp_path, "models", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["model"]: r for r in map(json.loads, out.stdout.splitlines())}
    assert rows["openai:qwen3"]["source"] == "config at http://127.0.0.1:8080/v1"
    assert rows["box"]["source"] == "alias of openai:gemma at http://127.0.0.1:9000/v1"


def test_sessions_query_matches_prompts_and_answers_in_any_case(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    talk = (("about invoices", "ok"), ("weather", "Sunny in PARIS"), ("other", "no"))
    with FixtureServer() as server:
        server.queue(*(text_stream(answer) for _, answer in talk))
        for prompt, _ in talk:
            r = fa(tmp_path, "run", "-m", "openai:m", "--base-url", server.base_url, "--db", db, prompt)
            assert r.returncode == 0, r.stderr
    by_prompt = fa(tmp_path, "sessions", "--db", db, "-q", "INVOICE")
    assert [line.split("  ")[-1] for line in by_prompt.stdout.splitlines()[1:]] == ["about invoices"]
    by_answer = fa(tmp_path, "sessions", "--db", db, "-q", "paris", "--json")
    assert [json.loads(line)["first_prompt"] for line in by_answer.stdout.splitlines()] == ["weather"]
    none = fa(tmp_path, "sessions", "--db", db, "-q", "zebra")
    assert none.returncode == 0 and "no stored session mentions 'zebra'" in none.stdout


def test_a_saved_template_is_the_system_prompt_of_dash_t_and_dash_s_wins(tmp_path: Path) -> None:
    assert fa(tmp_path, "templates", "set", "fr", "Answer in French.").returncode == 0
    assert fa(tmp_path, "templates", "show", "fr").stdout == "Answer in French.\n"
    db = str(tmp_path / "s.db")
    with FixtureServer() as server:
        server.queue(text_stream("Bonjour"))
        base = ["run", "-m", "openai:m", "--base-url", server.base_url, "--db", db]
        assert fa(tmp_path, *base, "-t", "fr", "Hi").returncode == 0
        first = server.requests[-1].json()["messages"][0]
        assert first == {"role": "system", "content": "Answer in French."}
        assert fa(tmp_path, *base, "-t", "fr", "-s", "Be brief.", "Hi").returncode == 0
        assert server.requests[-1].json()["messages"][0]["content"] == "Be brief."
    unknown = fa(tmp_path, "run", "-t", "nope", "Hi")
    assert unknown.returncode == 2 and "no template 'nope'" in unknown.stderr
