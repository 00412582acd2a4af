"""The Anthropic Messages backend: wire cases replayed from a loopback fixture server (bytes
written from Anthropic's public Messages / streaming / errors docs, in tests/fixtures/anthropic/),
request mapping, failures, and a real llama.cpp server (xllamacpp, ``/v1/messages``) on
127.0.0.1."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from foundation_ai.backends import anthropic, assemble
from foundation_ai.backends._anthropic_request import build_request, check_output_format, wire_messages
from foundation_ai.backends._anthropic_stream import AnthropicStreamParser
from foundation_ai.errors import ConfigurationError
from foundation_ai.types import (
    Args,
    AssistantMessage,
    CacheRetention,
    CostStatus,
    GenerationMetadata,
    ImageContent,
    Messages,
    MimeType,
    ModelId,
    ModelInteraction,
    ModelParams,
    ModelProviders,
    ModelState,
    OutputFormat,
    StopReason,
    Stream,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    Tool,
    ToolCall,
    ToolChoice,
    ToolDeclarations,
    ToolDefinition,
    ToolResultMessage,
    UsageReport,
)
from tests._backend_helpers import (
    Canned,
    Fixtures,
    FixtureServer,
    check_contract,
    error_of,
    nexts,
    outputs,
    reset,
    serve,
    tool,
)
from tests._fixture_server import sse_events
from tests._llama_server import LlamaServerHandle

FIX = Fixtures("anthropic")
KEY = "sk-ant-test-SECRET-0123456789"
frames, sse_canned, json_canned = FIX.frames, FIX.sse, FIX.json


@pytest.fixture(scope="module")
def srv() -> Iterator[FixtureServer]:
    yield from serve()


@pytest.fixture
def fresh(srv: FixtureServer) -> FixtureServer:
    return reset(srv)


TOOLS = ToolDeclarations(
    tools=[
        tool("get_weather", city="string"),
        tool("get_time"),
        tool("search", q="string"),
        tool("write_file", path="string"),
    ]
)


def ask(text: str = "hi", **kw: Any) -> ModelInteraction:
    return ModelInteraction(messages=[Messages.user(text)], tools_shed=TOOLS, **kw)


def model(srv: FixtureServer, **kw: Any) -> Any:
    return anthropic("claude-sonnet-4-5", base_url=srv.base_url, api_key=KEY, retry_base_delay=0.01, **kw)


def run(srv: FixtureServer, *canned: Canned, inter: ModelInteraction | None = None, **kw: Any) -> list[Any]:
    srv._queue.clear()  # the server repeats its last response: start from an empty queue
    srv.queue(*canned)
    return list(model(srv, **kw).stream(inter or ask()))


def anthropic_msg(content: Any, provider: str = ModelProviders.Anthropic, **kw: Any) -> AssistantMessage:
    return AssistantMessage(model=ModelId.Name("claude-sonnet-4-5"), content=content, provider=provider, **kw)


# ------------------------------------------------------------------------------------------
# text, usage, headers


def test_text_stream_snapshots_usage_and_headers(fresh: FixtureServer) -> None:
    items = run(fresh, sse_canned("text.sse"), inter=ask(system_prompt="Be brief.", soul="You are Ada."))
    check_contract(items)
    assert isinstance(items[-1].value, ModelState.Finished)
    ns = nexts(items)
    assert [m.text() for m in ns] == ["Hello", "Hello there", "Hello there!", "Hello there!"]
    assert len({m.id for m in ns}) == 1
    # cumulative usage with cache read / write on every chunk; final output count on the last
    assert all(m.usage.cache_read == 100 and m.usage.cache_write == 10 and m.usage.input == 25 for m in ns)
    assert ns[0].usage.output == 1 and ns[-1].usage.output == 15
    assert ns[-1].usage.total_tokens == 25 + 15 + 100 + 10
    assert [m.stop_reason for m in ns] == [StopReason.STOP] * 4
    timing = [x for x in ns[-1].metadata or [] if isinstance(x, GenerationMetadata.Timing)]
    assert timing and timing[0].time_to_first_token is not None and timing[0].duration is not None
    assert all(m.provider == ModelProviders.Anthropic for m in ns)
    req = fresh.requests[0]
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == KEY and req.headers["anthropic-version"] == "2023-06-01"
    body = req.json()
    assert body["system"] == "Be brief.\n\nYou are Ada."
    assert body["max_tokens"] == 2048 and body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_generate_is_assembled_stream(fresh: FixtureServer) -> None:
    fresh.queue(sse_canned("text.sse"))
    out = model(fresh).generate(ask())
    assert len(out) == 1 and out[0].text() == "Hello there!" and out[0].usage.output == 15


async def test_async_stream_matches_sync(fresh: FixtureServer) -> None:
    fresh.queue(sse_canned("c05_thinking_text_tool.sse"))
    items = [i async for i in model(fresh).astream(ask())]
    check_contract(items)
    fresh.queue(sse_canned("c05_thinking_text_tool.sse"))
    sync = list(model(fresh).stream(ask()))
    assert [m.content for m in outputs(items)] == [m.content for m in outputs(sync)]


def test_base_url_with_v1_and_env_key(fresh: FixtureServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-0000")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fresh.base_url)  # the env key goes to a paired host only
    fresh.queue(sse_canned("text.sse"))
    m = anthropic("claude-haiku-4-5", base_url=fresh.base_url + "/v1/")
    assert m.generate(ask())[-1].text() == "Hello there!"
    assert fresh.requests[0].path == "/v1/messages"
    assert fresh.requests[0].headers["x-api-key"] == "sk-ant-from-env-0000"
    assert "sk-ant-from-env" not in repr(m)


def test_missing_key_for_anthropic_host_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        anthropic("claude-sonnet-4-5")
    assert anthropic("claude-sonnet-4-5", api_key=KEY).descriptor.provider == ModelProviders.Anthropic


def test_user_http_client_is_used() -> None:
    body = (FIX / "text.sse").read_bytes()
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    out = anthropic("claude-sonnet-4-5", api_key=KEY, http_client=client).generate(ask())
    assert out[-1].text() == "Hello there!"
    assert str(seen[0].url) == "https://api.anthropic.com/v1/messages"
    # the provider's own host: prices from genai-prices, cost on the usage (USD)
    assert out[-1].usage.cost.status == CostStatus.Estimated and out[-1].usage.cost.total > 0
    assert out[-1].usage.cost.cache_read > 0 and out[-1].usage.cost.cache_write > 0


def test_descriptor_prices_known_for_anthropic_host_not_for_loopback(fresh: FixtureServer) -> None:
    d = anthropic("claude-sonnet-4-5", api_key=KEY).descriptor
    assert d.input_price and d.output_price and d.cache_read_price and d.cache_write_price
    assert model(fresh).descriptor.input_price is None
    fresh.queue(sse_canned("text.sse"))
    assert model(fresh).generate(ask())[-1].usage.cost.status == CostStatus.Unknown


# ------------------------------------------------------------------------------------------
# wire cases: tool calls


def test_tool_without_params_is_empty_object_same_as_non_streamed(fresh: FixtureServer) -> None:
    """C01: content_block_start without ``input``, no input_json_delta: arguments ``{}``; the
    non-streamed response for the same answer assembles identically."""
    items = run(fresh, sse_canned("c01_tool_no_params.sse"))
    check_contract(items)
    streamed = outputs(items)
    assert len(streamed) == 1
    call = streamed[0].content
    assert call == ToolCall(id="toolu_01NoParams", name="get_time", arguments={})
    assert streamed[0].stop_reason == StopReason.TOOL_USE
    whole_items = run(fresh, json_canned("c01_tool_no_params.json"), streaming=False)
    check_contract(whole_items)
    whole = outputs(whole_items)
    assert [(m.content, m.stop_reason, m.usage) for m in whole] == [
        (m.content, m.stop_reason, m.usage) for m in streamed
    ]
    assert fresh.requests[-1].json()["stream"] is False


def test_thinking_then_text_then_tool_use(fresh: FixtureServer) -> None:
    """C05: all three outputs in order, stop reason ToolUse on the last."""
    items = run(fresh, sse_canned("c05_thinking_text_tool.sse"))
    check_contract(items)
    outs = outputs(items)
    assert [type(m.content) for m in outs] == [ThinkingContent, TextContent, ToolCall]
    thinking, text, call = (m.content for m in outs)
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == (
        "The user wants the weather. I should call get_weather."
    )
    assert thinking.signature and thinking.signature.startswith("EqQBCgIYAh")
    assert isinstance(text, TextContent) and text.content == "Let me check the weather."
    assert call == ToolCall(
        id="toolu_01T1x1fJ34qAmk2tNTrN7Up6",
        name="get_weather",
        arguments={"city": "San Francisco, CA", "unit": "fahrenheit"},
    )
    assert outs[-1].stop_reason == StopReason.TOOL_USE and outs[-1].usage.output == 89
    # thinking chunks are snapshots too
    thinking_chunks = [m.content.thinking for m in nexts(items) if isinstance(m.content, ThinkingContent)]
    assert thinking_chunks[0] == "The user wants the weather."


@pytest.mark.parametrize("fixture", ["c06_cut_tool_max_tokens.sse", "c06_cut_tool_no_block_stop.sse"])
def test_tool_args_cut_by_max_tokens(fresh: FixtureServer, fixture: str) -> None:
    """C06: stop reason Length; the call carries no arguments and the raw text, never ``{}``."""
    items = run(fresh, sse_canned(fixture))
    check_contract(items)
    (out,) = outputs(items)
    call = out.content
    assert isinstance(call, ToolCall)
    assert out.stop_reason == StopReason.LENGTH
    assert call.arguments is None
    assert call.raw_arguments is not None and call.raw_arguments.startswith('{"path": "notes.t')


def test_parallel_tool_use_fragments_join_by_index(fresh: FixtureServer) -> None:
    """input_json_delta fragments belong to the block with their index, not "the last call"."""
    items = run(fresh, sse_canned("parallel_tools.sse"))
    check_contract(items)
    outs = outputs(items)
    assert outs[0].text() == "Checking both."
    assert [m.content for m in outs[1:]] == [
        ToolCall(id="toolu_01A", name="get_weather", arguments={"city": "Paris"}),
        ToolCall(id="toolu_01B", name="get_time", arguments={"tz": "Europe/Paris"}),
    ]
    assert outs[-1].stop_reason == StopReason.TOOL_USE
    assert outs[-1].usage == UsageReport(
        input=50, output=70, cache_read=2000, cache_write=0, total_tokens=2120
    )


def test_tool_signature_kept_and_echoed(fresh: FixtureServer) -> None:
    """C26: a signature on the call is kept in ToolCall.signature and echoed back on replay."""
    items = run(fresh, sse_canned("c26_tool_signature.sse"))
    (out,) = outputs(items)
    assert isinstance(out.content, ToolCall) and out.content.signature == "c2lnLW9uLWNhbGw="
    wire = wire_messages(
        [
            Messages.user("find"),
            out,
            ToolResultMessage(tool_call_id="toolu_01Sig", name="search", content=TextContent("ok")),
        ]
    )
    assert wire[1]["content"] == [
        {
            "type": "tool_use",
            "id": "toolu_01Sig",
            "name": "search",
            "input": {"q": "llama"},
            "signature": "c2lnLW9uLWNhbGw=",
        }
    ]


# ------------------------------------------------------------------------------------------
# wire cases: thinking replay


def _turn_blocks(items: list[Any], follow_up: list[Any] | None = None) -> list[dict[str, Any]]:
    history = [Messages.user("How far?"), *outputs(items), *(follow_up or []), Messages.user("Thanks. And?")]
    body = build_request(ModelInteraction(messages=history), ModelParams(), "claude-sonnet-4-5", stream=True)
    assert [m["role"] for m in body["messages"]][:2] == ["user", "assistant"]
    return list(body["messages"][1]["content"])


def test_thinking_and_redacted_replayed_byte_exact_in_order(fresh: FixtureServer) -> None:
    """C19: thinking, redacted_thinking, thinking: stored byte-exact (text, signature, data) and
    replayed in the original order at the start of their assistant turn."""
    items = run(fresh, sse_canned("c19_redacted_thinking.sse"))
    check_contract(items)
    outs = outputs(items)
    assert [type(m.content) for m in outs] == [ThinkingContent, ThinkingContent, ThinkingContent, TextContent]
    redacted = outs[1].content
    assert isinstance(redacted, ThinkingContent) and redacted.redacted and redacted.thinking == ""
    # the blocks as the server sent them, from the fixture itself
    sent = [json.loads(f.split(b"data: ", 1)[1]) for f in frames("c19_redacted_thinking.sse")]
    sigs = [e["delta"]["signature"] for e in sent if e.get("delta", {}).get("type") == "signature_delta"]
    data = next(
        e["content_block"]["data"]
        for e in sent
        if e.get("content_block", {}).get("type") == "redacted_thinking"
    )
    assert _turn_blocks(items) == [
        {"type": "thinking", "thinking": "First, consider the units.", "signature": sigs[0]},
        {"type": "redacted_thinking", "data": data},
        {"type": "thinking", "thinking": "Then answer.", "signature": sigs[1]},
        {"type": "text", "text": "42 km."},
    ]


def test_thinking_only_response_replayed_unchanged(fresh: FixtureServer) -> None:
    """C20: a response holding only a signed thinking block is replayed as thinking, never text."""
    items = run(fresh, sse_canned("c20_only_thinking.sse"))
    (out,) = outputs(items)
    assert isinstance(out.content, ThinkingContent) and out.stop_reason == StopReason.STOP
    blocks = _turn_blocks(items)
    assert blocks == [{"type": "thinking", "thinking": "Nothing to add.", "signature": out.content.signature}]


def test_empty_thinking_with_signature_kept(fresh: FixtureServer) -> None:
    """C23: empty thinking text with a signature is an output of its own and is replayed."""
    items = run(fresh, sse_canned("c23_empty_thinking_signature.sse"))
    outs = outputs(items)
    assert isinstance(outs[0].content, ThinkingContent)
    assert outs[0].content.thinking == "" and outs[0].content.signature
    assert _turn_blocks(items)[0] == {
        "type": "thinking",
        "thinking": "",
        "signature": outs[0].content.signature,
    }


def test_thinking_from_other_provider_dropped_text_and_calls_kept() -> None:
    """C21: history recorded on another provider: its signed thinking is dropped; text and tool
    calls stay (and the call keeps its result)."""
    other = ModelProviders.OpenAIResponses
    history = [
        Messages.user("Weather?"),
        anthropic_msg(ThinkingContent("hmm", signature="enc-by-openai", item_id="rs_1"), provider=other),
        anthropic_msg(TextContent("Checking."), provider=other),
        anthropic_msg(
            ToolCall(id="call_9", name="get_weather", arguments={"city": "Oslo"}, signature="x"),
            provider=other,
        ),
        ToolResultMessage(tool_call_id="call_9", name="get_weather", content=TextContent("Snow")),
    ]
    wire = wire_messages(history)
    assert wire[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "call_9", "name": "get_weather", "input": {"city": "Oslo"}},
        ],
    }
    assert wire[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_9", "content": [{"type": "text", "text": "Snow"}]}
    ]


def test_unsigned_thinking_is_not_replayed() -> None:
    """Anthropic rejects thinking without its signature; such a block (a stream cut before the
    signature arrived) is dropped rather than sent or turned into text."""
    wire = wire_messages(
        [Messages.user("q"), anthropic_msg(ThinkingContent("partial")), anthropic_msg(TextContent("A"))]
    )
    assert wire[1]["content"] == [{"type": "text", "text": "A"}]


# ------------------------------------------------------------------------------------------
# wire cases: tool results


def test_tool_result_image_is_an_image_block_inside_tool_result() -> None:
    """C38: a tool returns an image: an image block inside the tool_result."""
    img = ImageContent(b64="iVBORw0KGgo=", mime_type=MimeType.Png)
    wire = wire_messages(
        [
            Messages.user("Screenshot please"),
            anthropic_msg(ToolCall(id="toolu_1", name="screenshot", arguments={})),
            ToolResultMessage(tool_call_id="toolu_1", name="screenshot", content=img),
        ]
    )
    assert wire[2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                    }
                ],
            }
        ],
    }


def test_every_tool_use_followed_by_exactly_its_result() -> None:
    """C40: results go in the next user message, first, in call order; a missing result becomes
    an is_error result; a duplicate or orphan result never reaches the API as a tool_result; a
    failed tool's result carries is_error; results and user text share ONE user message."""
    history = [
        Messages.user("Do three things"),
        anthropic_msg(ThinkingContent("plan", signature="sig-1")),
        anthropic_msg(ToolCall(id="t_a", name="get_weather", arguments={"city": "Rome"})),
        anthropic_msg(ToolCall(id="t_b", name="get_time", arguments={})),
        anthropic_msg(ToolCall(id="t_c", name="search", arguments={"q": "x"})),
        Messages.system("Tools finished."),
        ToolResultMessage(
            tool_call_id="t_b", name="get_time", content=TextContent(""), error_detail="timeout after 30 s"
        ),
        ToolResultMessage(tool_call_id="t_a", name="get_weather", content=TextContent("Hot")),
        ToolResultMessage(tool_call_id="t_a", name="get_weather", content=TextContent("Hot again")),
        ToolResultMessage(tool_call_id="t_zzz", name="search", content=TextContent("stray")),
    ]
    wire = wire_messages(history)
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert [b["type"] for b in wire[1]["content"]] == ["thinking", "tool_use", "tool_use", "tool_use"]
    blocks = wire[2]["content"]
    results = [b for b in blocks if b["type"] == "tool_result"]
    assert [b["tool_use_id"] for b in results] == ["t_a", "t_b", "t_c"]
    assert blocks[:3] == results  # tool results first
    assert results[0] == {
        "type": "tool_result",
        "tool_use_id": "t_a",
        "content": [{"type": "text", "text": "Hot"}],
    }
    assert results[1]["is_error"] is True and results[1]["content"][0]["text"] == "timeout after 30 s"
    assert results[2]["is_error"] is True  # never run: synthesized
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    assert texts[0] == "<system_instruction>\nTools finished.\n</system_instruction>"
    assert "Hot again" in texts and "stray" in texts


