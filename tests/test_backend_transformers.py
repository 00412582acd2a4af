"""The transformers in-process backend (``hf:DIR``), on the REAL bundled SmolLM2-135M-Instruct
converted once per session to fp32 safetensors (tests/_hf_model.py), and on a tiny random-weight
model for the fast contract checks. Short outputs, fixed seeds, greedy unless said otherwise.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from foundation_ai import AgentSession
from foundation_ai import model as model_from_string
from foundation_ai.backends import Model
from foundation_ai.backends._transformers import TransformersModel, transformers_model
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
    ToolResultMessage,
)

from ._hf_model import convert_bundled, tiny_random
from .test_agentic_e2e import CALLS, GREEDY, add, check_turn

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


@pytest.fixture(scope="session")
def smol_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled GGUF as a safetensors directory, made once per test session in pytest's tmp dir."""
    return convert_bundled(tmp_path_factory.mktemp("hf-smollm2"))


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory, smol_dir: Path) -> Path:
    return tiny_random(tmp_path_factory.mktemp("hf-tiny"), smol_dir)


@pytest.fixture(scope="module")
def smol(smol_dir: Path) -> TransformersModel:
    return transformers_model(smol_dir, threads=2)


@pytest.fixture(scope="module")
def tiny(tiny_dir: Path) -> TransformersModel:
    return transformers_model(tiny_dir)


def _ask(text: str, **kw: Any) -> ModelInteraction:
    return ModelInteraction(
        system_prompt="You are a helpful assistant.", messages=[Messages.user(text)], **kw
    )


def _params(max_tokens: int = 24, **kw: Any) -> ModelParams:
    return ModelParams(max_tokens=max_tokens, seed=SEED, temperature=0.0, **kw)


def _error_of(items: list[Any]) -> AssistantMessage:
    chunks = [i.value for i in items if isinstance(i, Stream.Next)]
    assert len(chunks) == 1 and isinstance(chunks[0], AssistantMessage)
    assert chunks[0].stop_reason == StopReason.Error()
    assert isinstance(items[-1], Stream.Pending) and isinstance(items[-1].value, ModelState.Error)
    return chunks[0]


def _wait_idle(m: TransformersModel, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while m.active_generations and time.monotonic() < deadline:
        time.sleep(0.01)
    assert m.active_generations == 0


# -- streaming ------------------------------------------------------------------------------------


def test_streamed_text_is_deltas_with_cumulative_usage_and_timing(smol: TransformersModel) -> None:
    assert isinstance(smol, Model) and smol.chunk_mode == "delta"
    assert smol.descriptor.provider == "transformers" and smol.descriptor.context_window == 8192
    items = list(smol.stream(_ask("What is the capital of France?"), _params(max_tokens=16)))
    assert items[0] == Stream.Init() and items[-1] == Stream.Pending(ModelState.Finished())
    chunks = [i.value for i in items if isinstance(i, Stream.Next)]
    assert len(chunks) >= 3 and len({c.id for c in chunks}) == 1
    outputs = [c.usage.output for c in chunks]
    assert outputs == sorted(outputs) and outputs[-1] <= 16
    assert all(
        c.usage.input == len(smol.prompt_tokens(_ask("What is the capital of France?"))) for c in chunks
    )
    text = "".join(c.content.content for c in chunks if isinstance(c.content, TextContent))
    assert "Paris" in text
    (timing,) = chunks[-1].metadata
    assert isinstance(timing, GenerationMetadata.Timing) and timing.time_to_first_token is not None
    assert chunks[-1].stop_reason in (StopReason.Stop(), StopReason.Length())
    # the same text as transformers' own generate on the same prompt (greedy)
    import torch

    ids = torch.tensor([smol.prompt_tokens(_ask("What is the capital of France?"))])
    raw = smol.hf_model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=16, do_sample=False)
    assert text == smol.tokenizer.decode(raw[0, ids.shape[1] :], skip_special_tokens=True)


