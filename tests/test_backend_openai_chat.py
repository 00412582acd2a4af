"""The OpenAI Chat Completions backend: wire cases replayed from a loopback fixture server
(bytes written from OpenAI's public API reference, in tests/fixtures/openai_chat/), request
mapping, failures, and a real llama.cpp server (xllamacpp) on 127.0.0.1."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from typing import Any

import httpx2
import msgspec
import pytest

from foundation_ai.backends import assemble, openai_chat
from foundation_ai.backends._http import SseEvent
from foundation_ai.backends._openai_chat_request import IMAGE_PLACEHOLDER, build_request
from foundation_ai.backends._openai_chat_stream import ChatStreamParser
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
)
from tests._backend_helpers import Canned, Fixtures, FixtureServer, outputs, reset, serve, tool
from tests._backend_helpers import check_ends as check_contract
from tests._llama_server import LlamaServerHandle, LlamaServerUnavailable, start_llama_server

FIX = Fixtures("openai_chat")
KEY = "sk-test-SECRET-0123456789"
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
        tool("get_time", tz="string"),
        tool("search", q="string"),
        tool("write_file", path="string", content="string"),
    ]
)


def ask(text: str = "hi", **kw: Any) -> ModelInteraction:
    return ModelInteraction(messages=[Messages.user(text)], tools_shed=TOOLS, **kw)


def run(srv: FixtureServer, canned: Canned, *, inter: ModelInteraction | None = None, **kw: Any) -> list[Any]:
    srv.queue(canned)
    m = openai_chat("gpt-4o-mini", base_url=srv.base_url, retry_base_delay=0.01, **kw)
    return list(m.stream(inter or ask()))


def calls(items: list[Any]) -> list[ToolCall]:
    return [m.content for m in outputs(items) if isinstance(m.content, ToolCall)]


# ------------------------------------------------------------------------------------------
# text, usage, metadata


def test_text_stream_snapshot_chunks(fresh: FixtureServer) -> None:
    items = run(fresh, sse_canned("text.sse"))
    check_contract(items)
    assert isinstance(items[-1].value, ModelState.Finished)
    nexts = [i.value for i in items if isinstance(i, Stream.Next)]
    assert [m.content.content for m in nexts] == ["Hello", "Hello there", "Hello there!", "Hello there!"]
    assert len({m.id for m in nexts}) == 1  # one output, one id
    final = nexts[-1]
    assert final.stop_reason == StopReason.STOP
    assert (final.usage.input, final.usage.cache_read, final.usage.output, final.usage.total_tokens) == (
        11,
        8,
        3,
        22,
    )
    assert final.provider == ModelProviders.OpenAI
    assert final.model == ModelId.Name("gpt-4o-mini")
    meta = final.metadata or []
    assert GenerationMetadata.SystemFingerprint(value="fp_44709d6fcb") in meta
    timing = [x for x in meta if isinstance(x, GenerationMetadata.Timing)]
    assert timing and timing[0].time_to_first_token is not None and timing[0].duration is not None


def test_generate_is_assembled_stream(fresh: FixtureServer) -> None:
    fresh.queue(sse_canned("text_then_tool.sse"))
    m = openai_chat("gpt-4o-mini", base_url=fresh.base_url)
    items = list(m.stream(ask()))
    fresh.queue(sse_canned("text_then_tool.sse"))
    gen = m.generate(ask())

    def strip(ms):
        return [
            (
                type(x.content),
                x.content if not isinstance(x.content, ToolCall) else (x.content.id, x.content.arguments),
                x.stop_reason,
            )
            for x in ms
        ]

    assert strip(gen) == strip(assemble(items, "snapshot"))
    assert [type(x.content) for x in gen] == [TextContent, ToolCall]
    assert gen[-1].stop_reason == StopReason.TOOL_USE and gen[-1].usage.output == 20


async def test_async_stream_and_agenerate(fresh: FixtureServer) -> None:
    fresh.queue(sse_canned("text.sse"))
    m = openai_chat("gpt-4o-mini", base_url=fresh.base_url)
    items = [i async for i in m.astream(ask())]
    check_contract(items)
    fresh.queue(sse_canned("text.sse"))
    gen = await m.agenerate(ask())
    assert [x.text() for x in gen] == ["Hello there!"] == [x.text() for x in outputs(items)]


def test_usage_chunk_without_choices(fresh: FixtureServer) -> None:
    """C45: the final chunk with ``choices: []`` and ``usage`` is read, before or after the finish chunk."""
    for name in ("c45_usage_no_choices.sse", "c45_usage_before_finish.sse"):
        fresh.requests.clear()
        items = run(fresh, sse_canned(name))
        final = outputs(items)[-1]
        assert (final.usage.input, final.usage.cache_read, final.usage.output) == (18, 32, 1), name
        assert any(
            isinstance(i, Stream.Pending) and isinstance(i.value, ModelState.GeneratingTokens) for i in items
        )
    body = fresh.requests[-1].json()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_cost_estimated_for_known_model_unknown_for_local() -> None:
    transport = httpx2.MockTransport(
        lambda req: httpx2.Response(
            200, content=b"".join(frames("text.sse")), headers={"content-type": "text/event-stream"}
        )
    )
    m = openai_chat("gpt-4o-mini", api_key=KEY, http_client=httpx2.Client(transport=transport))
    final = m.generate(ask())[-1]
    assert final.usage.cost.status == CostStatus.Estimated and final.usage.cost.total > 0
    assert m.descriptor.input_price == pytest.approx(0.15)
    local = openai_chat(
        "gpt-4o-mini", base_url="http://127.0.0.1:9", http_client=httpx2.Client(transport=transport)
    )
    assert local.generate(ask())[-1].usage.cost.status == CostStatus.Unknown


def test_refusal_is_metadata(fresh: FixtureServer) -> None:
    """C33: a streamed ``delta.refusal`` becomes RefusalReason metadata."""
    final = outputs(run(fresh, sse_canned("c33_refusal.sse")))[-1]
    assert GenerationMetadata.RefusalReason(reason="I'm sorry, I can't help with that.") in (
        final.metadata or []
    )


def test_content_filter_stop_and_refusal(fresh: FixtureServer) -> None:
    final = outputs(run(fresh, sse_canned("content_filter.sse")))[-1]
    assert final.stop_reason == StopReason.Message("content_filter")
    assert GenerationMetadata.RefusalReason(reason="content_filter") in (final.metadata or [])
    assert final.text() == "Here is"


# ------------------------------------------------------------------------------------------
# tool-call assembly


def test_two_calls_share_index_0(fresh: FixtureServer) -> None:
    """C07: two calls at index 0 with different ids; id-less fragments join the current call."""
    got = calls(run(fresh, sse_canned("c07_shared_index.sse")))
    assert [(c.id, c.name, c.arguments) for c in got] == [
        ("call_A", "get_weather", {"city": "Paris"}),
        ("call_B", "get_time", {"tz": "CET"}),
    ]


def test_three_calls_in_one_chunk(fresh: FixtureServer) -> None:
    """C09: three complete calls in one chunk, indices 0, 1, 2."""
    items = run(fresh, sse_canned("c09_three_in_one_chunk.sse"))
    got = calls(items)
    assert [(c.id, c.arguments) for c in got] == [
        ("call_1", {"q": "a"}),
        ("call_2", {"q": "b"}),
        ("call_3", {"q": "c"}),
    ]
    msgs = outputs(items)
    assert len({m.id for m in msgs}) == 3 and all(m.stop_reason == StopReason.TOOL_USE for m in msgs)
    # each call emitted exactly once
    assert sum(isinstance(i, Stream.Next) and isinstance(i.value.content, ToolCall) for i in items) == 3


def test_object_arguments_at_index_0_finish_stop(fresh: FixtureServer) -> None:
    """C11: every call at index 0, arguments as an object, finish_reason "stop": separate calls, ToolUse."""
    for name, ids in (
        ("c11_object_args_index0.sse", ["call_x1", "call_x2"]),
        ("c11_object_args_no_ids.sse", None),
    ):
        items = run(fresh, sse_canned(name))
        got = calls(items)
        assert [c.arguments for c in got] == [{"city": "Paris"}, {"city": "Rome"}], name
        assert outputs(items)[-1].stop_reason == StopReason.TOOL_USE
        if ids:
            assert [c.id for c in got] == ids
        else:
            assert len({c.id for c in got}) == 2 and all(c.id for c in got)


def test_concatenated_calls_split(fresh: FixtureServer) -> None:
    """C12: four id-less calls glued at index 0 are split at top-level object boundaries."""
    got = calls(run(fresh, sse_canned("c12_concatenated.sse")))
    assert [(c.name, c.arguments) for c in got] == [("search", {"q": q}) for q in "abcd"]
    assert len({c.id for c in got}) == 4


def test_concatenated_names_split() -> None:
    """C12: concatenated names of different tools are split by the known tool names."""
    p = ChatStreamParser(ModelId.Name("m"), None, ["search", "get_time"])
    for frag in (
        '{"index":0,"function":{"name":"search","arguments":"{\\"q\\":\\"a\\"}"}}',
        '{"index":0,"function":{"name":"get_time","arguments":"{\\"tz\\":\\"UTC\\"}"}}',
    ):
        p.feed(SseEvent("message", '{"choices":[{"index":0,"delta":{"tool_calls":[' + frag + "]}}]}"))
    p.feed(SseEvent("message", '{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}'))
    got = [i.value.content for i in p.finish() if isinstance(i, Stream.Next)]
    assert [(c.name, c.arguments) for c in got] == [("search", {"q": "a"}), ("get_time", {"tz": "UTC"})]


def test_interleaved_fragments(fresh: FixtureServer) -> None:
    """C14: fragments of two calls interleave by index; each call gets exactly its own."""
    got = calls(run(fresh, sse_canned("c14_interleaved.sse")))
    assert [(c.id, c.arguments) for c in got] == [("call_w", {"city": "Paris"}), ("call_t", {"tz": "UTC"})]


def _c17_stream(rng: random.Random) -> tuple[list[str], list[dict[str, Any]]]:
    expected = []
    pieces: list[list[str]] = []
    for i in range(8):
        size = rng.randint(10_000, 17_000)
        args = {"i": i, "blob": "".join(rng.choices('ab"\\{}[] ,:é\n', k=size))}
        expected.append(args)
        text = json.dumps(args)
        cuts = sorted(rng.sample(range(1, len(text)), rng.randint(5, 40)))
        pieces.append([text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)])
    events = []
    for i in range(8):
        events.append(
            json.dumps(
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {
                                        "index": i,
                                        "id": f"call_{i}",
                                        "type": "function",
                                        "function": {"name": "search", "arguments": ""},
                                    }
                                ]
                            },
                        }
                    ]
                }
            )
        )
    cursors = [0] * 8
    while any(cursors[i] < len(pieces[i]) for i in range(8)):
        i = rng.choice([k for k in range(8) if cursors[k] < len(pieces[k])])
        frag = pieces[i][cursors[i]]
        cursors[i] += 1
        events.append(
            json.dumps(
                {
                    "choices": [
                        {"index": 0, "delta": {"tool_calls": [{"index": i, "function": {"arguments": frag}}]}}
                    ]
                }
            )
        )
    events.append(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
    events.append("[DONE]")
    return events, expected


def test_eight_large_interleaved_calls_200_replays() -> None:
    """C17: 8 parallel calls, 10-17 KB arguments each, fragments interleaved at random, 200 replays."""
    rng = random.Random(17)
    for _ in range(200):
        events, expected = _c17_stream(rng)
        p = ChatStreamParser(ModelId.Name("m"), None, ["search"])
        for e in events:
            p.feed(SseEvent("message", e))
        got = [i.value.content for i in p.finish() if isinstance(i, Stream.Next)]
        assert [c.arguments for c in got] == expected
        assert [c.id for c in got] == [f"call_{i}" for i in range(8)]


def test_eight_large_interleaved_calls_over_http(fresh: FixtureServer) -> None:
    """C17 through the real HTTP path once (fixture server, chunked)."""
    events, expected = _c17_stream(random.Random(1717))
    got = calls(run(fresh, Canned(chunks=[f"data: {e}\n\n".encode() for e in events])))
    assert [c.arguments for c in got] == expected


def test_empty_id_gets_unique_id(fresh: FixtureServer) -> None:
    """C41: ``"id": ""`` on a tool call gets a generated unique id."""
    got = calls(run(fresh, sse_canned("c41_empty_id.sse")))
    assert len(got) == 1 and got[0].id.startswith("call_") and len(got[0].id) > 10
    assert got[0].arguments == {"city": "Oslo"}


def test_same_tool_twice_no_ids(fresh: FixtureServer) -> None:
    """C43: two calls to the same tool with no ids get two unique ids."""
    got = calls(run(fresh, sse_canned("c43_same_tool_no_ids.sse")))
    assert [c.arguments for c in got] == [{"city": "Oslo"}, {"city": "Bergen"}]
    assert len({c.id for c in got}) == 2


def test_truncated_arguments_length(fresh: FixtureServer) -> None:
    """C06: arguments cut mid-JSON with finish_reason length: stop Length, call with invalid arguments."""
    items = run(fresh, sse_canned("c06_truncated_args.sse"))
    msgs = outputs(items)
    call = msgs[-1].content
    assert isinstance(call, ToolCall)
    assert call.arguments is None and call.raw_arguments == '{"path":"a.txt","content":"Lorem ip'
    assert msgs[-1].stop_reason == StopReason.LENGTH


def test_preamble_then_tools(fresh: FixtureServer) -> None:
    """C47: whitespace text then a tool call: both outputs, stop reason ToolUse."""
    msgs = outputs(run(fresh, sse_canned("c47_preamble_then_tools.sse")))
    assert [type(m.content) for m in msgs] == [TextContent, ToolCall]
    assert msgs[-1].stop_reason == StopReason.TOOL_USE


def test_non_streamed_content_null_with_tool_calls(fresh: FixtureServer) -> None:
    """C35: a whole ``chat.completion`` with ``content: null`` and ``tool_calls`` parses."""
    items = run(fresh, json_canned("c35_content_null_tool_calls.json"), streaming=False)
    check_contract(items)
    got = calls(items)
    assert [(c.id, c.name, c.arguments) for c in got] == [
        ("call_abc123", "get_weather", {"city": "Boston"}),
        ("call_def456", "get_time", {"tz": "EST"}),
    ]
    final = outputs(items)[-1]
    assert final.stop_reason == StopReason.TOOL_USE
    assert (final.usage.input, final.usage.cache_read, final.usage.output) == (18, 64, 17)
    assert "stream" not in fresh.requests[-1].json()


# ------------------------------------------------------------------------------------------
# request mapping


def sent(
    srv: FixtureServer, inter: ModelInteraction, params: ModelParams | None = None, **kw: Any
) -> dict[str, Any]:
    srv.queue(sse_canned("text.sse"))
    m = openai_chat(kw.pop("model", "gpt-4o-mini"), base_url=kw.pop("base_url", srv.base_url), **kw)
    list(m.stream(inter, params))
    body: dict[str, Any] = srv.requests[-1].json()
    return body


def test_request_system_soul_and_roles(fresh: FixtureServer) -> None:
    inter = ModelInteraction(
        messages=[
            Messages.user("hi"),
            Messages.system("Stop and summarise."),
            Messages.agent("Peer says hello."),
        ],
        system_prompt="Be brief.",
        soul="You are Ada.",
    )
    msgs = sent(fresh, inter)["messages"]
    assert msgs == [
        {"role": "system", "content": "Be brief.\n\nYou are Ada."},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "Stop and summarise."},
        {"role": "user", "name": "agent", "content": "Peer says hello."},
    ]


def _assistant(content: Any, **kw: Any) -> AssistantMessage:
    return AssistantMessage(model=ModelId.Name("gpt-4o-mini"), content=content, **kw)


def test_request_one_assistant_message_per_turn(fresh: FixtureServer) -> None:
    """One wire assistant message for thinking (dropped, C21) + text + two calls; tool-only turn
    has ``content: null`` (C35); arguments re-sent as the JSON of the original object."""
    args = {"city": "Paris", "units": {"temp": "C"}, "days": [1, 2]}
    inter = ModelInteraction(
        messages=[
            Messages.user("weather?"),
            _assistant(
                ThinkingContent("hmm", signature="sig-from-anthropic"), provider=ModelProviders.Anthropic
            ),
            _assistant(TextContent("Checking.")),
            _assistant(ToolCall(id="call_1", name="get_weather", arguments=args)),
            _assistant(ToolCall(id="call_2", name="get_time", arguments={})),
            ToolResultMessage(tool_call_id="call_1", name="get_weather", content=TextContent("sunny")),
            ToolResultMessage(
                tool_call_id="call_2", name="get_time", content=TextContent(""), error_detail="timeout"
            ),
            _assistant(ToolCall(id="call_3", name="get_time", arguments={"tz": "CET"})),
            ToolResultMessage(tool_call_id="call_3", name="get_time", content=TextContent("12:00")),
        ],
        tools_shed=TOOLS,
    )
    msgs = sent(fresh, inter)["messages"]
    assert msgs[1] == {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps(args, separators=(",", ":"))},
            },
            {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
        ],
    }
    assert json.loads(msgs[1]["tool_calls"][0]["function"]["arguments"]) == args
    assert msgs[2] == {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}
    assert msgs[3] == {"role": "tool", "tool_call_id": "call_2", "content": "timeout"}
    assert msgs[4]["content"] is None and msgs[4]["tool_calls"][0]["id"] == "call_3"
    assert "hmm" not in json.dumps(msgs) and "sig-from-anthropic" not in json.dumps(msgs)


def test_request_images_and_a_tool_result_image(fresh: FixtureServer) -> None:
    """Images are data URLs; C38: a tool image becomes a placeholder plus a user image message
    after the run of tool messages."""
    img = ImageContent("iVBORw0KGgo=", MimeType.Png)
    inter = ModelInteraction(
        messages=[
            Messages.User(content=ImageContent("/9j/4AAQ", MimeType.Jpeg)),
            _assistant(ToolCall(id="c1", name="screenshot", arguments={})),
            _assistant(ToolCall(id="c2", name="get_time", arguments={})),
            ToolResultMessage(tool_call_id="c1", name="screenshot", content=img),
            ToolResultMessage(tool_call_id="c2", name="get_time", content=TextContent("noon")),
            Messages.user("what do you see?"),
        ]
    )
    msgs = sent(fresh, inter)["messages"]
    assert msgs[0] == {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}}],
    }
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "tool", "user", "user"]
    assert msgs[2] == {"role": "tool", "tool_call_id": "c1", "content": IMAGE_PLACEHOLDER}
    assert msgs[4] == {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}],
    }


def test_request_tools_multicommands_and_tool_choice(fresh: FixtureServer) -> None:
    memory = Tool.MultiCommands(
        "memory",
        [
            ToolDefinition(
                name="add",
                description="Add a fact",
                arguments=Args({"type": "object", "properties": {"fact": {"type": "string"}}}),
            ),
            ToolDefinition(
                name="remove",
                description="Remove a fact",
                arguments=Args({"type": "object", "properties": {"id": {"type": "integer"}}}),
            ),
        ],
    )
    decl = ToolDeclarations(tools=[memory, tool("get_time", tz="string")])
    cases = [
        (ToolChoice.Auto(), "auto"),
        (ToolChoice.None_(), "none"),
        (ToolChoice.Required(), "required"),
        (ToolChoice.Function("get_time"), {"type": "function", "function": {"name": "get_time"}}),
    ]
    for choice, wire in cases:
        body = sent(
            fresh,
            ModelInteraction(messages=[Messages.user("x")], tools_shed=decl, tool_choice=choice),
            forced_tool_mode="native",
        )
        assert body["tool_choice"] == wire
    fns = body["tools"]
    assert [f["type"] for f in fns] == ["function", "function"]
    assert fns[0]["function"]["name"] == "memory"
    assert fns[0]["function"]["parameters"]["properties"]["command"]["enum"] == ["add", "remove"]
    assert fns[1]["function"] == {
        "name": "get_time",
        "description": "get_time tool",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
    }
    assert "tool_choice" not in sent(
        fresh, ModelInteraction(messages=[Messages.user("x")], tool_choice=ToolChoice.Auto())
    )


def test_request_params_mapping(fresh: FixtureServer) -> None:
    params = ModelParams(
        max_tokens=100,
        temperature=0.2,
        top_p=0.5,
        top_k=7,
        seed=3,
        stop_tokens=["a", "b", "c", "d", "e"],
        frequency_penalty=0.1,
        presence_penalty=0.3,
        logit_bias={"50256": -100.0},
        output_format=OutputFormat.JsonSchema("city", {"type": "object"}, strict=True),
    )
    body = sent(fresh, ask(), params)
    assert body["max_tokens"] == 100 and "max_completion_tokens" not in body
    assert (body["temperature"], body["top_p"], body["seed"]) == (0.2, 0.5, 3)
    assert body["stop"] == ["a", "b", "c", "d"]
    assert (body["frequency_penalty"], body["presence_penalty"], body["logit_bias"]) == (
        0.1,
        0.3,
        {"50256": -100.0},
    )
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "city", "schema": {"type": "object"}, "strict": True},
    }
    assert "top_k" not in body and "repeat_penalty" not in body
    assert body["model"] == "gpt-4o-mini"
    body = sent(fresh, ask(), ModelParams(output_format=OutputFormat.JsonObject()))
    assert body["response_format"] == {"type": "json_object"}
    assert "response_format" not in sent(fresh, ask())


def test_request_official_host_fields() -> None:
    body = build_request(
        ask(),
        ModelParams(thinking_level=ThinkingLevel.High, cache_retention=CacheRetention.Long, max_tokens=50),
        "o4-mini",
        official=True,
    )
    assert body["max_completion_tokens"] == 50 and body["reasoning_effort"] == "high"
    assert "temperature" not in body and "top_p" not in body
    assert body["prompt_cache_retention"] == "24h"


def test_reasoning_models_are_never_sent_temperature_or_top_p() -> None:
    """OpenAI's reasoning models (o1, o3, o4, gpt-5, codex) answer 400 "Unsupported parameter:
    'temperature'" (https://platform.openai.com/docs/guides/reasoning): without a reasoning
    effort too, set sampling is not sent to them; other models get what was set."""
    given = ModelParams(temperature=0.7, top_p=0.9, max_tokens=2048)
    for name in ("o3-mini", "o1", "o4-mini", "gpt-5-mini", "codex-mini-latest", "openai/o3-mini"):
        body = build_request(ask(), given, name, official=True)
        assert "temperature" not in body and "top_p" not in body, name
        assert body["max_completion_tokens"] == 2048
    for name in ("gpt-4o-mini", "gpt-4.1", "llama-3.1-8b"):
        body = build_request(ask(), given, name, official=name.startswith("gpt"))
        assert (body["temperature"], body["top_p"]) == (0.7, 0.9), name


def test_extra_body_and_headers(fresh: FixtureServer) -> None:
    body = sent(fresh, ask(), extra_body={"top_k": 20}, headers={"HTTP-Referer": "https://example.org"})
    assert body["top_k"] == 20
    assert fresh.requests[-1].headers["http-referer"] == "https://example.org"
    assert "authorization" not in fresh.requests[-1].headers  # no key for a non-OpenAI host


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_base_url_with_or_without_v1(fresh: FixtureServer, suffix: str) -> None:
    sent(fresh, ask(), base_url=fresh.base_url + suffix)
    assert fresh.requests[-1].path == "/v1/chat/completions"


def test_key_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        openai_chat("gpt-4o-mini")
    openai_chat("llama3", base_url="http://127.0.0.1:11434")  # local: no key needed
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    seen: list[httpx2.Request] = []

    def handler(req: httpx2.Request) -> httpx2.Response:
        seen.append(req)
        return httpx2.Response(
            200, content=b"".join(frames("text.sse")), headers={"content-type": "text/event-stream"}
        )

    m = openai_chat("gpt-4o-mini", http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    m.generate(ask())
    assert seen[0].headers["authorization"] == f"Bearer {KEY}"
    assert str(seen[0].url) == "https://api.openai.com/v1/chat/completions"
    assert KEY not in repr(m)
    # the OpenAI key is not sent to another host
    other = openai_chat(
        "x",
        base_url="https://openrouter.ai/api/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    other.generate(ask())
    assert "authorization" not in seen[1].headers
    assert str(seen[1].url) == "https://openrouter.ai/api/v1/chat/completions"


async def test_async_client_only_and_sync_client_only() -> None:
    body = b"".join(frames("text.sse"))
    h = {"content-type": "text/event-stream"}
    a = openai_chat(
        "m",
        base_url="http://127.0.0.1:9",
        http_client=httpx2.AsyncClient(
            transport=httpx2.MockTransport(lambda r: httpx2.Response(200, content=body, headers=h))
        ),
    )
    assert [x.text() for x in await a.agenerate(ask())] == ["Hello there!"]
    assert [x.text() for x in a.generate(ask())] == ["Hello there!"]  # sync over the async client
    s = openai_chat(
        "m",
        base_url="http://127.0.0.1:9",
        http_client=httpx2.Client(
            transport=httpx2.MockTransport(lambda r: httpx2.Response(200, content=body, headers=h))
        ),
    )
    assert [x.text() for x in await s.agenerate(ask())] == ["Hello there!"]


# ------------------------------------------------------------------------------------------
# failures


def error_of(items: list[Any]) -> AssistantMessage:
    check_contract(items)
    assert isinstance(items[-1].value, ModelState.Error)
    last = [i.value for i in items if isinstance(i, Stream.Next)][-1]
    assert last.stop_reason == StopReason.ERROR and last.content == TextContent("")
    assert items[-1].value.message == last.error_detail
    return last


def test_context_overflow_error_message(fresh: FixtureServer) -> None:
    err = error_of(run(fresh, json_canned("error_context_length.json", status=400)))
    assert "maximum context length is 128000 tokens" in (err.error_detail or "")
    assert "context_length_exceeded" in (err.error_detail or "")
    assert err.is_context_overflow()
    assert len(fresh.requests) == 1


def test_retry_429_then_success(fresh: FixtureServer) -> None:
    fresh.queue(
        json_canned("error_rate_limit.json", status=429, headers={"Retry-After": "0"}),
        Canned(status=503, body=b""),
    )
    items = run(fresh, sse_canned("text.sse"))
    assert outputs(items)[-1].text() == "Hello there!"
    assert len(fresh.requests) == 3


def test_rate_limit_exhausted_is_not_overflow(fresh: FixtureServer) -> None:
    err = error_of(
        run(
            fresh,
            json_canned("error_rate_limit.json", status=429, headers={"Retry-After": "0"}),
            max_retries=1,
        )
    )
    assert "rate_limit_exceeded" in (err.error_detail or "") and not err.is_context_overflow()
    assert len(fresh.requests) == 2


def test_auth_error_not_retried_key_redacted(fresh: FixtureServer) -> None:
    items = run(fresh, json_canned("error_invalid_key.json", status=401), api_key=KEY)
    err = error_of(items)
    assert len(fresh.requests) == 1
    assert fresh.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert "invalid_api_key" in (err.error_detail or "")
    assert KEY not in msgspec.json.encode(items).decode()


def test_dropped_connection_keeps_partial_output_no_retry(fresh: FixtureServer) -> None:
    items = run(fresh, sse_canned("text.sse", drop_after=3))
    texts = [m.text() for m in outputs(items)]
    assert texts[0] == "Hello there"  # partial output kept, an error message after it
    err = error_of(items)
    assert "dropped mid-stream" in (err.error_detail or "")
    assert len(fresh.requests) == 1


def test_stream_ending_early_is_an_error(fresh: FixtureServer) -> None:
    err = error_of(run(fresh, Canned(chunks=frames("text.sse")[:3])))
    assert "ended before completion" in (err.error_detail or "")


def test_malformed_event_is_error_message(fresh: FixtureServer) -> None:
    items = run(fresh, sse_canned("malformed.sse"))
    assert outputs(items)[0].text() == "Par"
    assert "malformed stream event" in (error_of(items).error_detail or "")


def test_error_object_mid_stream(fresh: FixtureServer) -> None:
    items = run(fresh, sse_canned("midstream_error.sse"))
    assert outputs(items)[0].text() == "Partial"
    assert "Upstream provider overloaded" in (error_of(items).error_detail or "")


async def test_async_failure_is_error_message(fresh: FixtureServer) -> None:
    fresh.queue(json_canned("error_context_length.json", status=400))
    m = openai_chat("gpt-4o-mini", base_url=fresh.base_url)
    items = [i async for i in m.astream(ask())]
    assert error_of(items).is_context_overflow()


# ------------------------------------------------------------------------------------------
# a real llama.cpp server (xllamacpp, SmolLM2-135M) on 127.0.0.1


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServerHandle]:
    try:
        handle = start_llama_server(n_ctx=1024)
    except LlamaServerUnavailable as exc:
        pytest.skip(str(exc))
    with handle:
        yield handle


GREEDY = ModelParams(max_tokens=12, temperature=0.0, seed=42)


def test_llama_streamed_text_usage_length(llama: LlamaServerHandle) -> None:
    m = openai_chat("smollm2", base_url=llama.base_url, timeout=120)
    items = list(
        m.stream(
            ModelInteraction(messages=[Messages.user("Say hello in five words.")], system_prompt="Be brief."),
            GREEDY,
        )
    )
    check_contract(items)
    assert isinstance(items[-1].value, ModelState.Finished)
    nexts = [i.value for i in items if isinstance(i, Stream.Next)]
    assert len(nexts) > 3 and len({n.id for n in nexts}) == 1
    texts = [n.text() or "" for n in nexts]
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))  # snapshots grow
    final = nexts[-1]
    assert final.stop_reason == StopReason.LENGTH and final.usage.output == 12
    assert final.usage.input + final.usage.cache_read > 10
    assert final.usage.cost.status == CostStatus.Unknown


async def test_llama_async_matches_sync_and_non_streamed(llama: LlamaServerHandle) -> None:
    inter = ModelInteraction(messages=[Messages.user("Name a colour.")])
    m = openai_chat("smollm2", base_url=llama.base_url + "/v1", timeout=120)
    a = await m.agenerate(inter, GREEDY)
    s = m.generate(inter, GREEDY)
    whole = openai_chat("smollm2", base_url=llama.base_url, timeout=120, streaming=False).generate(
        inter, GREEDY
    )
    assert a[-1].text() == s[-1].text() == whole[-1].text() and (s[-1].text() or "").strip()
    assert whole[-1].usage.output == s[-1].usage.output


def test_llama_stop_sequence_gives_stop(llama: LlamaServerHandle) -> None:
    m = openai_chat("smollm2", base_url=llama.base_url, timeout=120)
    out = m.generate(
        ModelInteraction(messages=[Messages.user("Say hello in five words.")]),
        GREEDY.with_(max_tokens=40, stop_tokens=[","]),
    )
    assert out[-1].stop_reason == StopReason.STOP and "," not in (out[-1].text() or "")


def test_llama_tool_call_round_trip(llama: LlamaServerHandle) -> None:
    """The server accepts our replay of an assistant tool call, its result, and agent/system-role
    user messages, and answers."""
    inter = ModelInteraction(
        messages=[
            Messages.user("What is the weather in Paris?"),
            _assistant(ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})),
            ToolResultMessage(tool_call_id="call_1", name="get_weather", content=TextContent("Sunny, 21 C")),
            Messages.agent("The planner agent asks for one short sentence."),
            Messages.system("Answer in English."),
        ],
        tools_shed=TOOLS,
        tool_choice=ToolChoice.Auto(),
    )
    out = openai_chat("smollm2", base_url=llama.base_url, timeout=120).generate(inter, GREEDY)
    assert out[-1].stop_reason in (StopReason.STOP, StopReason.LENGTH), out[-1].error_detail
    assert (out[-1].text() or "").strip()


def test_llama_context_overflow(llama: LlamaServerHandle) -> None:
    m = openai_chat("smollm2", base_url=llama.base_url, timeout=120)
    out = m.generate(ModelInteraction(messages=[Messages.user("hello " * 1500)]), GREEDY)
    assert out[-1].stop_reason == StopReason.ERROR
    assert "exceeds the available context size" in (out[-1].error_detail or "")
    assert out[-1].is_context_overflow()


def test_request_thinking_only_turn_is_omitted(fresh: FixtureServer) -> None:
    """C21: a turn holding only thinking (from another provider) sends nothing."""
    inter = ModelInteraction(
        messages=[
            Messages.user("a"),
            _assistant(ThinkingContent("secret", signature="sig"), provider=ModelProviders.Anthropic),
            Messages.user("b"),
        ]
    )
    assert sent(fresh, inter)["messages"] == [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
    ]


def test_error_records_are_not_replayed(fresh: FixtureServer) -> None:
    inter = ModelInteraction(
        messages=[
            Messages.user("a"),
            _assistant(TextContent(""), stop_reason=StopReason.ERROR, error_detail="boom"),
            Messages.user("b"),
        ]
    )
    assert [m["role"] for m in sent(fresh, inter)["messages"]] == ["user", "user"]


async def test_closing_the_stream_early_cancels_cleanly(fresh: FixtureServer) -> None:
    """Abandoning the iterator after the first text chunk ends the request; the backend stays usable."""
    m = openai_chat("gpt-4o-mini", base_url=fresh.base_url)
    fresh.queue(sse_canned("text.sse", delay=0.01), sse_canned("text.sse"))
    agen = m.astream(ask())
    async for item in agen:
        if isinstance(item, Stream.Next):
            break
    await agen.aclose()  # type: ignore[attr-defined]
    sync_it = m.stream(ask())
    first = [next(sync_it) for _ in range(2)]
    sync_it.close()  # type: ignore[attr-defined]
    assert isinstance(first[1], Stream.Next)
    fresh.queue(sse_canned("text.sse"))
    assert [x.text() for x in m.generate(ask())] == ["Hello there!"]
    m.close()


def _feed_all(p: ChatStreamParser, chunks: list[dict[str, Any]]) -> list[Any]:
    items: list[Any] = []
    for c in chunks:
        items += p.feed(SseEvent("message", json.dumps(c))) or []
    return items + p.finish()


def test_string_and_int_index_are_one_call() -> None:
    """wire-notes 2: ``index`` may be an int or a numeric string; both name the same call."""
    p = ChatStreamParser(ModelId.Name("m"), None, ["get_weather"])
    d = lambda tc: {"choices": [{"index": 0, "delta": {"tool_calls": [tc]}}]}  # noqa: E731
    items = _feed_all(
        p,
        [
            d({"index": "0", "id": "call_s", "function": {"name": "get_weather", "arguments": '{"city":'}}),
            d({"index": 0, "function": {"arguments": '"Oslo"}'}}),
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ],
    )
    got = [i.value.content for i in items if isinstance(i, Stream.Next)]
    assert [(c.id, c.arguments) for c in got] == [("call_s", {"city": "Oslo"})]


def test_reasoning_content_streams_as_thinking() -> None:
    """``delta.reasoning_content`` (llama.cpp, vLLM, DeepSeek) is a ThinkingContent output of its own."""
    p = ChatStreamParser(ModelId.Name("m"), None, [])
    d = lambda **kw: {"choices": [{"index": 0, "delta": kw}]}  # noqa: E731
    items = _feed_all(
        p,
        [
            d(reasoning_content="Let me "),
            d(reasoning_content="think."),
            d(content="Four."),
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ],
    )
    msgs = assemble(items, "snapshot")
    assert [type(m.content) for m in msgs] == [ThinkingContent, TextContent]
    assert msgs[0].content.thinking == "Let me think." and msgs[1].text() == "Four."
    assert msgs[0].id != msgs[1].id


# ------------------------------------------------------------------------------------------
# forced tool calls through a JSON Schema (forced_tool_mode)


def _text_sse(text: str, finish: str = "stop") -> Canned:
    pieces = [text[i : i + 5] for i in range(0, len(text), 5)]
    frames_ = [json.dumps({"choices": [{"index": 0, "delta": {"content": p}}]}) for p in pieces]
    frames_.append(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    return Canned(chunks=[f"data: {f}\n\n".encode() for f in [*frames_, "[DONE]"]])


def test_forced_call_json_schema_request_and_parse(fresh: FixtureServer) -> None:
    inter = ask("weather in Oslo?", tool_choice=ToolChoice.Function("get_weather"))
    fresh.queue(_text_sse('{"name": "get_weather", "arguments": {"city": "Oslo"}}'))
    items = list(openai_chat("m", base_url=fresh.base_url, forced_tool_mode="json_schema").stream(inter))
    body = fresh.requests[-1].json()
    assert "tools" not in body and "tool_choice" not in body
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["name"] == {"type": "string", "enum": ["get_weather"]}
    assert schema["properties"]["arguments"] == {"type": "object", "properties": {"city": {"type": "string"}}}
    assert body["messages"][0]["role"] == "system" and "get_weather" in body["messages"][0]["content"]
    # no text chunks: the JSON answer is one tool call
    assert not any(isinstance(i, Stream.Next) and isinstance(i.value.content, TextContent) for i in items)
    msgs = outputs(items)
    assert len(msgs) == 1 and isinstance(msgs[0].content, ToolCall)
    assert (msgs[0].content.name, msgs[0].content.arguments) == ("get_weather", {"city": "Oslo"})
    assert msgs[0].content.id.startswith("call_") and msgs[0].stop_reason == StopReason.TOOL_USE


def test_forced_call_required_any_tool_and_truncated(fresh: FixtureServer) -> None:
    inter = ask("x", tool_choice=ToolChoice.Required())
    fresh.queue(_text_sse('{"name": "get_time", "arguments": {"tz": "U', finish="length"))
    msgs = outputs(list(openai_chat("m", base_url=fresh.base_url).stream(inter)))  # auto: loopback
    schema = fresh.requests[-1].json()["response_format"]["json_schema"]["schema"]
    assert len(schema["anyOf"]) == len(TOOLS.tools)
    call = msgs[-1].content
    assert isinstance(call, ToolCall) and call.arguments is None and call.raw_arguments
    assert msgs[-1].stop_reason == StopReason.LENGTH


def test_native_mode_and_auto_choice_keep_tools(fresh: FixtureServer) -> None:
    body = sent(fresh, ask(tool_choice=ToolChoice.Function("get_time")), forced_tool_mode="native")
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_time"}}
    body = sent(fresh, ask(tool_choice=ToolChoice.Auto()))
    assert body["tool_choice"] == "auto" and "response_format" not in body


def test_llama_forced_tool_call_round_trip(llama: LlamaServerHandle) -> None:
    """A real forced call on llama-server (its SmolLM2 template has no tool support, so the call
    is grammar-enforced via the JSON Schema), then the answer with the result in context."""
    add = Tool.SingleCommand(
        ToolDefinition(
            name="add",
            description="Add two integers.",
            arguments=Args(
                {
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"],
                    "additionalProperties": False,
                }
            ),
        )
    )
    m = openai_chat("smollm2", base_url=llama.base_url, timeout=120)
    history: list[Any] = [Messages.user("What is 2 + 40?")]
    inter = ModelInteraction(
        messages=history, tools_shed=ToolDeclarations(tools=[add]), tool_choice=ToolChoice.Function("add")
    )
    first = m.generate(inter, GREEDY.with_(max_tokens=40))
    call = first[-1].content
    assert isinstance(call, ToolCall) and call.name == "add", first
    assert isinstance(call.arguments, dict) and set(call.arguments) == {"a", "b"}
    assert first[-1].stop_reason == StopReason.TOOL_USE
    result = ToolResultMessage(
        tool_call_id=call.id, name="add", content=TextContent(str(call.arguments["a"] + call.arguments["b"]))
    )
    inter2 = ModelInteraction(messages=[*history, *first, result], tools_shed=ToolDeclarations(tools=[add]))
    answer = m.generate(inter2, GREEDY)
    assert answer[-1].stop_reason in (StopReason.STOP, StopReason.LENGTH), answer[-1].error_detail
    assert isinstance(answer[-1].content, TextContent) and answer[-1].content.content.strip()