def test_unanswered_call_at_end_gets_an_error_result() -> None:
    wire = wire_messages(
        [Messages.user("go"), anthropic_msg(ToolCall(id="t_1", name="get_time", arguments={}))]
    )
    assert wire[-1]["role"] == "user"
    assert wire[-1]["content"][0]["tool_use_id"] == "t_1" and wire[-1]["content"][0]["is_error"] is True


def test_trimmed_call_leaves_no_orphan_tool_result() -> None:
    """C28 (backend side): when history trimming removed an assistant turn (its thinking and tool
    call) but kept a result, the result is sent as text, never as a tool_result without its
    tool_use; and thinking is never sent without the turn it belongs to."""
    history = [
        ToolResultMessage(tool_call_id="t_gone", name="search", content=TextContent("old result")),
        Messages.user("Continue"),
    ]
    wire = wire_messages(history)
    assert wire == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[result of tool call t_gone]"},
                {"type": "text", "text": "old result"},
                {"type": "text", "text": "Continue"},
            ],
        }
    ]


def test_adjacent_messages_merge_and_roles_keep_meaning() -> None:
    img = ImageContent(b64="R0lGOD==", mime_type=MimeType.Gif)
    history = [
        Messages.user("one"),
        Messages.agent("from planner"),
        Messages.User(role="reviewer", content=TextContent("looks fine")),
        Messages.User(content=img),
        anthropic_msg(TextContent("A")),
        anthropic_msg(TextContent("")),  # empty text is not sent
        anthropic_msg(TextContent("B")),
        anthropic_msg(TextContent(""), stop_reason=StopReason.Error(), error_detail="boom"),
        Messages.user("two"),
    ]
    wire = wire_messages(history)
    assert wire == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "one"},
                {"type": "text", "text": "<agent_message>\nfrom planner\n</agent_message>"},
                {"type": "text", "text": '<message from="reviewer">\nlooks fine\n</message>'},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/gif", "data": "R0lGOD=="},
                },
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]},
        {"role": "user", "content": [{"type": "text", "text": "two"}]},
    ]


