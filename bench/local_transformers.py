"""Tokens per second through foundation_ai's transformers backend (``hf:DIR``) vs raw
``model.generate`` on the same model object and the same prompt tokens, in the same run; and the
time to the first token on both sides.

The model is the bundled SmolLM2-135M-Instruct converted to fp32 safetensors in a temporary
directory (tests/_hf_model.py; about 20 s), or ``--hf-dir DIR``. Greedy decoding, the same
``max_new_tokens`` on both sides; runs alternate (ours, raw / raw, ours). The raw side is what a
``transformers`` user writes: ``model.generate(ids, max_new_tokens=N, do_sample=False,
streamer=...)`` with a streamer that only records when the first token came. Figures: output
tokens per wall-clock second from the call to the last item, and per CPU-second of the process.
Run by ``bench/local.py`` after the llama.cpp figures (``python bench/local.py``; this file alone
does nothing when run, so ``make bench`` measures it once); options through
``main(["--reps", "5", "--max-tokens", "64", "--threads", "2", "--hf-dir", DIR])``.

Goal: ratio foundation_ai / raw >= 0.95 (printed as met / NOT met).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from foundation_ai.types import GenerationMetadata, Messages, ModelInteraction, ModelParams, Stream

PROMPT = "Write a long story about a lighthouse keeper who finds a message in a bottle."
GOAL = 0.95

Timed = tuple[float, float, int, float]
"""(wall seconds, CPU seconds, output tokens, seconds to the first token)"""


def run_ours(model: Any, inter: ModelInteraction, params: ModelParams) -> Timed:
    tokens, ttft = 0, float("nan")
    t0, c0 = time.perf_counter(), time.process_time()
    for item in model.stream(inter, params):
        if isinstance(item, Stream.Next):
            tokens = int(item.value.usage.output)
            for meta in item.value.metadata or ():
                if isinstance(meta, GenerationMetadata.Timing) and meta.time_to_first_token is not None:
                    ttft = meta.time_to_first_token
    return time.perf_counter() - t0, time.process_time() - c0, tokens, ttft


def run_raw(model: Any, ids: list[int], max_tokens: int) -> Timed:
    import torch

    first: list[float] = []

    class _First:
        seen_prompt = False

        def put(self, value: Any) -> None:
            if self.seen_prompt and not first:
                first.append(time.perf_counter())
            self.seen_prompt = True

        def end(self) -> None:
            pass

    tensor = torch.tensor([ids])
    t0, c0 = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        out = model.hf_model.generate(
            tensor,
            attention_mask=torch.ones_like(tensor),
            max_new_tokens=max_tokens,
            do_sample=False,
            streamer=_First(),
        )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    new = out[0, len(ids) :].tolist()
    n = sum(1 for t in new if t not in model._eos)
    return wall, cpu, n, (first[0] - t0) if first else float("nan")


def _model_dir(given: str | None, keep: list[Any]) -> Path:
    if given:
        return Path(given)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests._hf_model import convert_bundled

    tmp = tempfile.TemporaryDirectory(prefix="fa-bench-hf-")
    keep.append(tmp)
    t0 = time.perf_counter()
    out = convert_bundled(Path(tmp.name))
    print(f"converted the bundled GGUF to safetensors in {time.perf_counter() - t0:.1f} s")
    return out


def main(argv: list[str] | None = None) -> None:
    if importlib.util.find_spec("transformers") is None or importlib.util.find_spec("torch") is None:
        print("transformers backend: skipped (the 'transformers' extra is not installed)")
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hf-dir", default=None)
    args = ap.parse_args(argv)
    from foundation_ai.backends._transformers import transformers_model

    keep: list[Any] = []
    model = transformers_model(_model_dir(args.hf_dir, keep), threads=args.threads)
    inter = ModelInteraction(messages=[Messages.user(PROMPT)])
    params = ModelParams(max_tokens=args.max_tokens, temperature=0.0)
    ids = model.prompt_tokens(inter)
    print(
        f"transformers {model.model_id}  threads {args.threads}  prompt {len(ids)} tokens  max_tokens {args.max_tokens}"
    )
    run_ours(model, inter, params)  # warm-up
    run_raw(model, ids, args.max_tokens)
    rows: dict[str, list[Timed]] = {"ours": [], "raw": []}
    for rep in range(args.reps):
        order = ["ours", "raw"] if rep % 2 == 0 else ["raw", "ours"]
        for which in order:
            rows[which].append(
                run_ours(model, inter, params) if which == "ours" else run_raw(model, ids, args.max_tokens)
            )
        o, r = rows["ours"][-1], rows["raw"][-1]
        print(
            f"rep {rep + 1} ({o[2]}/{r[2]} tokens)  tok/s wall: ours {o[2] / o[0]:6.1f} raw {r[2] / r[0]:6.1f}  "
            f"TTFT ours {o[3] * 1000:6.0f} ms raw {r[3] * 1000:6.0f} ms"
        )
    _summary(rows)


def _summary(rows: dict[str, list[Timed]]) -> None:
    for label, idx in (("tok/s (wall)", 0), ("tok/CPU-s", 1)):
        for stat, fn in (("median", statistics.median), ("best", max)):
            ours = fn(t[2] / t[idx] for t in rows["ours"])
            raw = fn(t[2] / t[idx] for t in rows["raw"])
            verdict = "met" if ours / raw >= GOAL else "NOT met"
            print(
                f"{stat} {label}: foundation_ai {ours:.1f}, raw transformers.generate {raw:.1f}  ->  "
                f"ratio {ours / raw:.3f} (goal >= {GOAL}: {verdict})"
            )
    ttft_o = statistics.median(t[3] for t in rows["ours"])
    ttft_r = statistics.median(t[3] for t in rows["raw"])
    print(
        f"median TTFT: foundation_ai {ttft_o * 1000:.0f} ms, raw transformers.generate {ttft_r * 1000:.0f} ms"
    )