async def test_astream_equals_stream(tiny: TransformersModel) -> None:
    inter, params = _ask("hello"), _params(max_tokens=8)
    sync = tiny.generate(inter, params)
    items = [i async for i in tiny.astream(inter, params)]
    from foundation_ai.backends import assemble

    got = assemble(items, "delta")
    assert [(m.text(), m.usage.output, m.stop_reason) for m in got] == [
        (m.text(), m.usage.output, m.stop_reason) for m in sync
    ]


def test_max_tokens_gives_length_and_stop_tokens_cut_the_text(tiny: TransformersModel) -> None:
    (msg,) = tiny.generate(_ask("x"), _params(max_tokens=5))
    assert msg.stop_reason == StopReason.Length() and msg.usage.output == 5
    full = msg.text() or ""
    cut = full[len(full) // 2 :][:2]
    if cut.strip():
        (short,) = tiny.generate(_ask("x"), _params(max_tokens=5, stop_tokens=[cut]))
        assert cut not in (short.text() or "") and short.stop_reason == StopReason.Stop()


def test_only_the_params_the_caller_set_reach_the_generation_config(tiny: TransformersModel) -> None:
    from foundation_ai.backends._transformers_gen import generation_config

    base = tiny.hf_model.generation_config
    config, ignored = generation_config(base, ModelParams(max_tokens=7), 100)
    assert config.max_new_tokens == 7 and config.do_sample == base.do_sample  # model default kept
    config, ignored = generation_config(base, ModelParams(temperature=0.3, top_k=5, presence_penalty=1.0), 50)
    assert config.do_sample and config.temperature == 0.3 and config.top_k == 5
    assert config.max_new_tokens == 50 and ignored == ["presence_penalty"]
    config, _ = generation_config(base, ModelParams(logit_bias={"42": 5.0}, repeat_penalty=1.3), 50)
    assert config.sequence_bias == {(42,): 5.0} and config.repetition_penalty == 1.3


def test_logit_bias_reaches_the_sampler(tiny: TransformersModel) -> None:
    token = tiny.tokenizer("Hello", add_special_tokens=False)["input_ids"][0]
    (msg,) = tiny.generate(_ask("x"), _params(max_tokens=3, logit_bias={str(token): 100.0}))
    assert msg.text() == tiny.tokenizer.decode([token] * 3)


def test_chat_template_override_renders_the_prompt(tiny: TransformersModel) -> None:
    inter = _ask("hi", chat_template="{% for m in messages %}<<{{ m.role }}>>{{ m.content }}{% endfor %}")
    assert tiny.render(inter) == "<<system>>You are a helpful assistant.<<user>>hi"
    assert tiny.render(_ask("hi")).startswith("<|im_start|>system\nYou are a helpful assistant.")


def test_broken_chat_template_is_an_error_message(tiny: TransformersModel) -> None:
    inter = ModelInteraction(
        messages=[Messages.user("x")], chat_template="{{ raise_exception('no system role') }}"
    )
    assert "no system role" in (_error_of(list(tiny.stream(inter, _params()))).error_detail or "")


# A Hermes/Qwen-style template that renders `tools` itself: definitions in <tools></tools>, calls
# replayed as <tool_call>{...}</tool_call>, results in a `tool` turn.
TOOLS_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags.<|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for m in messages if m.role != 'system' %}{{- '<|im_start|>' + m.role + '\\n' }}"
    "{%- if m.tool_calls %}{%- for c in m.tool_calls %}"
    "{{- '<tool_call>\\n' }}{{- c.function | tojson }}{{- '\\n</tool_call>' }}{%- endfor %}"
    "{%- else %}{{- m.content }}{%- endif %}{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def _steered_to(m: TransformersModel, inter: ModelInteraction, answer: str) -> None:
    """Make ``m``'s own generation config write ``answer`` then end, greedily: one
    ``sequence_bias`` entry per answer token, keyed by the shortest run of tokens before it that
    tells the answer's positions apart."""
    prompt = m.prompt_tokens(inter)
    full = prompt + m.tokenizer(answer, add_special_tokens=False)["input_ids"] + [m.tokenizer.eos_token_id]
    for context in range(2, len(prompt)):
        keys = [tuple(full[i - context : i + 1]) for i in range(len(prompt), len(full))]
        if len({k[:-1] for k in keys}) == len(keys):
            break
    m.hf_model.generation_config.sequence_bias = [[list(k), 100.0] for k in keys]