# ------------------------------------------------------------------------------------------
# request parameters


def test_tools_and_tool_choice_mapping() -> None:
    expected = {
        None: None,
        "auto": {"type": "auto"},
        "required": {"type": "any"},
        "function": {"type": "tool", "name": "search"},
        "none": {"type": "none"},
    }
    choices: dict[Any, Any] = {
        None: None,
        "auto": ToolChoice.Auto(),
        "required": ToolChoice.Required(),
        "function": ToolChoice.Function("search"),
        "none": ToolChoice.None_(),
    }
    for key, choice in choices.items():
        body = build_request(ask(tool_choice=choice), ModelParams(), "m", stream=True)
        assert body.get("tool_choice") == expected[key]
    body = build_request(ask(), ModelParams(), "m", stream=True)
    assert body["tools"][0] == {
        "name": "get_weather",
        "description": "get_weather tool",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    no_tools = build_request(
        ModelInteraction(messages=[Messages.user("x")], tool_choice=ToolChoice.Auto()),
        ModelParams(),
        "m",
        stream=True,
    )
    assert "tools" not in no_tools and "tool_choice" not in no_tools


def test_multi_commands_tool_rendered_as_one_function() -> None:
    memory = Tool.MultiCommands(
        "memory",
        [
            ToolDefinition(
                name="add",
                description="Add a fact",
                arguments=Args({"type": "object", "properties": {"fact": {"type": "string"}}}),
            )
        ],
    )
    body = build_request(
        ModelInteraction(messages=[Messages.user("x")], tools_shed=ToolDeclarations(tools=[memory])),
        ModelParams(),
        "m",
        stream=True,
    )
    (t,) = body["tools"]
    assert t["name"] == "memory" and t["input_schema"]["required"] == ["command"]


def test_params_mapping() -> None:
    p = ModelParams(max_tokens=300, temperature=0.2, stop_tokens=["END"], seed=7, frequency_penalty=0.5)
    body = build_request(ask(), p, "m", stream=False)
    assert body["max_tokens"] == 300 and body["temperature"] == 0.2 and body["stop_sequences"] == ["END"]
    assert "top_p" not in body and "top_k" not in body  # unchanged seed defaults are not sent
    assert "seed" not in body and "frequency_penalty" not in body
    body = build_request(ask(), p.with_(top_p=0.5, top_k=12.0), "m", stream=True)
    assert body["top_p"] == 0.5 and body["top_k"] == 12


def test_thinking_params() -> None:
    body = build_request(
        ask(), ModelParams(max_tokens=1000, thinking_budget=4000, temperature=0.3), "m", stream=True
    )
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4000}
    assert body["max_tokens"] == 5000  # must exceed the budget
    assert "temperature" not in body and "top_k" not in body
    body = build_request(
        ask(), ModelParams(max_tokens=30000, thinking_level=ThinkingLevel.Low), "m", stream=True
    )
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048} and body["max_tokens"] == 30000
    body = build_request(ask(), ModelParams(thinking_budget=10), "m", stream=True)
    assert body["thinking"]["budget_tokens"] == 1024
    body = build_request(ask(), ModelParams(thinking_level=ThinkingLevel.Off), "m", stream=True)
    assert "thinking" not in body
    # the API rejects thinking with a forced tool: the forced tool wins
    forced = ask(tool_choice=ToolChoice.Function("search"))
    body = build_request(forced, ModelParams(thinking_budget=4000), "m", stream=True)
    assert "thinking" not in body and body["tool_choice"] == {"type": "tool", "name": "search"}
    body = build_request(
        ask(tool_choice=ToolChoice.Auto()), ModelParams(thinking_budget=4000), "m", stream=True
    )
    assert body["thinking"]["budget_tokens"] == 4000


