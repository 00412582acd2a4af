"""The first answer from a cold process: ``foundation-ai run "Hi"`` on the bundled model against
a plain script doing the same with the same engine.

Contenders, each a fresh process per run, timed whole (start to exit, ``time.perf_counter``
around ``subprocess.run``), alternated run by run so load changes hit them alike:

- ``foundation-ai run -q --max-tokens N --temperature 0 --seed 1 Hi`` (the installed script;
  ``HOME`` and the XDG directories point into a temporary directory, so the session store it
  opens is a fresh SQLite file there);
- raw xllamacpp: a script that imports ``xllamacpp``, opens the same GGUF with the settings the
  in-process backend uses (``backends/_llama_engine.py``: ``OMP_WAIT_POLICY=PASSIVE`` before
  the library loads, context 8,192, one slot, no warm-up,
  no context shift, no extra buffer types on CPUs that advertise AMX (``amx_tile``), a loopback listener on
  port 0), streams ``handle_chat_completions`` for the same user message with the same
  sampling (greedy, seed 1, N tokens) and prints the text;
- raw llama-cpp-python, the same way, when ``llama_cpp`` is installed (else reported skipped).

Prints each contender's median and minimum wall time over ``--runs`` runs (after one warm-up
run each, so the page cache holds the files), the ratio of medians to the raw xllamacpp script,
the goal (<= 1.1x: "met" / "NOT met") and the load average before and after. Also each
contender's median CPU time (user + system, all its threads, from ``getrusage`` of the child)
and the ratio of those: on a machine shared with other work the wall times stretch with the
queue for the CPUs, the CPU times much less, so they show what the process itself spends (the
goal is still judged on wall time).

The raw script is a fair floor: the same GGUF, context (8,192), slots (1), thread count
(llama.cpp's default in both), ``OMP_WAIT_POLICY``, warm-up (off), extra buffer types, the same
single user message rendered by the GGUF's chat template inside llama.cpp, the same
``max_tokens``, temperature 0 and seed, flash attention off as the backend sets it on the CPU
(with llama.cpp's default, ``auto``, the raw script's greedy answer was another, shorter one:
fewer tokens generated, an unfair floor; each answer is printed). Two differences remain, both of the product: the CLI
sends the model's recommended sampling (``top_p`` 0.9, ``repeat_penalty`` 1.1 over 64 tokens,
...) under ``temperature`` 0, so the answer is the same greedy one, and guards the loopback
listener with an API key.

Run: ``.venv/bin/python bench/cold_run.py [--runs 7] [--max-tokens 32]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 1.1
PROMPT = "Hi"

RAW_XLLAMACPP = r"""
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the backend: OpenMP workers sleep, not spin
import xllamacpp as xlc

path, max_tokens = sys.argv[1], int(sys.argv[2])
amx = any("amx_tile" in line.split() for line in open("/proc/cpuinfo") if line.startswith("flags"))
p = xlc.CommonParams()
p.model.path = path
p.n_ctx = 8192
p.n_parallel = 1
p.ctx_shift = False
p.warmup = False
p.verbosity = -1
p.no_extra_bufts = amx
p.hostnames = ["127.0.0.1"]
p.port = 0
# as the backend on the CPU: flash attention off (docs/models.md); with llama.cpp's "auto" the
# greedy answer differs (fewer tokens), so the two would not generate the same text
p.flash_attn_type = xlc.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
server = xlc.Server(p)
out = []

def on_chunk(chunk):
    for choice in chunk.get("choices") or ():
        out.append((choice.get("delta") or {}).get("content") or "")
    return False

body = {"messages": [{"role": "user", "content": sys.argv[3]}], "stream": True,
        "max_tokens": max_tokens, "temperature": 0.0, "seed": 1}
server.handle_chat_completions(body, on_chunk)
print("".join(out))
"""

RAW_LLAMA_CPP_PYTHON = r"""
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
from llama_cpp import Llama

path, max_tokens = sys.argv[1], int(sys.argv[2])
llm = Llama(model_path=path, n_ctx=8192, verbose=False, seed=1)
out = []
for chunk in llm.create_chat_completion(
    messages=[{"role": "user", "content": sys.argv[3]}], stream=True, max_tokens=max_tokens, temperature=0.0
):
    out.append(chunk["choices"][0]["delta"].get("content") or "")
print("".join(out))
"""


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def has(module: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode == 0


def _child_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds and CPU seconds (user + system) of one whole process, and its output.

    Raises:
        RuntimeError: the process failed.
    """
    cpu0 = _child_cpu()
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    took = time.perf_counter() - t0
    cpu = _child_cpu() - cpu0
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exit {done.returncode}: {done.stderr[-2000:]}")
    return took, cpu, done.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--max-tokens", type=int, default=32)
    args = ap.parse_args()
    from foundation_ai.backends._llama_source import bundled_model_path

    gguf = str(bundled_model_path())
    script = shutil.which("foundation-ai", path=str(Path(sys.executable).parent)) or "foundation-ai"
    n = str(args.max_tokens)
    with tempfile.TemporaryDirectory() as home:
        env = {
            **os.environ,
            "HOME": home,
            "XDG_DATA_HOME": f"{home}/data",
            "XDG_CONFIG_HOME": f"{home}/config",
        }
        env.pop("FOUNDATION_AI_DB", None)
        contenders = {
            "foundation-ai run": [
                script,
                "run",
                "-q",
                "--max-tokens",
                n,
                "--temperature",
                "0",
                "--seed",
                "1",
                PROMPT,
            ],
            "raw xllamacpp script": [sys.executable, "-c", RAW_XLLAMACPP, gguf, n, PROMPT],
        }
        if has("llama_cpp"):
            contenders["raw llama-cpp-python script"] = [
                sys.executable,
                "-c",
                RAW_LLAMA_CPP_PYTHON,
                gguf,
                n,
                PROMPT,
            ]
        print(f"cold first answer: {PROMPT!r}, {n} tokens at most, greedy; {args.runs} runs each; {gguf}")
        print(f"before: {load()}")
        if "raw llama-cpp-python script" not in contenders:
            print("raw llama-cpp-python script: skipped (llama_cpp is not installed: `make bench`)")
        times: dict[str, list[float]] = {name: [] for name in contenders}
        cpus: dict[str, list[float]] = {name: [] for name in contenders}
        answers: dict[str, str] = {}
        for name, cmd in contenders.items():  # warm-up: page cache, .pyc files
            answers[name] = timed(cmd, env)[2]
        for _ in range(args.runs):
            for name, cmd in contenders.items():
                wall, cpu, _out = timed(cmd, env)
                times[name].append(wall)
                cpus[name].append(cpu)
        for name, ts in times.items():
            print(
                f"{name:<30} median {statistics.median(ts):6.3f} s  min {min(ts):6.3f} s  "
                f"cpu median {statistics.median(cpus[name]):6.3f} s   answer {answers[name][:60]!r}"
            )
        keys = ("foundation-ai run", "raw xllamacpp script")
        ours, raw = (statistics.median(times[k]) for k in keys)
        ours_cpu, raw_cpu = (statistics.median(cpus[k]) for k in keys)
        ratio = ours / raw
        print(
            f"foundation-ai run / raw xllamacpp script: {ratio:.2f}x ({ours - raw:+.3f} s); "
            f"goal <= {GOAL}x: {'met' if ratio <= GOAL else 'NOT met'}"
        )
        print(f"CPU time, the same ratio: {ours_cpu / raw_cpu:.2f}x ({ours_cpu - raw_cpu:+.3f} s)")
        print(f"after: {load()}")


if __name__ == "__main__":
    main()
