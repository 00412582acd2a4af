"""Cold import time of ``foundation_ai`` (and, for comparison, ``pydantic_ai`` and ``openai``).

Each sample starts a fresh interpreter and times the import statement inside it (wall time with
``time.perf_counter``, CPU time with ``time.process_time``), so nothing is cached in-process; the
OS file cache is warm after the first run. Prints the median and min wall time and the median CPU
time of ``--runs`` samples in ms.

Goal (issue 2): ``import foundation_ai`` under 100 ms.

Run: ``.venv/bin/python bench/import.py [--runs 7]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

CHILD = (
    "import time; t = time.perf_counter(); c = time.process_time(); import {module}; "
    "print((time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000)"
)


def sample(module: str) -> tuple[float, float] | None:
    """(wall ms, CPU ms) to import ``module`` in a fresh interpreter, or ``None`` if it is missing.

    CPU time (``time.process_time``) hardly moves with machine load; wall time does.
    """
    proc = subprocess.run(
        [sys.executable, "-c", CHILD.format(module=module)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return None
    wall, cpu = proc.stdout.split()
    return float(wall), float(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("modules", nargs="*", default=["foundation_ai", "pydantic_ai", "openai"])
    ns = ap.parse_args()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"cold import, fresh process each run, {ns.runs} runs (load average {load}; figures scale with it)")
    print(f"{'module':<16}{'median ms':>11}{'min ms':>9}{'median CPU ms':>15}")
    for module in ns.modules:
        sample(module)  # warm the OS file cache
        got = [t for t in (sample(module) for _ in range(ns.runs)) if t is not None]
        if not got:
            print(f"{module:<16}{'not installed':>20}")
            continue
        wall = [w for w, _ in got]
        cpu = [c for _, c in got]
        print(f"{module:<16}{statistics.median(wall):>11.1f}{min(wall):>9.1f}{statistics.median(cpu):>15.1f}")
        if module == "foundation_ai":
            verdict = "met" if statistics.median(wall) < 100 else "NOT met"
            print(f"  goal (< 100 ms wall, median): {verdict}")


if __name__ == "__main__":
    main()