def test_cache_control_by_retention() -> None:
    inter = ask(system_prompt="Sys")
    body = build_request(inter, ModelParams(cache_retention=CacheRetention.Short), "m", stream=True)
    assert body["system"] == [{"type": "text", "text": "Sys", "cache_control": {"type": "ephemeral"}}]
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    body = build_request(inter, ModelParams(cache_retention=CacheRetention.Long), "m", stream=True)
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    body = build_request(inter, ModelParams(cache_retention=CacheRetention.None_), "m", stream=True)
    assert body["system"] == "Sys" and "cache_control" not in body["messages"][-1]["content"][-1]


def test_output_format_instruction_and_check() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    fmt = OutputFormat.JsonSchema("answer", schema)
    body = build_request(ask(system_prompt="Sys"), ModelParams(output_format=fmt), "m", stream=True)
    assert (
        body["system"].startswith("Sys\n\nAnswer with one JSON object")
        and '"required":["n"]' in body["system"]
    )
    assert check_output_format('{"n": 3}', fmt) is None
    assert check_output_format('```json\n{"n": 3}\n```', fmt) is None
    assert "JSON Schema" in (check_output_format('{"n": "three"}', fmt) or "")
    assert "not valid JSON" in (check_output_format("three", OutputFormat.JsonObject()) or "")
    assert check_output_format("anything", OutputFormat.Text()) is None


