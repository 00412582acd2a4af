"""What the HTTP backends send for a stored history (docs/sanitation.md): one sanitation step per
backend makes any history acceptable to its provider and never changes what is stored.

The regression tests name the failures seen against main; the property test checks, for any
generated history, the constraints each provider documents (written below as checkers)."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundation_ai.backends._anthropic_request import build_request as anthropic_request
from foundation_ai.backends._openai_chat_request import build_request as chat_request
from foundation_ai.backends._responses_request import accepts_reasoning
from foundation_ai.backends._responses_request import build_request as responses_request
from foundation_ai.backends._sanitize import OPENAI_CHAT, fit_id, sanitize_history
from foundation_ai.types import (
    AssistantMessage,
    ImageContent,
    Messages,
    MimeType,
    ModelId,
    ModelInteraction,
    ModelParams,
    ModelProviders,
    StopReason,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    ToolCall,
    ToolResultMessage,
    to_json,
)

MODEL = ModelId.Name("m")
VLLM_ID = "chatcmpl-tool-" + "0123456789abcdef" * 2  # 46 characters, as vLLM sends
SAFE = re.compile(r"^[a-zA-Z0-9_-]+$")
NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def out(content: Any, provider: str = ModelProviders.OpenAI, **kw: Any) -> AssistantMessage:
    return AssistantMessage(model=MODEL, content=content, provider=provider, **kw)


def result(call_id: str, text: str = "ok", name: str = "search", **kw: Any) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, name=name, content=TextContent(text), **kw)


def inter(*messages: Any) -> ModelInteraction:
    return ModelInteraction(messages=list(messages))


def chat(i: ModelInteraction, **kw: Any) -> dict[str, Any]:
    return chat_request(i, ModelParams(), "gpt-4o-mini", **kw)


def anth(
    i: ModelInteraction, model: str = "claude-sonnet-4-5", params: ModelParams | None = None
) -> dict[str, Any]:
    return anthropic_request(i, params or ModelParams(), model, stream=True)


def resp(i: ModelInteraction, model: str = "gpt-4.1", params: ModelParams | None = None) -> dict[str, Any]:
    return responses_request(i, params or ModelParams(), model, stream=True)


# ---------------------------------------------------------------------------------------------
# the providers' documented constraints, as checkers


def check_chat(body: dict[str, Any]) -> None:
    """OpenAI Chat Completions (https://platform.openai.com/docs/api-reference/chat/create):
    tool-call ids of at most 40 characters, unique; function names ``^[a-zA-Z0-9_-]{1,64}$``;
    ``arguments`` a JSON object text; an assistant message with ``tool_calls`` directly followed
    by one ``tool`` message per call; no ``tool`` message anywhere else; assistant ``content``
    null only with tool calls."""
    msgs = body["messages"]
    seen: set[str] = set()
    i = 0
    while i < len(msgs):
        m = msgs[i]
        i += 1
        assert m["role"] in ("system", "user", "assistant", "tool"), m
        assert m["role"] != "tool", f"a tool message answering no preceding call: {m}"
        if m["role"] != "assistant":
            continue
        calls = m.get("tool_calls") or []
        assert m["content"] is not None or calls, m
        assert m["content"] is None or isinstance(m["content"], str)
        for c in calls:
            assert SAFE.match(c["id"]) and len(c["id"]) <= 40, c["id"]
            assert c["id"] not in seen, f"repeated id {c['id']}"
            seen.add(c["id"])
            assert NAME.match(c["function"]["name"]), c["function"]["name"]
            assert isinstance(msgspec.json.decode(c["function"]["arguments"]), dict)
        answers = msgs[i : i + len(calls)]
        assert [a["role"] for a in answers] == ["tool"] * len(calls), answers
        assert sorted(a["tool_call_id"] for a in answers) == sorted(c["id"] for c in calls)
        assert all(isinstance(a["content"], str) for a in answers)
        i += len(calls)


def check_anthropic(body: dict[str, Any]) -> None:
    """Anthropic Messages (https://docs.anthropic.com/en/api/messages): ``tool_use.id`` matches
    ``^[a-zA-Z0-9_-]+$`` and is unique; every ``tool_use`` answered by a ``tool_result`` at the
    start of the next user message and no ``tool_result`` elsewhere; text blocks hold
    non-whitespace text; a final assistant message does not end with whitespace; with thinking
    on, a tool loop continues from a turn that starts with a thinking block."""
    msgs = body["messages"]
    seen: set[str] = set()
    prev_calls: list[str] = []
    for m in msgs:
        assert m["role"] in ("user", "assistant") and m["content"], m
        results = [b["tool_use_id"] for b in m["content"] if b["type"] == "tool_result"]
        if m["role"] == "user":
            assert sorted(results) == sorted(prev_calls), (results, prev_calls)
            assert [b["type"] for b in m["content"][: len(results)]] == ["tool_result"] * len(results)
        else:
            assert prev_calls == [], "unanswered tool_use"
        prev_calls = []
        for b in m["content"]:
            if b["type"] == "text":
                assert b["text"].strip(), f"blank text block: {b!r}"
            elif b["type"] == "tool_use":
                assert m["role"] == "assistant"
                assert SAFE.match(b["id"]) and b["id"] not in seen, b["id"]
                seen.add(b["id"])
                assert NAME.match(b["name"]) and isinstance(b["input"], dict)
                prev_calls.append(b["id"])
            elif b["type"] == "thinking":
                assert isinstance(b["signature"], str)
            elif b["type"] == "redacted_thinking":
                assert isinstance(b["data"], str)
            elif b["type"] == "tool_result":
                for part in b.get("content", []):
                    assert part["type"] != "text" or part["text"].strip()
    assert prev_calls == [], "unanswered tool_use at the end"
    if msgs and msgs[-1]["role"] == "assistant" and msgs[-1]["content"][-1]["type"] == "text":
        text = msgs[-1]["content"][-1]["text"]
        assert text == text.rstrip()
    if "thinking" in body and len(msgs) >= 2 and any(b["type"] == "tool_result" for b in msgs[-1]["content"]):
        assert msgs[-2]["content"][0]["type"] in ("thinking", "redacted_thinking")


def check_responses(body: dict[str, Any]) -> None:
    """OpenAI Responses (https://platform.openai.com/docs/api-reference/responses/create):
    ``call_id`` of at most 64 characters, unique; every ``function_call`` answered once by a
    later ``function_call_output`` whose ``output`` is a string; no output without its call;
    ``arguments`` a JSON object text; no reasoning items (nor the item ids that ask for them)
    for a model that takes no reasoning."""
    items = body["input"]
    calls: set[str] = set()
    answered: set[str] = set()
    reasoning_ok = accepts_reasoning(body["model"]) or "reasoning" in body
    for it in items:
        if not reasoning_ok:
            assert it["type"] != "reasoning" and "id" not in it, it
        if it["type"] == "function_call":
            assert SAFE.match(it["call_id"]) and len(it["call_id"]) <= 64, it["call_id"]
            assert it["call_id"] not in calls
            calls.add(it["call_id"])
            assert NAME.match(it["name"]) and isinstance(msgspec.json.decode(it["arguments"]), dict)
        elif it["type"] == "function_call_output":
            assert it["call_id"] in calls and it["call_id"] not in answered, it
            assert isinstance(it["output"], str)
            answered.add(it["call_id"])
        elif it["type"] == "message":
            assert it["content"], it
    assert answered == calls


# ---------------------------------------------------------------------------------------------
# the instances that failed


def test_malformed_arguments_are_replayed_as_an_empty_object_on_every_backend() -> None:
    call = ToolCall(id="c1", name="search", arguments=None, raw_arguments="{")
    i = inter(Messages.user("go"), out(call), result("c1", "Error: invalid arguments", error_detail="bad"))
    assert chat(i)["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert next(x for x in resp(i)["input"] if x["type"] == "function_call")["arguments"] == "{}"
    assert anth(i)["messages"][1]["content"][0]["input"] == {}


def test_llama_server_keeps_answering_after_a_malformed_call_in_the_history(llama_server: Any) -> None:
    """A real llama.cpp server answered 500 to every request whose history replayed ``"{"``."""
    from foundation_ai.backends._openai_chat import openai_chat

    m = openai_chat("smollm2", base_url=llama_server.base_url, max_retries=0)
    call = ToolCall(id="c1", name="search", arguments=None, raw_arguments="{")
    i = inter(Messages.user("Say hi."), out(call), result("c1", "invalid arguments", error_detail="bad"))
    i = msgspec.structs.replace(i, messages=[*i.messages, Messages.user("Say hi again.")])
    last = m.generate(i, ModelParams(max_tokens=8, temperature=0.0, seed=1))[-1]
    assert last.stop_reason != StopReason.Error(), last.error_detail


def test_whitespace_only_assistant_text_is_not_sent_to_anthropic() -> None:
    i = inter(Messages.user("q"), out(TextContent("\n")), Messages.user("again"), out(TextContent(" \t")))
    body = anth(i)
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "text", "text": "again"}]}
    ]
    check_anthropic(body)


def test_prefill_trailing_whitespace_is_stripped_for_anthropic() -> None:
    body = anth(inter(Messages.user("q"), out(TextContent("The answer is "))))
    assert body["messages"][-1]["content"][-1]["text"] == "The answer is"


def test_vllm_46_character_id_is_shortened_for_openai_call_and_result_alike() -> None:
    i = inter(Messages.user("q"), out(ToolCall(id=VLLM_ID, name="search", arguments={})), result(VLLM_ID))
    msgs = chat(i)["messages"]
    sent = msgs[1]["tool_calls"][0]["id"]
    assert len(sent) <= 40 and msgs[2]["tool_call_id"] == sent
    assert chat(i)["messages"][1]["tool_calls"][0]["id"] == sent  # deterministic
    check_chat(chat(i))


def test_ids_with_dots_and_colons_fit_anthropic_pattern() -> None:
    i = inter(
        Messages.user("q"),
        out(ToolCall(id="functions.search:0", name="search", arguments={})),
        result("functions.search:0"),
    )
    body = anth(i)
    tid = body["messages"][1]["content"][0]["id"]
    assert SAFE.match(tid) and body["messages"][2]["content"][0]["tool_use_id"] == tid


def test_empty_ids_get_unique_replacements_and_pair_by_position() -> None:
    i = inter(
        Messages.user("q"),
        out(ToolCall(id="", name="a", arguments={"n": 1})),
        out(ToolCall(id="", name="b", arguments={"n": 2})),
        result("", "first", name="a"),
        result("", "second", name="b"),
    )
    body = anth(i)
    uses = [b for b in body["messages"][1]["content"] if b["type"] == "tool_use"]
    results = body["messages"][2]["content"]
    assert len({u["id"] for u in uses}) == 2
    assert [r["tool_use_id"] for r in results] == [u["id"] for u in uses]
    assert [r["content"][0]["text"] for r in results] == ["first", "second"]  # none turned into plain text
    check_anthropic(body)
    check_chat(chat(i))
    check_responses(resp(i))


def test_reasoning_is_not_sent_after_a_fallback_to_a_non_reasoning_model() -> None:
    R = ModelProviders.OpenAIResponses
    hist = inter(
        Messages.user("q"),
        out(ThinkingContent("plan", signature="enc", item_id="rs_1"), provider=R),
        out(ToolCall(id="call_1", name="search", arguments={}), provider=R, signature="fc_1"),
        result("call_1"),
    )
    to_41 = resp(hist, "gpt-4.1")
    assert [x["type"] for x in to_41["input"]] == ["message", "function_call", "function_call_output"]
    assert all("id" not in x for x in to_41["input"])  # no item id asking for the dropped reasoning
    check_responses(to_41)
    to_5 = resp(hist, "gpt-5-mini")
    assert [x["type"] for x in to_5["input"]][:2] == ["message", "reasoning"]
    assert (
        resp(hist, "gpt-4.1", ModelParams(thinking_level=ThinkingLevel.Low))["input"][1]["type"]
        == "reasoning"
    )


def test_thinking_is_not_sent_to_a_claude_model_without_extended_thinking() -> None:
    A = ModelProviders.Anthropic
    hist = inter(
        Messages.user("q"),
        out(ThinkingContent("t", signature="sig"), provider=A),
        out(TextContent("A"), provider=A),
        Messages.user("more"),
    )
    assert anth(hist, "claude-sonnet-4-5")["messages"][1]["content"][0]["type"] == "thinking"
    assert anth(hist, "claude-3-5-haiku-latest")["messages"][1]["content"] == [{"type": "text", "text": "A"}]


def test_thinking_is_turned_off_to_continue_a_tool_loop_begun_without_thinking() -> None:
    hist = inter(Messages.user("q"), out(ToolCall(id="c1", name="search", arguments={})), result("c1"))
    body = anth(hist, params=ModelParams(thinking_level=ThinkingLevel.Low, max_tokens=100))
    assert "thinking" not in body and body["max_tokens"] == 100
    check_anthropic(body)
    fresh = anth(inter(Messages.user("q")), params=ModelParams(thinking_level=ThinkingLevel.Low))
    assert fresh["thinking"]["type"] == "enabled"


def test_chat_content_null_by_default_and_empty_string_as_an_option() -> None:
    i = inter(Messages.user("q"), out(ToolCall(id="c1", name="search", arguments={})), result("c1"))
    assert chat(i)["messages"][1]["content"] is None
    assert chat(i, tool_call_content="")["messages"][1]["content"] == ""


def test_chat_model_option_sends_empty_content_to_the_server() -> None:
    from foundation_ai.backends._openai_chat import openai_chat
    from tests._backend_helpers import Fixtures
    from tests._fixture_server import FixtureServer

    i = inter(Messages.user("q"), out(ToolCall(id="c1", name="search", arguments={})), result("c1"))
    with FixtureServer() as srv:
        srv.queue(Fixtures("openai_chat").sse("text.sse"))
        openai_chat("x", base_url=srv.base_url, tool_call_content="").generate(i)
        assert srv.requests[-1].json()["messages"][1]["content"] == ""


def test_chat_unanswered_and_orphan_results_are_paired() -> None:
    i = inter(
        Messages.user("q"),
        out(ToolCall(id="c1", name="search", arguments={})),
        out(ToolCall(id="c2", name="search", arguments={})),
        Messages.user("steer"),
        result("c2", "two"),
        result("zz", "stray"),
    )
    msgs = chat(i)["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "tool", "user", "user"]
    assert msgs[2]["tool_call_id"] == "c1" and "not run" in msgs[2]["content"]
    assert msgs[3] == {"role": "tool", "tool_call_id": "c2", "content": "two"}
    assert msgs[5]["content"].startswith("[result of tool call zz]")
    check_chat(chat(i))


def test_repeated_ids_across_turns_are_made_unique() -> None:
    i = inter(
        Messages.user("q"),
        out(ToolCall(id="call_0", name="s", arguments={})),
        result("call_0", "one"),
        out(ToolCall(id="call_0", name="s", arguments={})),
        result("call_0", "two"),
    )
    body = anth(i)
    ids = [b["id"] for m in body["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert len(set(ids)) == 2
    assert body["messages"][4]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": ids[1],
        "content": [{"type": "text", "text": "two"}],
    }


def test_invalid_tool_names_in_the_history_are_fitted() -> None:
    i = inter(Messages.user("q"), out(ToolCall(id="c1", name="srv.search tool", arguments={})), result("c1"))
    assert chat(i)["messages"][1]["tool_calls"][0]["function"]["name"] == "srv_search_tool"


def test_sanitation_never_changes_the_stored_messages() -> None:
    hist = [
        Messages.user(" "),
        out(ToolCall(id=VLLM_ID, name="a.b", arguments=None, raw_arguments="{")),
        result(VLLM_ID, " "),
        out(TextContent("\n")),
    ]
    before = [to_json(m) for m in hist]
    for rules_out in (chat(inter(*hist)), anth(inter(*hist)), resp(inter(*hist))):
        assert rules_out
    sanitize_history(hist, OPENAI_CHAT)
    assert [to_json(m) for m in hist] == before


def test_fit_id_is_deterministic_bounded_and_keeps_valid_ids() -> None:
    assert fit_id("call_abc", 40) == "call_abc"
    a, b = fit_id(VLLM_ID, 40), fit_id(VLLM_ID + "x", 40)
    assert a == fit_id(VLLM_ID, 40) and a != b and len(a) <= 40 and SAFE.match(a)
    assert SAFE.match(fit_id("", 40)) and SAFE.match(fit_id("é/🙂", 64))


# ---------------------------------------------------------------------------------------------
# any stored history, after sanitation, satisfies each provider's constraints

ID_POOL = ["", "", "call_1", "toolu_01A", "functions.search:0", VLLM_ID, "x" * 100, "a b", "call_1"]
PROVIDERS = [
    ModelProviders.OpenAI,
    ModelProviders.Anthropic,
    ModelProviders.OpenAIResponses,
    ModelProviders.Unknown,
]
texts = st.sampled_from(["", " ", "\n", "ok", "hi  ", "\t x \n"]) | st.text(max_size=8)
call_ids = st.sampled_from(ID_POOL)
names = st.sampled_from(["search", "srv.tool", "", "x" * 70, "get_time"])
arguments = st.sampled_from([{}, {"q": "v"}, None])
providers = st.sampled_from(PROVIDERS)
image = ImageContent(b64="iVBORw0KGgo=", mime_type=MimeType.Png)

user_msgs = st.builds(lambda t: Messages.user(t) if t else Messages.user("x"), texts) | st.builds(
    lambda t: Messages.system(t or "s"), texts
)
assistant_texts = st.builds(lambda t, p: out(TextContent(t), provider=p), texts, providers)
errors = st.builds(lambda t: out(TextContent(t), stop_reason=StopReason.Error(), error_detail="boom"), texts)
calls = st.builds(
    lambda i, n, a, p: out(
        ToolCall(id=i, name=n, arguments=a, raw_arguments=None if a is not None else "{"), provider=p
    ),
    call_ids,
    names,
    arguments,
    providers,
)
thinking = st.builds(
    lambda t, sig, item, redacted, p: out(
        ThinkingContent(t, signature=sig, item_id=item, redacted=redacted), provider=p
    ),
    texts,
    st.none() | st.just("sig"),
    st.none() | st.just("rs_1"),
    st.booleans(),
    providers,
)
results = st.builds(
    lambda i, t, err, img: ToolResultMessage(
        tool_call_id=i,
        name="search",
        content=image if img else TextContent(t),
        error_detail="e" if err else None,
    ),
    call_ids,
    texts,
    st.booleans(),
    st.booleans(),
)
histories = st.lists(
    st.one_of(user_msgs, assistant_texts, errors, calls, thinking, results), min_size=1, max_size=12
)
models = st.sampled_from(["gpt-4.1", "gpt-5-mini", "local-model"])
claude = st.sampled_from(["claude-sonnet-4-5", "claude-3-5-haiku-latest"])
levels = st.sampled_from([None, ThinkingLevel.Low])


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(histories, models, claude, levels)
def test_any_history_after_sanitation_meets_each_providers_constraints(
    hist: list[Messages], model: str, claude_model: str, level: ThinkingLevel | None
) -> None:
    before = [to_json(m) for m in hist]
    i = inter(*hist)
    params = ModelParams(thinking_level=level)
    check_chat(chat(i))
    check_chat(chat(i, tool_call_content=""))
    check_anthropic(anth(i, claude_model, params))
    check_responses(resp(i, model, params))
    assert [to_json(m) for m in hist] == before  # what is stored never changes


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4.1-mini", "chatgpt-4o-latest", "gpt-3.5-turbo"])
def test_known_non_reasoning_models_take_no_reasoning(model: str) -> None:
    assert not accepts_reasoning(model)
    assert accepts_reasoning("o3") and accepts_reasoning("gpt-5") and accepts_reasoning("qwen3")
