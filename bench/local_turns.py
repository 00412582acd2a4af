"""Time to first token across the turns of one chat on the bundled model, beside raw llama-cpp-python.

A 20-turn chat on ``foundation_ai.backends.default_model()`` (SmolLM2-135M-Instruct): each
turn adds a user message, streams the answer (``max_tokens`` new tokens at most) and appends it
to the history, so turn n+1's prompt extends turn n's and llama.cpp can reuse its cached prefix.
Time to first token (TTFT) = from the call to the first text item, milliseconds, wall clock.

The peer, interleaved turn by turn in the same process: raw llama-cpp-python on its own
``llama_cpp.Llama`` over the same GGUF file (same ``n_ctx``; built by ``bench/local.py``'s
``raw_llama``, llama.cpp's AMX buffer types off on CPUs that advertise AMX), ``create_chat_completion(
stream=True)`` with the same messages and answers (llama-cpp-python renders the GGUF's chat
template itself and keeps its own prompt cache).

**The peer's build.** llama-cpp-python ships as source only and compiles on install. Built with
llama.cpp's defaults, its AMX kernels crash (SIGILL) on these VMs, whose CPUs advertise AMX. It
is built with them off, as ``make bench`` does (the ``bench`` extra; it took 60 min on these 2
cores at load average 9-25)::

    export CMAKE_ARGS="-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
    python -m pip install 'llama-cpp-python>=0.3.7'

With that build (0.3.36) the bench runs to completion (``raw_llama`` also turns the AMX buffer
types off at load time, like our engine). Without llama-cpp-python installed, or with
``--no-peer``, the bench runs our side alone and says so: the goal compares our turns with our own
turn 1, so it is judged the same way; only the peer's figures are missing.

**Phases** of each of our turns (milliseconds, printed per turn): ``prep`` from the call to the
request reaching llama.cpp (our Python: messages, request, thread hand-off); ``pre`` inside
llama.cpp before evaluating the prompt (template rendering, tokenization, prompt-cache lookup:
the time to the first chunk minus ``eval``); ``eval`` llama.cpp's own ``prompt_ms`` for the new
tokens (from the chunk ``timings``); ``post`` from the first chunk to the first text item. The
engine's ``generate`` is wrapped in this script to take the timestamps.

What grew (before the engine turned flash attention off on the CPU): ``eval``, llama.cpp's own
evaluation of the ~20 new tokens against the cached history; ``prep`` (our Python) and ``post``
stay flat. ``pre`` grows by tens of milliseconds at 1500+ tokens: llama.cpp renders the template
and tokenizes the whole conversation on every request (1809 tokens: ~21 ms of ``/tokenize`` at
load average 12, against ~2 ms for 33).

Both sides are warmed up once (an unrelated prompt) and their caches reset before turn 1.
Also checked, for every turn: the prompt tokens of turn n are a prefix of turn n+1's.

Goal (issue "Performance at scale", goal 4): TTFT at turn 20 at most 1.2x that of turn 1 (the
median of turns 1-3 and of turns 18-20 are compared, to damp the noise of a shared machine);
raw llama-cpp-python is printed beside it. Run: ``python bench/local_turns.py [--turns 20]
[--max-tokens 64] [--no-peer]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from foundation_ai.backends import default_model
from foundation_ai.types import AssistantMessage, Messages, ModelInteraction, ModelParams, Stream, TextContent

QUESTIONS = [
    "Tell me about lighthouses.",
    "Why are they painted in stripes?",
    "Who keeps them today?",
    "What is a Fresnel lens?",
    "How far can the light be seen?",
    "Name a famous lighthouse.",
    "What happened to the Pharos of Alexandria?",
    "Are there lighthouses on lakes?",
    "How do ships use them at night?",
    "What replaced lighthouse keepers?",
]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


class Phases:
    """Timestamps of one of our turns, taken by wrapping ``engine.generate`` (module docstring)."""

    def __init__(self, engine: Any) -> None:
        self.start = self.sent = self.first_chunk = self.first_text = 0.0
        self.eval_ms = 0.0
        original = engine.generate

        def generate(body: dict[str, Any], on_chunk: Any, *, chat: bool) -> None:
            self.sent = time.perf_counter()

            def chunk(c: dict[str, Any]) -> bool:
                if not self.first_chunk:
                    self.first_chunk = time.perf_counter()
                timings = c.get("timings")
                if isinstance(timings, dict) and not self.eval_ms:
                    self.eval_ms = float(timings.get("prompt_ms", 0.0))
                return bool(on_chunk(c))

            original(body, chunk, chat=chat)

        engine.generate = generate

    def reset(self) -> None:
        self.start = time.perf_counter()
        self.sent = self.first_chunk = self.first_text = 0.0
        self.eval_ms = 0.0

    def row(self) -> dict[str, float]:
        to_chunk = (self.first_chunk - self.sent) * 1e3
        return {
            "prep": (self.sent - self.start) * 1e3,
            "pre": to_chunk - self.eval_ms,
            "eval": self.eval_ms,
            "post": (self.first_text - self.first_chunk) * 1e3,
        }


def ours_turn(model: Any, history: list[Any], params: ModelParams, phases: Phases) -> tuple[float, str]:
    phases.reset()
    t0 = phases.start
    ttft = 0.0
    parts: list[str] = []
    for item in model.stream(ModelInteraction(messages=list(history)), params):
        if isinstance(item, Stream.Next):
            value = item.value.text() or ""
            if value and not ttft:
                phases.first_text = time.perf_counter()
                ttft = (phases.first_text - t0) * 1e3
            parts.append(value)  # the backend streams deltas
    return ttft, "".join(parts)


def raw_turn(llama: Any, messages: list[dict[str, str]], max_tokens: int) -> tuple[float, str]:
    t0 = time.perf_counter()
    ttft = 0.0
    parts: list[str] = []
    for chunk in llama.create_chat_completion(
        messages=messages, max_tokens=max_tokens, temperature=0.0, stream=True
    ):
        piece = chunk["choices"][0]["delta"].get("content") or ""
        if piece and not ttft:
            ttft = (time.perf_counter() - t0) * 1e3
        parts.append(piece)
    return ttft, "".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--no-peer", action="store_true", help="skip raw llama-cpp-python (our side only)")
    args = ap.parse_args()
    model = default_model()
    raw = None
    if args.no_peer:
        print("peer skipped (--no-peer): raw llama-cpp-python figures are not measured")
    else:
        try:
            from local import (
                raw_llama,
            )  # bench/local.py: the same peer, AMX buffer types off where advertised

            raw = raw_llama(str(model.engine.path), model.engine.n_ctx, 2)
        except ImportError:
            print("raw llama-cpp-python is not installed (pip install -e '.[bench]'): peer skipped")
    phases = Phases(model.engine)
    params = ModelParams(max_tokens=args.max_tokens, temperature=0.0)
    # warm up both (first evaluation costs more), then start from an empty cache
    ours_turn(model, [Messages.user("Warm up.")], params, phases)
    if raw is not None:
        raw_turn(raw, [{"role": "user", "content": "Warm up."}], args.max_tokens)
        raw.reset()
    history: list[Any] = []
    raw_messages: list[dict[str, str]] = []
    ours: list[float] = []
    peer: list[float] = []
    rows: list[dict[str, float]] = []
    prefix_ok = True
    previous: list[int] = []
    print(load())
    for n in range(args.turns):
        question = QUESTIONS[n % len(QUESTIONS)]
        history.append(Messages.user(question))
        tokens = model.prompt_tokens(ModelInteraction(messages=list(history)))
        if previous and tokens[: len(previous)] != previous:
            prefix_ok = False
        ttft, text = ours_turn(model, history, params, phases)
        row = phases.row()
        reused = model.engine.last_cached_tokens  # prompt tokens llama.cpp took from its cache
        history.append(AssistantMessage(model="smollm2", content=TextContent(text)))
        previous = tokens
        ours.append(ttft)
        rows.append(row)
        peer_text = ""
        if raw is not None:
            raw_messages.append({"role": "user", "content": question})
            raw_ttft, raw_text = raw_turn(raw, raw_messages, args.max_tokens)
            raw_messages.append({"role": "assistant", "content": raw_text})
            peer.append(raw_ttft)
            peer_text = f"   raw llama-cpp-python TTFT {raw_ttft:7.1f} ms"
        split = " ".join(f"{k} {v:6.1f}" for k, v in row.items())
        print(
            f"turn {n + 1:>2}  prompt {len(tokens):>5} tokens ({reused:>5} cached)  foundation_ai TTFT {ttft:7.1f} ms"
            f" ({split}){peer_text}  {load()}",
            flush=True,
        )
    print(load())
    head, tail = ours[:3], ours[-3:]
    ratio = statistics.median(tail) / statistics.median(head)
    print(
        f"foundation_ai TTFT turns 1-3 median {statistics.median(head):.1f} ms (min {min(head):.1f}),"
        f" turns {args.turns - 2}-{args.turns} median {statistics.median(tail):.1f} ms (min {min(tail):.1f}):"
        f" ratio {ratio:.2f}x"
    )
    for phase in rows[0]:
        first = statistics.median(r[phase] for r in rows[:3])
        last = statistics.median(r[phase] for r in rows[-3:])
        print(
            f"  phase {phase:<4} turns 1-3 median {first:7.1f} ms, last 3 turns {last:7.1f} ms: +{last - first:.1f} ms"
        )
    if peer:
        raw_ratio = statistics.median(peer[-3:]) / statistics.median(peer[:3])
        print(
            f"raw llama-cpp-python TTFT turns 1-3 median {statistics.median(peer[:3]):.1f} ms,"
            f" turns {args.turns - 2}-{args.turns} median {statistics.median(peer[-3:]):.1f} ms: ratio {raw_ratio:.2f}x"
        )
    else:
        print("raw llama-cpp-python: not measured (peer skipped)")
    print(f"prompt of turn n a token prefix of turn n+1's: {'yes' if prefix_ok else 'NO'}")
    print(
        f"goal: TTFT at turn {args.turns} <= 1.2x turn 1: {ratio:.2f}x -> {'met' if ratio <= 1.2 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