def test_output_format_violation_ends_with_error_after_text(fresh: FixtureServer) -> None:
    """A JSON output_format is checked after the stream: the text stays, then an error message."""
    items = run(
        fresh,
        sse_canned("text.sse"),
        inter=ask(),
    )
    assert isinstance(items[-1].value, ModelState.Finished)
    fresh.queue(sse_canned("text.sse"))
    items = list(model(fresh).stream(ask(), ModelParams(output_format=OutputFormat.JsonObject())))
    check_contract(items)
    err = error_of(items)
    assert "not valid JSON" in (err.error_detail or "")
    assert outputs(items)[0].text() == "Hello there!"


# ------------------------------------------------------------------------------------------
# stop reasons, refusals, failures


def test_refusal_stop_reason_and_metadata(fresh: FixtureServer) -> None:
    (out,) = outputs(run(fresh, sse_canned("refusal.sse")))
    assert out.stop_reason == StopReason.Message("refusal")
    assert GenerationMetadata.RefusalReason("refusal") in (out.metadata or [])


def test_error_event_mid_stream_keeps_partial_output(fresh: FixtureServer) -> None:
    items = run(fresh, sse_canned("error_event.sse"))
    check_contract(items)
    outs = outputs(items)
    assert outs[0].text() == "Partial"
    err = error_of(items)
    assert err.error_detail == "Overloaded (type: overloaded_error)"
    assert err.id != outs[0].id and err.content == TextContent("")


