"""Choosing a model in one line (docs/models.md): ``foundation_ai.model(...)``, the builder taking
a model string, ``*_BASE_URL`` honoured, and the key rule -- a key read from the environment
reaches only the provider's own host or a host paired with it in the environment, checked with
a loopback capture server (library and CLI alike)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from foundation_ai.errors import ConfigurationError
from foundation_ai.types import Messages, ModelInteraction
from tests._backend_helpers import Fixtures
from tests._fixture_server import FixtureServer

ENV_KEY = "sk-env-SECRET-9f8e7d6c5b4a"
OTHER_KEY = "sk-explicit-1234567890"
CHAT = Fixtures("openai_chat")
RESP = Fixtures("openai_responses")
ANTH = Fixtures("anthropic")


@pytest.fixture
def srv() -> Iterator[FixtureServer]:
    with FixtureServer() as s:
        yield s


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


def ask() -> ModelInteraction:
    return ModelInteraction(messages=[Messages.user("hi")])


def auth_of(srv: FixtureServer) -> tuple[str | None, str | None]:
    h = srv.requests[-1].headers
    return h.get("authorization"), h.get("x-api-key")


def test_one_import_line_for_the_tour() -> None:
    from foundation_ai import AgentSession, model, tool

    assert callable(model) and callable(tool) and hasattr(AgentSession, "builder")


def test_model_strings_build_each_http_backend(srv: FixtureServer) -> None:
    from foundation_ai import model
    from foundation_ai.backends._anthropic import AnthropicModel
    from foundation_ai.backends._openai_chat import OpenAIChatModel
    from foundation_ai.backends._openai_responses import OpenAIResponsesModel

    chat = model("openai:gpt-4o-mini", base_url=srv.base_url)
    assert isinstance(chat, OpenAIChatModel) and chat.descriptor.name == "gpt-4o-mini"
    resp = model("Responses:gpt-5-mini", base_url=srv.base_url)
    assert isinstance(resp, OpenAIResponsesModel) and resp.descriptor.name == "gpt-5-mini"
    anth = model("anthropic:claude-sonnet-4-5", base_url=srv.base_url, api_key=OTHER_KEY)
    assert isinstance(anth, AnthropicModel) and anth.descriptor.name == "claude-sonnet-4-5"
    assert model("openai:org/model:tag", base_url=srv.base_url).descriptor.name == "org/model:tag"


@pytest.mark.parametrize(
    ("spec", "kwargs", "needle"),
    [
        ("gpt-4o", {}, "use PROVIDER:NAME"),
        ("google:gemini", {}, "unknown model provider 'google'"),
        ("anthropic:", {}, "has no name"),
        ("local", {"base_url": "http://127.0.0.1:1"}, "base_url needs an HTTP model"),
        ("openai:x", {"base_url": "ftp://u:pw@127.0.0.1/v1"}, "is not an http"),
        ("gguf:/no/such/file.gguf", {}, "no such GGUF file"),
        ("openai:gpt-4o-mini", {}, "OPENAI_API_KEY is not set"),
        ("anthropic:claude-x", {}, "ANTHROPIC_API_KEY is not set"),
        ("local", {"api_key": "sk-x"}, "api_key= is for HTTP models"),
    ],
)
def test_bad_model_strings_raise_one_clear_error(spec: str, kwargs: dict[str, str], needle: str) -> None:
    from foundation_ai import model

    with pytest.raises(ConfigurationError, match=needle) as err:
        model(spec, **kwargs)
    assert "pw" not in str(err.value)


def test_env_key_is_not_sent_to_an_explicit_base_url(
    srv: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from foundation_ai import model

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY)
    srv.queue(CHAT.sse("text.sse"))
    model("openai:x", base_url=srv.base_url).generate(ask())
    assert auth_of(srv) == (None, None)
    srv.queue(RESP.sse("text.sse"))
    model("responses:x", base_url=srv.base_url).generate(ask())
    assert auth_of(srv) == (None, None)
    srv.queue(ANTH.sse("text.sse"))
    model("anthropic:x", base_url=srv.base_url).generate(ask())
    assert auth_of(srv) == (None, None)
    assert all(ENV_KEY not in r.body.decode() for r in srv.requests)


def test_explicit_key_goes_where_the_model_goes(srv: FixtureServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from foundation_ai import model

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    srv.queue(CHAT.sse("text.sse"))
    model("openai:x", base_url=srv.base_url, api_key=OTHER_KEY).generate(ask())
    assert auth_of(srv) == (f"Bearer {OTHER_KEY}", None)
    srv.queue(ANTH.sse("text.sse"))
    model("anthropic:x", base_url=srv.base_url, api_key=OTHER_KEY).generate(ask())
    assert auth_of(srv) == (None, OTHER_KEY)


def test_env_base_url_is_honoured_and_paired_with_the_env_key(
    srv: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from foundation_ai import model

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url + "/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
    srv.queue(CHAT.sse("text.sse"))
    assert model("openai:x").generate(ask())[-1].text()
    assert srv.requests[-1].path == "/v1/chat/completions"
    assert auth_of(srv) == (f"Bearer {ENV_KEY}", None)
    srv.queue(RESP.sse("text.sse"))
    model("responses:x", base_url=srv.base_url).generate(ask())  # same host as OPENAI_BASE_URL
    assert auth_of(srv) == (f"Bearer {ENV_KEY}", None)
    srv.queue(ANTH.sse("text.sse"))
    model("anthropic:x").generate(ask())
    assert auth_of(srv) == (None, ENV_KEY)


def test_env_key_not_sent_to_a_host_other_than_the_paired_one(
    srv: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from foundation_ai import model

    with FixtureServer() as paired:
        monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", paired.base_url)
        srv.queue(CHAT.sse("text.sse"))
        model("openai:x", base_url=srv.base_url).generate(ask())
        assert auth_of(srv) == (None, None)
        assert paired.requests == []


def test_backend_factories_follow_the_same_key_rule(
    srv: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from foundation_ai.backends._anthropic import anthropic
    from foundation_ai.backends._openai_chat import openai_chat
    from foundation_ai.backends._openai_responses import openai_responses

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY)
    for factory, fixtures in ((openai_chat, CHAT), (openai_responses, RESP), (anthropic, ANTH)):
        srv.queue(fixtures.sse("text.sse"))
        factory("x", base_url=srv.base_url).generate(ask())
        assert auth_of(srv) == (None, None), factory


def test_builder_accepts_a_model_string(srv: FixtureServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from foundation_ai import AgentSession
    from foundation_ai.agentic import InMemorySessionStore

    monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
    srv.queue(CHAT.sse("text.sse"))
    session = AgentSession.builder("openai:gpt-4o-mini").with_store(InMemorySessionStore()).build()
    answer = session.ask("hi")
    assert str(answer) == "Hello there!"
    assert srv.requests[-1].json()["model"] == "gpt-4o-mini"


def test_builder_fallback_may_be_a_model_string(srv: FixtureServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from foundation_ai import AgentSession
    from foundation_ai.agentic import InMemorySessionStore, ScriptedModel

    def builder(*fallbacks: str) -> AgentSession:
        b = AgentSession.builder(ScriptedModel([])).with_store(InMemorySessionStore())
        return b.with_fallback_models(*fallbacks).build()

    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY is not set"):
        builder("anthropic:claude-x")  # parsed and loaded: no key for Anthropic's host
    monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
    session = builder("openai:gpt-4o-mini")
    assert [m.descriptor.name for m in session.models][1:] == ["gpt-4o-mini"]


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    base.update({"NO_PROXY": "127.0.0.1,localhost", "PYTHONUNBUFFERED": "1", **env})
    return subprocess.run(
        [sys.executable, "-m", "foundation_ai", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=base,
    )


def test_cli_base_url_does_not_receive_the_env_key(srv: FixtureServer, tmp_path: Path) -> None:
    srv.queue(CHAT.sse("text.sse"))
    r = _cli(
        "run",
        "hi",
        "--model",
        "openai:x",
        "--base-url",
        srv.base_url,
        "--db",
        str(tmp_path / "s.db"),
        OPENAI_API_KEY=ENV_KEY,
    )
    assert r.returncode == 0, r.stderr
    assert "Hello there!" in r.stdout
    assert auth_of(srv) == (None, None)


def test_cli_env_base_url_receives_the_paired_env_key(srv: FixtureServer, tmp_path: Path) -> None:
    srv.queue(ANTH.sse("text.sse"))
    r = _cli(
        "run",
        "hi",
        "--model",
        "anthropic:claude-x",
        "--db",
        str(tmp_path / "s.db"),
        ANTHROPIC_API_KEY=ENV_KEY,
        ANTHROPIC_BASE_URL=srv.base_url,
    )
    assert r.returncode == 0, r.stderr
    assert auth_of(srv) == (None, ENV_KEY)


# ---------------------------------------------------------------------------------------------
# recommended sampling of local models


def test_recommended_sampling_from_the_model_card_table() -> None:
    from foundation_ai.backends._sampling import recommended_params

    p = recommended_params({"general.basename": "smollm2", "general.size_label": "135M"})
    assert (p.temperature, p.top_p) == (0.2, 0.9)
    assert recommended_params({"general.basename": "other"}) == recommended_params({})


def test_recommended_sampling_from_gguf_metadata_wins_over_the_table() -> None:
    from foundation_ai.backends._sampling import recommended_params

    p = recommended_params(
        {
            "general.basename": "smollm2",
            "general.size_label": "135M",
            "general.sampling.temp": "0.6",
            "general.sampling.top_k": "20",
            "general.sampling.top_p": "garbage",
            "general.sampling.penalty_repeat": 1.05,
        }
    )
    assert (p.temperature, p.top_k, p.top_p, p.repeat_penalty) == (0.6, 20.0, 0.9, 1.05)


def test_bundled_model_answers_with_its_recommended_temperature() -> None:
    pytest.importorskip("xllamacpp")
    from foundation_ai import model
    from foundation_ai.types import ModelParams

    m = model("local")
    assert m.default_params.temperature == 0.2
    assert m.default_params != ModelParams()


def test_options_go_to_the_backend_and_unknown_ones_raise(srv: FixtureServer) -> None:
    from foundation_ai import model

    m = model("openai:x", base_url=srv.base_url, deadline=5.0, context_window=4096)
    assert m.options.deadline == 5.0 and m.descriptor.context_window == 4096
    with pytest.raises(ConfigurationError, match=r"unknown option.*temprature.*valid:.*timeout"):
        model("openai:x", base_url=srv.base_url, temprature=0.2)


def test_a_misspelt_local_model_option_raises_instead_of_being_ignored() -> None:
    """``llama_cpp.Llama`` takes ``**kwargs`` and ignores what it does not know: ``model("local",
    bogus=1)`` used to load the model as if nothing was said. Options it names still pass."""
    from foundation_ai import model

    with pytest.raises(ConfigurationError, match=r"unknown llama.cpp option\(s\) bogus, n_ctxx"):
        model("local", bogus=1, n_ctxx=512)
    assert model("local", n_batch=64, n_ctx=512).descriptor.context_window == 512


def test_a_model_that_is_not_a_string_is_a_configuration_error() -> None:
    from foundation_ai import model

    for bad in (42, 1.5, ["openai:x"]):
        with pytest.raises(ConfigurationError, match=r"expected a model string.*got (int|float|list)"):
            model(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", ["openai:x", "responses:x", "anthropic:x"])
def test_unknown_option_lists_the_deadline_options_as_valid(spec: str) -> None:
    from foundation_ai import model

    with pytest.raises(ConfigurationError) as err:
        model(spec, api_key="k", bogus=1)
    valid = str(err.value).split("valid:")[1]
    assert "deadline" in valid and "first_byte_timeout" in valid and "timeout" in valid


@pytest.mark.parametrize("option", ["timeout", "deadline", "first_byte_timeout"])
@pytest.mark.parametrize("value", [-1, 0, float("nan"), "10"])
def test_non_positive_timeouts_and_deadlines_are_refused(option: str, value: object) -> None:
    from foundation_ai import model

    with pytest.raises(ConfigurationError, match=f"{option} must be a positive number of seconds"):
        model("openai:x", api_key="k", **{option: value})


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9/v1?api-version=1", "http://127.0.0.1:9/v1#x", "http://h/v1?"]
)
def test_a_base_url_with_a_query_or_fragment_is_refused(url: str) -> None:
    """The API path is appended to the base URL: a query or fragment would send the request to
    another endpoint (``/v1?q/chat/completions``) without a word."""
    from foundation_ai import model
    from foundation_ai.backends import anthropic, openai_chat

    with pytest.raises(ConfigurationError, match="has a query or fragment"):
        model("openai:x", base_url=url)
    with pytest.raises(ConfigurationError, match="has a query or fragment"):
        openai_chat("x", base_url=url, api_key="k")
    with pytest.raises(ConfigurationError, match="has a query or fragment"):
        anthropic("x", base_url=url, api_key="k")
