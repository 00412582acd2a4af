"""ProviderRouter: rules, serves, the single-provider fallback, errors, and use as a Model."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundation_ai.backends import Model, openai_chat
from foundation_ai.errors import ConfigurationError, ModelNotFoundError
from foundation_ai.router import Provider, ProviderRouter, as_model
from foundation_ai.types import Messages, ModelId, ModelInteraction, Quantization

try:
    from tests._fixture_server import Canned, FixtureServer
except ImportError:  # tests/ is not a package: pytest puts tests/ itself on sys.path
    from _fixture_server import Canned, FixtureServer  # type: ignore[no-redef]

LOCAL = "http://127.0.0.1:9"
built: list[tuple[str, str]] = []


def factory(provider: str):  # type: ignore[no-untyped-def]
    def make(name: str) -> Model:
        built.append((provider, name))
        return openai_chat(name, base_url=f"{LOCAL}/{provider}")

    return make


def router(**kw: object) -> ProviderRouter:
    return ProviderRouter(
        [
            Provider("openai", factory("openai"), serves=["gpt-*", "o[1-9]*"]),
            Provider("openrouter", factory("openrouter"), serves=lambda n: "/" in n),
            Provider("ollama", factory("ollama")),
        ],
        **kw,  # type: ignore[arg-type]
    )


def test_serves_by_glob_and_predicate() -> None:
    r = router()
    assert r.provider_for("gpt-4o-mini").name == "openai"
    assert r.provider_for("o3").name == "openai"
    assert r.provider_for("meta-llama/llama-3-8b").name == "openrouter"
    m = r.resolve(ModelId.parse("gpt-4o-mini"))
    assert m.descriptor.name == "gpt-4o-mini"
    assert m is r.resolve("gpt-4o-mini")  # cached


def test_rules_first_exact_and_glob() -> None:
    r = router(rules=[("gpt-4o", "openrouter"), ("qwen*", "ollama"), ("*/gpt-*", "openai")])
    assert r.provider_for("gpt-4o").name == "openrouter"  # an exact rule beats serves
    assert r.provider_for("gpt-4o-mini").name == "openai"
    assert r.provider_for("qwen2.5:7b").name == "ollama"
    assert r.provider_for("openai/gpt-4o").name == "openai"  # rule before the predicate


def test_matches_on_name_only_not_quantization() -> None:
    r = router(rules=[("smollm2", "ollama")])
    mid = ModelId.Name("smollm2", Quantization.Q4_1)
    assert r.provider_for(mid).name == "ollama"
    assert r.provider_for(ModelId.Alias("smollm2")).name == "ollama"


def test_only_provider_fallback() -> None:
    r = ProviderRouter([Provider("ollama", factory("ollama"))])
    assert r.resolve("anything").descriptor.name == "anything"


def test_unknown_model_lists_providers() -> None:
    with pytest.raises(ModelNotFoundError) as ei:
        router().resolve("claude-sonnet-4-5")
    assert "claude-sonnet-4-5" in str(ei.value)
    for name in ("openai", "openrouter", "ollama"):
        assert name in str(ei.value)


def test_bad_configuration() -> None:
    with pytest.raises(ConfigurationError, match="unknown provider"):
        router(rules=[("x", "nope")])
    with pytest.raises(ConfigurationError, match="duplicate"):
        ProviderRouter([Provider("a", factory("a")), Provider("a", factory("a"))])
    with pytest.raises(ConfigurationError, match="default"):
        router().generate(ModelInteraction())


def test_provider_of_ready_model() -> None:
    a = openai_chat("alpha", base_url=LOCAL)
    b = openai_chat("beta", base_url=LOCAL)
    r = ProviderRouter([Provider.of(a, "one"), Provider.of(b, "two")])
    assert r.resolve("beta") is b and r.resolve("alpha") is a
    r2 = ProviderRouter([a, Provider.of(b, "two")])  # a bare model is wrapped
    assert r2.resolve("alpha") is a


def test_model_or_router() -> None:
    m = openai_chat("gpt-4o-mini", base_url=LOCAL)
    assert as_model(m) is m
    r = router(default="gpt-4o-mini")
    assert isinstance(r, Model)  # a router with a default satisfies the Model protocol
    assert as_model(r).descriptor.name == "gpt-4o-mini"
    assert as_model(r, "o3").descriptor.name == "o3"
    with pytest.raises(ConfigurationError):
        as_model(object())


def test_router_streams_as_a_model() -> None:
    body = (Path(__file__).parent / "fixtures" / "openai_chat" / "text.sse").read_bytes()
    with FixtureServer() as srv:
        srv.queue(Canned(chunks=[body]))
        r = ProviderRouter(
            [Provider("local", lambda n: openai_chat(n, base_url=srv.base_url))], default="smol"
        )
        out = r.generate(ModelInteraction(messages=[Messages.user("hi")]))
        assert [m.text() for m in out] == ["Hello there!"]
        assert r.model_id == ModelId.Name("smol") and r.chunk_mode == "snapshot"
        assert srv.requests[0].json()["model"] == "smol"


async def test_router_async_generate() -> None:
    body = (Path(__file__).parent / "fixtures" / "openai_chat" / "text.sse").read_bytes()
    with FixtureServer() as srv:
        srv.queue(Canned(chunks=[body]))
        r = ProviderRouter(
            [Provider("local", lambda n: openai_chat(n, base_url=srv.base_url))], default="smol"
        )
        out = await r.agenerate(ModelInteraction(messages=[Messages.user("hi")]))
        assert [m.text() for m in out] == ["Hello there!"]