def test_stream_ending_before_message_delta_is_an_error(fresh: FixtureServer) -> None:
    items = run(fresh, sse_canned("truncated.sse"))
    check_contract(items)
    assert outputs(items)[0].text() == "Half an ans"
    assert "ended before" in (error_of(items).error_detail or "")


@pytest.mark.parametrize("drop_after", [12, 14])
def test_dropped_connection_keeps_partial_output(fresh: FixtureServer, drop_after: int) -> None:
    # c05 frames: message_start, thinking (5 frames), text (4), tool_use start + fragments...
    items = run(fresh, sse_canned("c05_thinking_text_tool.sse", drop_after=drop_after))
    check_contract(items)
    outs = outputs(items)
    assert [type(m.content) for m in outs[:2]] == [ThinkingContent, TextContent]
    assert "connection dropped" in (error_of(items).error_detail or "") or "ended before" in (
        error_of(items).error_detail or ""
    )
    calls = [m.content for m in outs if isinstance(m.content, ToolCall)]
    assert calls and all(c.arguments is None for c in calls)  # an unfinished call is never valid
    assert calls[0].id == "toolu_01T1x1fJ34qAmk2tNTrN7Up6"


def test_malformed_event_is_an_error_message(fresh: FixtureServer) -> None:
    items = run(fresh, sse_canned("malformed.sse"))
    check_contract(items)
    assert "malformed event data" in (error_of(items).error_detail or "")


def _thinking_then(event: dict[str, Any]) -> Canned:
    """A closed, signed thinking block 0, then ``event``, then a normal end."""
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "SIG"}},
        {"type": "content_block_stop", "index": 0},
        event,
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 4}},
        {"type": "message_stop"},
    ]
    return Canned(chunks=sse_events([(str(e["type"]), e) for e in events]))


@pytest.mark.parametrize("index", ["absent", None, "0", -1, 1.5, True])
def test_a_block_event_without_an_integer_index_is_the_streams_error(
    fresh: FixtureServer, index: Any
) -> None:
    event: dict[str, Any] = {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "leak"}}
    if index != "absent":
        event["index"] = index
    items = run(fresh, _thinking_then(event))
    check_contract(items)
    err = error_of(items)
    assert "index" in (err.error_detail or "") and "malformed" in (err.error_detail or "")
    thinking = [m.content for m in outputs(items) if isinstance(m.content, ThinkingContent)]
    assert thinking and thinking[-1].thinking == "hmm" and thinking[-1].signature == "SIG"
    assert not any(isinstance(m.content, TextContent) and "leak" in m.text() for m in outputs(items))


