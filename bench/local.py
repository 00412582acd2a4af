"""The in-process llama.cpp backend (prebuilt ``xllamacpp`` engine) beside raw llama-cpp-python.

Same process, same GGUF file (the bundled SmolLM2-135M-Instruct unless ``--model``), same prompt
tokens (foundation_ai renders them; raw llama-cpp-python gets the token list), same seed and
sampler settings, same ``max_tokens``, same thread count. Measured:

1. **Speed**: output tokens per wall-clock second from the call to the last item (prompt
   evaluation included), output tokens per CPU-second of the whole process
   (``time.process_time``: steadier on a shared machine), and time to the first token (TTFT).
   Runs alternate (foundation_ai, raw) for ``--reps`` repetitions; medians and best runs are
   compared. Seeded calls evaluate the whole prompt on both sides (foundation_ai turns llama.cpp's
   prompt cache off for a seeded call; the raw side resets its cache).
2. **Tool calls and structured output on the bundled model**: of ``--trials`` seeds, how many
   forced calls (``ToolChoice.Function``) validate against the tool's schema, and how many
   ``OutputFormat.JsonSchema`` answers are JSON valid under the schema.
3. **Prefix reuse across turns**: a chat of ``--turns`` turns without a seed (the prompt cache
   on); the prompt tokens llama.cpp had to evaluate per turn and the TTFT of the first and last
   turns.

Raw llama-cpp-python is the ``bench`` extra (``make bench`` builds it without llama.cpp's AMX
kernels, which crash with SIGILL on VMs that advertise AMX). Usage::

    python bench/local.py [--reps 5] [--max-tokens 96] [--threads 2] [--trials 10] [--turns 8]

Goals: tokens/s ratio foundation_ai / raw >= 0.97 (CPU-seconds, median); TTFT ratio <= 1.1;
forced calls and structured output valid in every trial; turns after the first evaluate fewer
prompt tokens than the whole prompt (the cached prefix is reused).

The transformers backend against raw ``transformers.generate`` is ``bench/local_transformers.py``
(its own process: it sets OpenMP's wait policy before torch loads).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from pathlib import Path
from typing import Any

from foundation_ai.backends._llamacpp import LlamaCppModel, llamacpp
from foundation_ai.schema import compile_schema, scheme, violations_of
from foundation_ai.types import (
    Args,
    AssistantMessage,
    GenerationMetadata,
    Messages,
    ModelInteraction,
    ModelParams,
    OutputFormat,
    Stream,
    Tool,
    ToolCall,
    ToolChoice,
    ToolDeclarations,
    ToolDefinition,
)

PROMPT = "Write a long story about a lighthouse keeper who finds a message in a bottle."
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    arguments=Args.new(scheme.object().required("city", scheme.string().description("City name"))),
)
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
QUESTIONS = [
    "Tell me about lighthouses.",
    "Why are they painted in stripes?",
    "Who keeps them today?",
    "What is a Fresnel lens?",
    "How far can the light be seen?",
    "Name a famous lighthouse.",
    "What happened to the Pharos of Alexandria?",
    "Are there lighthouses on lakes?",
]

Timed = tuple[float, float, float, int]
"""(wall seconds, CPU seconds, TTFT seconds, output tokens)"""


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def run_ours(model: LlamaCppModel, inter: ModelInteraction, params: ModelParams) -> Timed:
    tokens, ttft = 0, 0.0
    t0, c0 = time.perf_counter(), time.process_time()
    for item in model.stream(inter, params):
        if isinstance(item, Stream.Next):
            if not ttft:
                ttft = time.perf_counter() - t0
            tokens = int(item.value.usage.output)
    return time.perf_counter() - t0, time.process_time() - c0, ttft, tokens


@functools.cache
def _amx() -> bool:
    try:
        return "amx_tile" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def raw_llama(path: str, n_ctx: int, threads: int) -> Any:
    """A ``llama_cpp.Llama`` over ``path``; llama.cpp's extra CPU buffer types (AMX tiles) off on
    CPUs that advertise AMX, as foundation_ai's engine does (llama-cpp-python has no option for
    ``use_extra_bufts``: its default-params factory is wrapped while loading)."""
    import llama_cpp

    low = llama_cpp.llama_cpp
    original = low.llama_model_default_params

    def defaults() -> Any:
        params = original()
        params.use_extra_bufts = not _amx()
        return params

    low.llama_model_default_params = defaults
    try:
        return llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, verbose=False)
    finally:
        low.llama_model_default_params = original


def run_raw(llama: Any, prompt_tokens: list[int], params: ModelParams) -> Timed:
    llama.reset()
    n, ttft = 0, 0.0
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in llama.create_completion(
        prompt=prompt_tokens,
        max_tokens=params.max_tokens,
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=int(params.top_k),
        min_p=0.05,
        repeat_penalty=params.repeat_penalty,
        seed=params.seed,
        stream=True,
    ):
        if not ttft:
            ttft = time.perf_counter() - t0
        n += 1
    return time.perf_counter() - t0, time.process_time() - c0, ttft, n


def speed(model: LlamaCppModel, args: argparse.Namespace) -> None:
    inter = ModelInteraction(messages=[Messages.user(PROMPT)])
    params = ModelParams(max_tokens=args.max_tokens, seed=args.seed)
    prompt_tokens = model.prompt_tokens(inter)
    try:
        raw = raw_llama(str(model.engine.path), model.engine.n_ctx, args.threads)
    except ImportError:
        raw = None
        print("raw llama-cpp-python is not installed (pip install -e '.[bench]'): no peer figures")
    print(f"model {model.model_id}  threads {args.threads}  prompt {len(prompt_tokens)} tokens")
    run_ours(model, inter, params)  # warm-up (page in the weights)
    if raw is not None:
        run_raw(raw, prompt_tokens, params)
    rows: dict[str, list[Timed]] = {"ours": [], "raw": []}
    for rep in range(args.reps):
        order = ["ours", "raw"] if rep % 2 == 0 else ["raw", "ours"]
        for which in order:
            if which == "ours":
                rows["ours"].append(run_ours(model, inter, params))
            elif raw is not None:
                rows["raw"].append(run_raw(raw, prompt_tokens, params))
        line = "  ".join(
            f"{k}: {r[-1][3] / r[-1][0]:5.1f} tok/s, {r[-1][3] / r[-1][1]:5.1f} tok/CPU-s, TTFT {r[-1][2] * 1000:4.0f} ms"
            for k, r in rows.items()
            if r
        )
        print(f"rep {rep + 1:2d}  {line}")
    if raw is None:
        return
    for stat, fn in (("median", statistics.median), ("best", max)):
        wall = {k: fn(t[3] / t[0] for t in r) for k, r in rows.items()}
        cpu = {k: fn(t[3] / t[1] for t in r) for k, r in rows.items()}
        print(
            f"{stat} tok/s: foundation_ai {wall['ours']:.1f}, raw {wall['raw']:.1f} (ratio "
            f"{wall['ours'] / wall['raw']:.3f});  tok/CPU-s: {cpu['ours']:.1f} vs {cpu['raw']:.1f} "
            f"(ratio {cpu['ours'] / cpu['raw']:.3f})"
        )
    ratio = statistics.median(t[3] / t[1] for t in rows["ours"]) / statistics.median(
        t[3] / t[1] for t in rows["raw"]
    )
    ttft = statistics.median(t[2] for t in rows["ours"]) / statistics.median(t[2] for t in rows["raw"])
    print(f"goal tokens/CPU-s ratio >= 0.97: {ratio:.3f} {met(ratio >= 0.97)}")
    print(f"goal TTFT ratio <= 1.1 (median): {ttft:.3f} {met(ttft <= 1.1)}")
    raw.close()


def tools_and_structure(model: LlamaCppModel, trials: int) -> None:
    shed = ToolDeclarations(tools=[Tool.SingleCommand(WEATHER)])
    calls = 0
    t0 = time.perf_counter()
    for seed in range(trials):
        inter = ModelInteraction(
            messages=[Messages.user("What's the weather in Paris?")],
            tools_shed=shed,
            tool_choice=ToolChoice.Function("get_weather"),
        )
        out = model.generate(inter, ModelParams(max_tokens=64, seed=seed))
        call = next(
            (m.content for m in out if isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall)),
            None,
        )
        if (
            call is not None
            and call.name == "get_weather"
            and WEATHER.arguments.violations(call.arguments) == []
        ):
            calls += 1
    call_s = (time.perf_counter() - t0) / trials
    valid = 0
    schema = compile_schema(PERSON)
    t0 = time.perf_counter()
    for seed in range(trials):
        inter = ModelInteraction(messages=[Messages.user("Invent a person.")])
        out = model.generate(
            inter,
            ModelParams(max_tokens=64, seed=seed, output_format=OutputFormat.JsonSchema("person", PERSON)),
        )
        try:
            value = json.loads(out[-1].text() or "") if out else None
        except ValueError:
            value = None
        if value is not None and violations_of(schema, value) == []:
            valid += 1
    json_s = (time.perf_counter() - t0) / trials
    print(f"forced tool calls valid: {calls}/{trials} ({call_s:.2f} s each)  {met(calls == trials)}")
    print(f"structured output valid: {valid}/{trials} ({json_s:.2f} s each)  {met(valid == trials)}")


def turns(model: LlamaCppModel, n: int, max_tokens: int) -> None:
    history: list[Messages] = []
    ttfts: list[float] = []
    evaluated: list[tuple[int, int]] = []
    for question in QUESTIONS[:n]:
        history.append(Messages.user(question))
        inter = ModelInteraction(system_prompt="You are a helpful assistant.", messages=list(history))
        before = time.perf_counter()
        out = model.generate(inter, ModelParams(max_tokens=max_tokens, temperature=0.0))
        ttft = next(
            (
                md.time_to_first_token
                for md in (out[-1].metadata or [])
                if isinstance(md, GenerationMetadata.Timing)
            ),
            None,
        )
        ttfts.append(ttft if ttft is not None else time.perf_counter() - before)
        whole = int(out[-1].usage.input)
        evaluated.append((whole, whole - model.engine.last_cached_tokens))
        history.extend(m for m in out if isinstance(m, AssistantMessage))
    for i, ((whole, new), t) in enumerate(zip(evaluated, ttfts, strict=True), 1):
        print(f"turn {i:2d}: prompt {whole:4d} tokens, evaluated {new:4d}, TTFT {t * 1000:5.0f} ms")
    reused = all(new < whole for whole, new in evaluated[1:])
    print(f"goal later turns evaluate only their new tokens (prefix reused): {met(reused)}")
    print(f"TTFT last / first turn: {ttfts[-1] / ttfts[0]:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--model", default=None, help="a GGUF path (default: the bundled SmolLM2)")
    args = ap.parse_args()
    model = llamacpp(args.model, n_ctx=2048, n_threads=args.threads)
    print("== speed: foundation_ai (xllamacpp) vs raw llama-cpp-python")
    speed(model, args)
    print("== tool calls and structured output on the model")
    tools_and_structure(model, args.trials)
    print("== prefix reuse across turns")
    turns(model, args.turns, 48)


if __name__ == "__main__":
    main()