def test_a_template_that_renders_tools_gets_them_and_its_tool_call_output_is_parsed(
    tiny_dir: Path, tmp_path: Path
) -> None:
    model_dir = tmp_path / "tiny-tools"
    shutil.copytree(tiny_dir, model_dir)
    (model_dir / "chat_template.jinja").write_text(TOOLS_TEMPLATE)
    config = json.loads((model_dir / "config.json").read_text())
    config["max_position_embeddings"] = 1024  # the tool definitions alone fill tiny's 256
    (model_dir / "config.json").write_text(json.dumps(config))
    m = transformers_model(model_dir)
    inter = _ask("What's the weather in Paris?", tools_shed=TOOLS)
    prompt = m.render(inter)
    assert "<tools>" in prompt and "You are a helpful assistant." in prompt
    rendered = [json.loads(line) for line in prompt.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()]
    assert [t["function"]["name"] for t in rendered] == ["get_weather", "add"]
    assert rendered[0]["function"]["parameters"]["properties"]["city"]["type"] == "string"
    assert "get_weather" not in prompt.split("<tools>")[0]  # no text-protocol instructions besides

    _steered_to(
        m, inter, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    )
    items = list(m.stream(inter, ModelParams(max_tokens=64)))
    (msg,) = [i.value for i in items if isinstance(i, Stream.Next)]
    assert isinstance(msg, AssistantMessage) and isinstance(msg.content, ToolCall)
    assert (msg.content.name, msg.content.arguments) == ("get_weather", {"city": "Paris"})
    assert msg.stop_reason == StopReason.ToolUse()

    # The next turn replays the call and its result in the template's own shape.
    result = ToolResultMessage(
        tool_call_id=msg.content.id, name="get_weather", content=TextContent("18 C, sunny")
    )
    follow = _ask("What's the weather in Paris?", tools_shed=TOOLS)
    follow.messages.extend([msg, result])
    again = m.render(follow)
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in again
    assert again.endswith("<|im_start|>tool\n18 C, sunny<|im_end|>\n<|im_start|>assistant\n")


# -- structured output and tools -------------------------------------------------------------------


def test_json_schema_output_is_enforced(smol: TransformersModel) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    (msg,) = smol.generate(
        _ask("Invent a person."),
        _params(max_tokens=48, output_format=OutputFormat.JsonSchema("person", schema)),
    )
    assert violations_of(compile_schema(schema), json.loads(msg.text() or "")) == []


@pytest.mark.parametrize("seed", [1, 2])
def test_forced_function_call_validates_against_the_schema(smol: TransformersModel, seed: int) -> None:
    inter = _ask(
        "What's the weather in Paris?", tools_shed=TOOLS, tool_choice=ToolChoice.Function("get_weather")
    )
    items = list(smol.stream(inter, ModelParams(max_tokens=64, seed=seed)))
    (msg,) = [i.value for i in items if isinstance(i, Stream.Next)]
    assert isinstance(msg, AssistantMessage) and isinstance(msg.content, ToolCall)
    assert msg.content.name == "get_weather" and WEATHER.arguments.violations(msg.content.arguments) == []
    assert msg.stop_reason == StopReason.ToolUse() and msg.content.id.startswith("call_")


def test_required_tool_choice_calls_one_of_the_tools(smol: TransformersModel) -> None:
    (msg,) = smol.generate(
        _ask("Add 2 and 40.", tools_shed=TOOLS, tool_choice=ToolChoice.Required()), _params(64)
    )
    assert isinstance(msg, AssistantMessage) and isinstance(msg.content, ToolCall)
    tool = TOOLS.find(msg.content.name)
    assert tool is not None
    definition, args = tool.resolve(msg.content.arguments)
    assert definition.arguments.violations(args) == []


def test_unknown_forced_function_is_an_error_message(tiny: TransformersModel) -> None:
    items = list(tiny.stream(_ask("x", tools_shed=TOOLS, tool_choice=ToolChoice.Function("nope")), _params()))
    assert "nope" in (_error_of(items).error_detail or "")


# -- overflow, cancel ----------------------------------------------------------------------------------