@pytest.mark.parametrize("delta", [1, "end_turn", [], None])
def test_a_message_delta_whose_delta_is_not_an_object_is_the_streams_error(
    fresh: FixtureServer, delta: Any
) -> None:
    canned = Canned(
        chunks=sse_events(
            [
                ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 5}}}),
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": "Hi"},
                    },
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 2}}),
                ("message_stop", {"type": "message_stop"}),
            ]
        )
    )
    items = run(fresh, canned)
    check_contract(items)
    assert "message_delta without a delta object" in (error_of(items).error_detail or "")
    assert outputs(items)[0].text() == "Hi"


@pytest.mark.parametrize(
    "fixture",
    ["error_prompt_too_long.json", "error_input_and_max_tokens.json"],
)
def test_http_400_overflow_is_recognised(fresh: FixtureServer, fixture: str) -> None:
    items = run(fresh, json_canned(fixture, status=400))
    check_contract(items)
    err = error_of(items)
    assert err.is_context_overflow()
    assert "invalid_request_error" in (err.error_detail or "") and "HTTP 400" in (err.error_detail or "")
    assert len(fresh.requests) == 1  # a 400 is never retried


def test_401_not_retried_and_key_never_in_error(fresh: FixtureServer) -> None:
    body = json.dumps(
        {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {KEY}"}}
    )
    items = run(fresh, Canned(status=401, body=body.encode(), content_type="application/json"))
    err = error_of(items)
    assert KEY not in (err.error_detail or "") and "authentication_error" in (err.error_detail or "")
    assert not err.is_context_overflow()
    assert len(fresh.requests) == 1


def test_529_overloaded_and_429_retried_honouring_retry_after(fresh: FixtureServer) -> None:
    items = run(
        fresh,
        json_canned("error_overloaded.json", status=529, headers={"retry-after": "0"}),
        json_canned("error_rate_limit.json", status=429, headers={"retry-after": "0"}),
        sse_canned("text.sse"),
    )
    check_contract(items)
    assert isinstance(items[-1].value, ModelState.Finished)
    assert outputs(items)[-1].text() == "Hello there!"
    assert len(fresh.requests) == 3


def test_429_after_retries_is_an_error_not_overflow(fresh: FixtureServer) -> None:
    items = run(
        fresh, json_canned("error_rate_limit.json", status=429, headers={"retry-after": "0"}), max_retries=1
    )
    err = error_of(items)
    assert "rate_limit_error" in (err.error_detail or "") and not err.is_context_overflow()
    assert len(fresh.requests) == 2


def test_non_streamed_message_with_thinking_and_tool(fresh: FixtureServer) -> None:
    items = run(fresh, json_canned("message_thinking_tool.json"), streaming=False)
    check_contract(items)
    assert len(nexts(items)) == 3  # one chunk per output
    outs = outputs(items)
    assert [type(m.content) for m in outs] == [ThinkingContent, TextContent, ToolCall]
    assert outs[-1].stop_reason == StopReason.TOOL_USE
    assert all(m.usage.output == 89 for m in outs)


def test_stop_reason_map() -> None:
    from foundation_ai.backends._anthropic_stream import map_stop_reason

    assert map_stop_reason("end_turn")[0] == StopReason.STOP
    assert map_stop_reason("stop_sequence")[0] == StopReason.STOP
    assert map_stop_reason("max_tokens")[0] == StopReason.LENGTH
    assert map_stop_reason("model_context_window_exceeded")[0] == StopReason.LENGTH
    assert map_stop_reason("tool_use")[0] == StopReason.TOOL_USE
    assert map_stop_reason("pause_turn") == (StopReason.Message("pause_turn"), None)
    assert map_stop_reason("refusal") == (
        StopReason.Message("refusal"),
        [GenerationMetadata.RefusalReason("refusal")],
    )


def test_parser_ignores_unknown_events_and_pings() -> None:
    p = AnthropicStreamParser(ModelId.Name("m"))
    assert p.feed({"type": "ping"}) == [] and p.feed({"type": "future_event", "x": 1}) == []
    assert p.feed({"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta"}}) == []


# ------------------------------------------------------------------------------------------
# a real llama.cpp server (xllamacpp, SmolLM2-135M) on 127.0.0.1, /v1/messages

GREEDY = ModelParams(max_tokens=12, temperature=0.0, seed=42)


def local(llama: LlamaServerHandle, **kw: Any) -> Any:
    return anthropic("smollm2", base_url=llama.base_url, timeout=120, **kw)


