"""Tokens per second through foundation_ai's transformers backend (``hf:DIR``) vs raw
``model.generate`` on the same model object and the same prompt, in the same run; the time to the
first token on both sides; and the per-token cost of constrained decoding (xgrammar, the
backend's choice, beside outlines when it is importable).

The model is the bundled SmolLM2-135M-Instruct converted to fp32 safetensors in a temporary
directory (tests/_hf_model.py; about 20 s on a quiet machine), or ``--hf-dir DIR``. Greedy
decoding, the same ``max_new_tokens`` on both sides; runs alternate (ours, raw / raw, ours).

**The raw peer** is what a ``transformers`` user writes: ``tokenizer.apply_chat_template(messages,
add_generation_prompt=True, return_dict=True, return_tensors="pt")`` then ``model.generate(**inputs,
max_new_tokens=N, do_sample=False, streamer=...)`` in the main thread, over the model's own
``generation_config`` (cache on, the checkpoint's dtype, the model's attention implementation:
the same model object as ours), with a streamer that only records when the first token came. Its
clock starts before the template is rendered, as ours starts at ``model.stream(...)``; both
prompts are checked to be the same tokens. Figures: output tokens per wall-clock second from the
call to the last token, per CPU-second of the process, and TTFT (call to first token, wall).

**Why an earlier run had raw 3x slower than ours** (found with a plain ``linear`` loop, 1x576 by
576x1536, in the main thread and in a worker thread of one process, load average 15-25 on these
2 cores): torch's OpenMP threads busy-wait between parallel regions (libgomp's default, active,
wait policy). On an oversubscribed machine one OpenMP team then stalls on its descheduled
spinning partner: with 2 torch threads the main thread ran 15-50x slower than a worker thread
(24-98 ops/s against 1,400-3,900), and with ``torch.set_num_threads(1)`` it was the reverse (the
worker's MKL team kept 2 threads). Our backend runs ``generate`` in a worker thread, the raw peer
in the main thread: the gap measured the wait policy, not the backends. With
``OMP_WAIT_POLICY=PASSIVE`` both threads ran alike (1,500-2,700 ops/s, 4,700-5,400 per CPU-s).
This bench sets it for the whole process (both sides) before torch loads, unless the environment
already sets it; torch threads, dtype and attention implementation are printed and are those of
the one shared model object.

**Constrained decoding** (``--constrained-tokens``): the same prompt asking for a JSON object,
raw ``generate`` with no processor, with xgrammar's ``LogitsProcessor`` (what the backend uses)
and with outlines' (``outlines.from_transformers`` + its ``outlines_core`` backend) for a JSON
Schema ``{"story": string}`` whose string keeps the answer going to ``max_new_tokens``; the
grammar is compiled outside the timed part (its compile time is printed). Also ours with
``output_format`` JSON Schema against ours unconstrained. Printed: ms per output token (wall and
CPU) and the added cost per token against the unconstrained run.

Run in its own process (``make bench`` runs every bench/*.py; the wait policy must be set before
torch loads): ``python bench/local_transformers.py [--reps 3] [--max-tokens 32] [--threads 2]
[--hf-dir DIR]``. outlines is measured only where it is importable (it is not a dependency).

Goal: ratio foundation_ai / raw >= 0.95 (tokens/s, median; printed as met / NOT met).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads: see the module docstring

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from foundation_ai.types import Messages, ModelInteraction, ModelParams, OutputFormat, Stream

PROMPT = "Write a long story about a lighthouse keeper who finds a message in a bottle."
JSON_PROMPT = "Answer with a JSON object whose only key is story: a long story about a lighthouse keeper."
STORY_SCHEMA = {
    "type": "object",
    "properties": {"story": {"type": "string"}},
    "required": ["story"],
    "additionalProperties": False,
}
GOAL = 0.95

Timed = tuple[float, float, int, float]
"""(wall seconds, CPU seconds, output tokens, seconds to the first token)"""


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def run_ours(model: Any, inter: ModelInteraction, params: ModelParams) -> Timed:
    tokens, ttft = 0, float("nan")
    t0, c0 = time.perf_counter(), time.process_time()
    for item in model.stream(inter, params):
        if isinstance(item, Stream.Next):
            tokens = int(item.value.usage.output)
            if tokens and ttft != ttft:
                ttft = time.perf_counter() - t0
    return time.perf_counter() - t0, time.process_time() - c0, tokens, ttft


class _First:
    """A ``generate`` streamer that records when the first new token came."""

    def __init__(self) -> None:
        self.seen_prompt, self.first = False, float("nan")

    def put(self, value: Any) -> None:
        if self.seen_prompt and self.first != self.first:
            self.first = time.perf_counter()
        self.seen_prompt = True

    def end(self) -> None:
        pass


def raw_inputs(tokenizer: Any, text: str) -> Any:
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, return_dict=True, return_tensors="pt"
    )


def run_raw(
    hf_model: Any,
    tokenizer: Any,
    text: str,
    max_tokens: int,
    processor: Any = None,
    texts: list[str] | None = None,
) -> Timed:
    import torch

    streamer = _First()
    eos = hf_model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos])
    extra = {"logits_processor": [processor]} if processor is not None else {}
    t0, c0 = time.perf_counter(), time.process_time()
    inputs = raw_inputs(tokenizer, text)
    with torch.inference_mode():
        out = hf_model.generate(
            **inputs, max_new_tokens=max_tokens, do_sample=False, streamer=streamer, **extra
        )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    new = out[0, inputs["input_ids"].shape[1] :].tolist()
    n = sum(1 for t in new if t not in eos_ids)
    if texts is not None:
        texts.append(tokenizer.decode(new, skip_special_tokens=True))
    return wall, cpu, n, streamer.first - t0


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


def _threads_seen() -> str:
    import torch

    seen: list[int] = []
    worker = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    worker.start()
    worker.join()
    return (
        f"torch threads: main {torch.get_num_threads()}, a worker thread {seen[0]}, "
        f"interop {torch.get_num_interop_threads()}; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}"
    )


def main(argv: list[str] | None = None) -> None:
    if importlib.util.find_spec("transformers") is None or importlib.util.find_spec("torch") is None:
        print("transformers backend: skipped (the 'transformers' extra is not installed)")
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--constrained-tokens", type=int, default=12)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hf-dir", default=None)
    args = ap.parse_args(argv)
    from foundation_ai.backends._transformers import transformers_model

    keep: list[Any] = []
    model = transformers_model(_model_dir(args.hf_dir, keep), threads=args.threads)
    hf, tok = model.hf_model, model.tokenizer
    inter = ModelInteraction(messages=[Messages.user(PROMPT)])
    params = ModelParams(max_tokens=args.max_tokens, temperature=0.0)
    ids = model.prompt_tokens(inter)
    same = raw_inputs(tok, PROMPT)["input_ids"][0].tolist() == ids
    print(
        f"transformers {model.model_id}  {hf.dtype}  attention {hf.config._attn_implementation}  "
        f"prompt {len(ids)} tokens (raw's the same: {same})  max_tokens {args.max_tokens}"
    )
    print(_threads_seen())
    print(f"model generation_config: {json.dumps(hf.generation_config.to_diff_dict(), sort_keys=True)}")
    print(load())
    run_ours(model, inter, params)  # warm-up
    run_raw(hf, tok, PROMPT, args.max_tokens)
    rows: dict[str, list[Timed]] = {"ours": [], "raw": []}
    for rep in range(args.reps):
        order = ["ours", "raw"] if rep % 2 == 0 else ["raw", "ours"]
        for which in order:
            rows[which].append(
                run_ours(model, inter, params)
                if which == "ours"
                else run_raw(hf, tok, PROMPT, args.max_tokens)
            )
        o, r = rows["ours"][-1], rows["raw"][-1]
        print(
            f"rep {rep + 1} ({o[2]}/{r[2]} tokens)  tok/s wall: ours {o[2] / o[0]:6.1f} raw {r[2] / r[0]:6.1f}  "
            f"TTFT ours {o[3] * 1000:6.0f} ms raw {r[3] * 1000:6.0f} ms  ({load()})"
        )
    _summary(rows)
    if args.constrained_tokens > 0:
        constrained(model, args.constrained_tokens)
    print(load())


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
        f"  (ratio {ttft_o / ttft_r:.2f})"
    )


def _outlines_processor(hf: Any, tok: Any) -> tuple[Any, str]:
    """outlines' JSON Schema processor over the same model, or ``(None, why not)``."""
    try:
        import outlines
        from outlines.backends.outlines_core import OutlinesCoreBackend
    except Exception as exc:
        return None, f"not importable ({type(exc).__name__}: {exc})"
    try:
        backend = OutlinesCoreBackend(outlines.from_transformers(hf, tok))
        return backend.get_json_schema_logits_processor(json.dumps(STORY_SCHEMA)), ""
    except Exception as exc:
        return None, f"failed on transformers {_version('transformers')} ({type(exc).__name__}: {exc})"


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def constrained(model: Any, n: int) -> None:
    """Per-token cost of constrained decoding, raw ``generate`` and ours (module docstring)."""
    from foundation_ai.backends._transformers_gen import constraint

    hf, tok = model.hf_model, model.tokenizer
    vocab = int(hf.config.vocab_size)
    print(f"-- constrained decoding: JSON Schema {{story: string}}, {n} tokens, greedy ({load()})")
    t0 = time.perf_counter()
    constraint(tok, vocab, STORY_SCHEMA)
    print(
        f"xgrammar {_version('xgrammar')}: first processor (tokenizer info + compile) {time.perf_counter() - t0:.2f} s"
    )
    t0 = time.perf_counter()
    constraint(tok, vocab, STORY_SCHEMA)
    print(f"xgrammar: next processor (cached compiler) {time.perf_counter() - t0:.3f} s")
    t0 = time.perf_counter()
    out_proc, why = _outlines_processor(hf, tok)
    if out_proc is not None:
        print(
            f"outlines {_version('outlines')}: processor (vocabulary index + regex) {time.perf_counter() - t0:.2f} s"
        )
    else:
        print(f"outlines: {why}")
    makers: dict[str, Any] = {"none": lambda: None, "xgrammar": lambda: constraint(tok, vocab, STORY_SCHEMA)}
    if out_proc is not None:
        makers["outlines"] = lambda: _outlines_processor(hf, tok)[0]
    per: dict[str, list[Timed]] = {k: [] for k in makers}
    texts: dict[str, list[str]] = {k: [] for k in makers}
    for name, make in makers.items():
        processor = make()  # built outside the timed call (one per generation: it keeps state)
        per[name].append(run_raw(hf, tok, JSON_PROMPT, n, processor, texts[name]))
    base = _per_token(per["none"])
    for name, timed in per.items():
        wall, cpu = _per_token(timed)
        print(
            f"raw generate, {name:8s}: {wall:7.1f} ms/token wall, {cpu:6.1f} ms/token CPU  "
            f"(+{cpu - base[1]:6.1f} ms CPU per token against none)  output {texts[name][0][:40]!r}"
        )
    inter = ModelInteraction(messages=[Messages.user(JSON_PROMPT)])
    plain = ModelParams(max_tokens=n, temperature=0.0)
    schema = ModelParams(
        max_tokens=n, temperature=0.0, output_format=OutputFormat.JsonSchema("story", STORY_SCHEMA)
    )
    ours = {"text": [run_ours(model, inter, plain)], "json schema": [run_ours(model, inter, schema)]}
    for name, timed in ours.items():
        wall, cpu = _per_token(timed)
        print(f"foundation_ai, {name:11s}: {wall:6.1f} ms/token wall, {cpu:6.1f} ms/token CPU")


def _per_token(timed: list[Timed]) -> tuple[float, float]:
    """Median ms per output token, (wall, CPU)."""
    return (
        statistics.median(t[0] / max(t[2], 1) for t in timed) * 1000,
        statistics.median(t[1] / max(t[2], 1) for t in timed) * 1000,
    )


if __name__ == "__main__":
    main()