def test_prompt_longer_than_context_is_an_overflow_message_before_generating(tiny: TransformersModel) -> None:
    before = tiny.tokens_generated
    msg = _error_of(list(tiny.stream(_ask("word " * 400), _params())))
    assert msg.is_context_overflow() and msg.usage.input > 256
    assert tiny.tokens_generated == before  # nothing was generated
    assert tiny.generate(_ask("hi"), _params(max_tokens=2))[0].usage.output == 2


def test_closed_stream_stops_generating_within_one_token(tiny: TransformersModel) -> None:
    before = tiny.tokens_generated
    it = tiny.stream(_ask("go"), ModelParams(max_tokens=200, seed=SEED))
    seen = 0
    for item in it:
        if isinstance(item, Stream.Next):
            seen += 1
            if seen == 3:
                break
    it.close()  # type: ignore[attr-defined]
    _wait_idle(tiny)
    stopped_at = tiny.tokens_generated
    assert stopped_at - before < 100  # stopped, not run to 200
    assert tiny.tokens_generated == stopped_at and tiny.active_generations == 0


def test_abandoned_stream_stops_generating(tiny: TransformersModel) -> None:
    it = tiny.stream(_ask("go"), ModelParams(max_tokens=200, seed=SEED))
    for item in it:
        if isinstance(item, Stream.Next):
            break
    del it, item
    gc.collect()
    _wait_idle(tiny)


async def test_async_task_cancel_stops_generating(tiny: TransformersModel) -> None:
    before = tiny.tokens_generated
    started = asyncio.Event()

    async def consume() -> None:
        async for item in tiny.astream(_ask("go"), ModelParams(max_tokens=200, seed=SEED)):
            if isinstance(item, Stream.Next):
                started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(_wait_idle, tiny)
    assert tiny.tokens_generated - before < 200


# -- embeddings, model strings, agent, CLI ----------------------------------------------------------------


def test_embeddings_from_the_hidden_states(tiny_dir: Path) -> None:
    emb = transformers_model(tiny_dir, embedding=True)
    a, b = emb.embed(["the cat", "the cat"])
    assert len(a) == 32 and a == b and abs(sum(v * v for v in a) - 1.0) < 1e-4
    items = list(emb.stream(ModelInteraction(messages=[Messages.user("one"), Messages.user("two")])))
    vectors = [i.value.content for i in items if isinstance(i, Stream.Next)]
    assert (
        all(isinstance(v, ModelOutput.Embedding) and v.dimensions == 32 for v in vectors)
        and len(vectors) == 2
    )


def test_hf_model_string_and_its_options(tiny_dir: Path) -> None:
    m = model_from_string(f"hf:{tiny_dir}", dtype="float32", device="cpu")
    assert isinstance(m, TransformersModel) and m.descriptor.provider == "transformers"
    with pytest.raises(ConfigurationError, match="device"):
        model_from_string(f"hf:{tiny_dir}", device="tpu")
    with pytest.raises(ConfigurationError, match="could not load"):
        model_from_string(f"hf:{tiny_dir}/missing")


def test_agent_loop_calls_the_tool_then_answers_end_to_end(smol: TransformersModel) -> None:
    CALLS.clear()
    agent = (
        AgentSession.builder(smol)
        .with_system_prompt("You are a calculator. Use the add tool, then state the result.")
        .with_tools(add)
        .with_params(GREEDY)
        .with_max_iterations(inner=4)
        .build()
    )
    # force the call, then (a 135M model otherwise keeps calling) force the answer
    turn = agent.run_turn("What is 2 + 40?", tool_choice=[ToolChoice.Function("add"), ToolChoice.None_()])
    check_turn(turn, "")
    assert CALLS, "the real tool ran"


def test_cli_run_streams_an_answer_from_the_converted_model(smol_dir: Path, tmp_path: Path) -> None:
    env = {**os.environ, "FOUNDATION_AI_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "foundation_ai", "run", "-m", f"hf:{smol_dir}", "Hi"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()


def test_missing_extra_is_one_line_naming_it() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from foundation_ai import model\n"
        "try:\n    model('hf:/nowhere')\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.startswith("ConfigurationError") and "'transformers' extra" in out and out.count("\n") == 1