def test_llama_streamed_text_usage_length(llama_server: LlamaServerHandle) -> None:
    inter = ModelInteraction(messages=[Messages.user("Say hello in five words.")], system_prompt="Be brief.")
    items = list(local(llama_server).stream(inter, GREEDY))
    check_contract(items)
    assert isinstance(items[-1].value, ModelState.Finished)
    ns = nexts(items)
    assert len(ns) > 3 and len({n.id for n in ns}) == 1
    texts = [n.text() or "" for n in ns]
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))  # snapshots grow
    final = ns[-1]
    assert final.stop_reason == StopReason.LENGTH and final.usage.output == 12
    assert final.usage.input + final.usage.cache_read > 10
    assert final.provider == ModelProviders.Anthropic


async def test_llama_async_matches_sync_and_non_streamed(llama_server: LlamaServerHandle) -> None:
    inter = ModelInteraction(messages=[Messages.user("Name a colour.")])
    a = await local(llama_server).agenerate(inter, GREEDY)
    s = local(llama_server).generate(inter, GREEDY)
    whole = local(llama_server, streaming=False).generate(inter, GREEDY)
    assert a[-1].text() == s[-1].text() == whole[-1].text() and (s[-1].text() or "").strip()
    assert whole[-1].usage.output == s[-1].usage.output
    assert whole[-1].stop_reason == s[-1].stop_reason


def test_llama_stop_sequence_gives_stop(llama_server: LlamaServerHandle) -> None:
    out = local(llama_server).generate(
        ModelInteraction(messages=[Messages.user("Say hello in five words.")]),
        GREEDY.with_(max_tokens=40, stop_tokens=[","]),
    )
    assert out[-1].stop_reason == StopReason.STOP and "," not in (out[-1].text() or "")


def test_llama_tool_call_round_trip(llama_server: LlamaServerHandle) -> None:
    """The server accepts our tools, tool_choice and the replay of a tool_use with its
    tool_result (plus thinking from another provider, which is dropped) and answers. SmolLM2's
    template has no tool support, so the server cannot be forced to emit the call itself; the
    call side is covered by the fixture cases above."""
    inter = ModelInteraction(
        messages=[
            Messages.user("What is the weather in Paris?"),
            anthropic_msg(
                ThinkingContent("call the tool", signature="opaque", item_id="rs_1"),
                provider=ModelProviders.OpenAIResponses,
            ),
            anthropic_msg(ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Paris"})),
            ToolResultMessage(tool_call_id="toolu_1", name="get_weather", content=TextContent("Sunny, 21 C")),
        ],
        tools_shed=TOOLS,
        tool_choice=ToolChoice.Required(),
    )
    out = local(llama_server).generate(inter, GREEDY)
    assert out[-1].stop_reason in (StopReason.STOP, StopReason.LENGTH, StopReason.TOOL_USE), out[
        -1
    ].error_detail
    assert out[-1].text() or isinstance(out[-1].content, ToolCall)


def test_llama_context_overflow_error(llama_server: LlamaServerHandle) -> None:
    items = list(
        local(llama_server).stream(ModelInteraction(messages=[Messages.user("hello " * 3000)]), GREEDY)
    )
    check_contract(items)
    err = error_of(items)
    assert "exceeds the available context size" in (err.error_detail or "")
    assert err.is_context_overflow()


def test_llama_invalid_request_error(llama_server: LlamaServerHandle) -> None:
    """A request the server rejects (an image to a text-only model) is an error message with the
    server's text, not an exception."""
    inter = ModelInteraction(
        messages=[Messages.User(content=ImageContent(b64="iVBORw0KGgo=", mime_type=MimeType.Png))]
    )
    items = list(local(llama_server).stream(inter, GREEDY))
    check_contract(items)
    err = error_of(items)
    assert "HTTP 4" in (err.error_detail or "") or "HTTP 5" in (err.error_detail or "")
    assert not err.is_context_overflow()


def _shape(msgs: list[Any]) -> list[Any]:
    return [(m.content, m.stop_reason, m.usage, m.error_detail) for m in msgs]


@pytest.mark.parametrize(
    "fixture", ["c05_thinking_text_tool.sse", "c19_redacted_thinking.sse", "error_event.sse"]
)
async def test_generate_is_exactly_assemble_of_stream(fresh: FixtureServer, fixture: str) -> None:
    """``generate`` / ``agenerate`` collect without re-yielding chunks but give exactly
    ``assemble(stream)`` (ids and timestamps aside, which are fresh per call)."""
    fresh._queue.clear()
    fresh.queue(sse_canned(fixture))
    m = model(fresh)
    streamed = assemble(list(m.stream(ask())), "snapshot")
    assert _shape(m.generate(ask())) == _shape(streamed)
    assert _shape(await m.agenerate(ask())) == _shape(streamed)
    m.close()


async def test_closing_the_async_stream_early_is_clean(fresh: FixtureServer) -> None:
    fresh.queue(sse_canned("c05_thinking_text_tool.sse", delay=0.01))
    agen = model(fresh).astream(ask())
    async for item in agen:
        if isinstance(item, Stream.Next):
            break
    await agen.aclose()  # closes the HTTP response; no exception
    items = list(model(fresh).stream(ask()))  # the server and client are still usable
    assert isinstance(items[-1].value, ModelState.Finished)
