"""Tokens per second through foundation_ai's llama.cpp backend vs raw llama-cpp-python.

Same process, same ``llama_cpp.Llama`` instance, same prompt tokens (foundation_ai's prompt
builder renders them; raw gets the token list), same seed and sampler settings, same max_tokens.
Runs alternate (foundation_ai sync, foundation_ai async, raw) for several repetitions; the
medians and the best runs (the least disturbed by other processes) are compared. The raw side
is ``Llama.create_completion(stream=True)`` consumed chunk by chunk, i.e. what a user of
llama-cpp-python writes. Before every run the KV cache is reset so both sides evaluate the whole
prompt (foundation_ai does this whenever a seed is given, to make seeded output reproducible).

Figures: output tokens per wall-clock second from the call to the last item (prompt evaluation
included), and output tokens per CPU-second of the whole process (``time.process_time``: all
threads), which is steadier on a shared machine where wall-clock time mostly measures the
neighbours. Usage::

    python bench/local.py [--reps 7] [--max-tokens 128] [--threads 2]

Goal: ratio foundation_ai / raw >= 0.97. Then the transformers backend against raw
``transformers.generate`` (``bench/local_transformers.py``; skipped without the extra).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from foundation_ai.backends._llamacpp import LlamaCppModel, llamacpp
from foundation_ai.types import Messages, ModelInteraction, ModelParams, Stream

PROMPT = "Write a long story about a lighthouse keeper who finds a message in a bottle."


Timed = tuple[float, float, int, str]
"""(wall seconds, CPU seconds, output tokens, text)"""


def run_ours(model: LlamaCppModel, inter: ModelInteraction, params: ModelParams) -> Timed:
    model.llama.reset()
    text: list[str] = []
    tokens = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for item in model.stream(inter, params):
        if isinstance(item, Stream.Next):
            text.append(item.value.text() or "")
            tokens = int(item.value.usage.output)
    return time.perf_counter() - t0, time.process_time() - c0, tokens, "".join(text)


def run_ours_async(model: LlamaCppModel, inter: ModelInteraction, params: ModelParams) -> Timed:
    async def go() -> Timed:
        model.llama.reset()
        text: list[str] = []
        tokens = 0
        t0, c0 = time.perf_counter(), time.process_time()
        async for item in model.astream(inter, params):
            if isinstance(item, Stream.Next):
                text.append(item.value.text() or "")
                tokens = int(item.value.usage.output)
        return time.perf_counter() - t0, time.process_time() - c0, tokens, "".join(text)

    return asyncio.run(go())


def run_raw(llama: Any, prompt_tokens: list[int], params: ModelParams) -> tuple[float, float, str]:
    llama.reset()
    text: list[str] = []
    t0, c0 = time.perf_counter(), time.process_time()
    for chunk in llama.create_completion(
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
        text.append(chunk["choices"][0]["text"])
    return time.perf_counter() - t0, time.process_time() - c0, "".join(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()

    model = llamacpp(n_ctx=2048, n_threads=args.threads)
    inter = ModelInteraction(messages=[Messages.user(PROMPT)])
    params = ModelParams(max_tokens=args.max_tokens, seed=args.seed)
    prompt_tokens = model.prompt_tokens(inter)
    print(
        f"model {model.model_id}  threads {args.threads}  prompt {len(prompt_tokens)} tokens  max_tokens {args.max_tokens}"
    )

    run_ours(model, inter, params)  # warm-up (page in the weights)
    run_raw(model.llama, prompt_tokens, params)
    wall: dict[str, list[float]] = {"sync": [], "async": [], "raw": []}
    cpu: dict[str, list[float]] = {"sync": [], "async": [], "raw": []}
    mismatches = 0
    for rep in range(args.reps):
        order = ["sync", "async", "raw"] if rep % 2 == 0 else ["raw", "async", "sync"]
        got: dict[str, Any] = {}
        for which in order:
            if which == "sync":
                got[which] = run_ours(model, inter, params)
            elif which == "async":
                got[which] = run_ours_async(model, inter, params)
            else:
                got[which] = run_raw(model.llama, prompt_tokens, params)
        _, _, n, text = got["sync"]
        _, _, an, atext = got["async"]
        rwall, rcpu, rtext = got["raw"]
        if rtext != text or atext != text:
            mismatches += 1
        raw_n = n if rtext == text else len(model.llama.tokenize(rtext.encode(), add_bos=False))
        for key, (w, c, k) in {
            "sync": (got["sync"][0], got["sync"][1], n),
            "async": (got["async"][0], got["async"][1], an),
            "raw": (rwall, rcpu, raw_n),
        }.items():
            wall[key].append(k / w)
            cpu[key].append(k / c)
        print(
            f"rep {rep + 1:2d} ({n} tokens)  tok/s wall: sync {wall['sync'][-1]:6.1f} async {wall['async'][-1]:6.1f} "
            f"raw {wall['raw'][-1]:6.1f}   tok/CPU-s: sync {cpu['sync'][-1]:6.1f} async {cpu['async'][-1]:6.1f} "
            f"raw {cpu['raw'][-1]:6.1f}"
        )
    for label, table in (("tok/s (wall)", wall), ("tok/CPU-s", cpu)):
        for stat, fn in (("median", statistics.median), ("best", max)):
            v = {k: fn(x) for k, x in table.items()}
            print(
                f"{stat} {label}: foundation_ai sync {v['sync']:.1f}, async {v['async']:.1f}, "
                f"raw llama-cpp-python {v['raw']:.1f}  ->  ratio sync {v['sync'] / v['raw']:.3f}, "
                f"async {v['async'] / v['raw']:.3f}  (goal >= 0.97)"
            )
    if mismatches:
        print(f"note: {mismatches} repetition(s) produced different text on the two sides")


if __name__ == "__main__":
    main()
    from local_transformers import main as transformers_main  # the transformers backend (hf:DIR)

    transformers_main([])
